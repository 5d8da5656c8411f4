"""Files -> events.  Imports neither torch nor Textual."""

from tuiprof.trace.load import LoadProgress, load_trace, load_trace_file
from tuiprof.trace.source import TraceFile, list_traces, resolve_trace
from tuiprof.trace.store import TraceEvents

__all__ = ["LoadProgress", "TraceEvents", "TraceFile", "list_traces", "load_trace", "load_trace_file", "resolve_trace"]

"""Events -> the model every view reads.  Pure Python: no torch, no Textual."""

from tuiprof.analysis.build import analyze, load_model
from tuiprof.analysis.model import TraceInfo, TraceModel

__all__ = ["TraceInfo", "TraceModel", "analyze", "load_model"]

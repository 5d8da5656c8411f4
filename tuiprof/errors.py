"""The one error type a user sees (which file, what is wrong, what to do), and
the exit codes every command uses."""

from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug: one line, a traceback with TUIPROF_DEBUG=1
EXIT_BAD_INPUT = 2  # a path, trace or option tuiprof cannot use
EXIT_INTERRUPTED = 130  # q or Ctrl-C before the work was done (128 + SIGINT)


class TraceError(Exception):
    """A trace that cannot be opened; rendered as one line on stderr."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, source: str, problem: str, remedy: str) -> None:
        super().__init__(f"{source}: {problem}; {remedy}")
        self.source = source
        self.problem = problem
        self.remedy = remedy

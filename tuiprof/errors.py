"""The one error type a user sees: which file, what is wrong, what to do."""

from __future__ import annotations


class TraceError(Exception):
    """A trace that cannot be opened; rendered as one line on stderr, exit code 2."""

    def __init__(self, source: str, problem: str, remedy: str) -> None:
        super().__init__(f"{source}: {problem}; {remedy}")
        self.source = source
        self.problem = problem
        self.remedy = remedy

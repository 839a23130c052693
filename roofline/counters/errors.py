"""The one error type the counter readers raise."""
from __future__ import annotations

from roofline.io.errors import RooflineError


class CounterReadError(RooflineError, ValueError):
    """A counter file that cannot be read. The message is one line: '<file>: <problem>'. A
    ValueError too, for callers that catch a bad value of any kind."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = " ".join(str(problem).split())  # keep it on one line
        super().__init__(f"{self.path}: {self.problem}")

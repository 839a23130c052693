"""The one error type the counter readers raise."""
from __future__ import annotations


class CounterReadError(ValueError):
    """A counter file that cannot be read. The message is one line: '<file>: <problem>'."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = " ".join(str(problem).split())  # keep it on one line
        super().__init__(f"{self.path}: {self.problem}")

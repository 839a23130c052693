"""Typed errors. Internal code raises these; only the CLI, the hook and the per-entry loop turn
them into exit codes, `degraded[]` or `skill_errors[]` (house rule 5)."""
from __future__ import annotations


class RooflineError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(RooflineError):
    """A malformed input file: the message is one line naming the file, the JSON path and what
    was expected. The CLI exits 2 on it."""

    def __init__(self, file: str, path: str, expected: str):
        self.file, self.path, self.expected = str(file), path, expected
        where = f"{self.file}: {path}" if path else self.file
        super().__init__(f"{where}: {expected}")


class EntryError(RooflineError):
    """One Top-N entry cannot be analysed (impossible value, unmodelable class, missing shape).
    Degrades that entry only (level L2)."""


class PeaksError(RooflineError):
    """No usable peak table for the device."""

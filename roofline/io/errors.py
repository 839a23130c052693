"""Typed errors: one tree rooted at RooflineError. Internal code raises these; only the edge (the
commands under roofline/commands and the CLI, the hook and the API, the per-entry loop of the
analysis, stage C's re-run of one head) turns them into exit codes, `degraded[]`, `skill_errors[]`
or an artifact's L4 note (fail loudly inside, degrade at the edge: docs/method.md section 7). Nothing compares an error's class name as a string.

The tree (tests/test_error_tree.py checks that every exception class defined in roofline/, ladder/
and peaks/ is in it; a second base is kept where callers also catch a builtin):

    RooflineError
      InputError            a malformed input file (roofline.core.inputs)
      EntryError            one Top-N entry cannot be analysed (degrades that entry, L2)
      PeaksError            no usable peak table; PeaksMdError (peaks/md.py): a malformed peaks.md
      RerunError            stage C's re-run cannot be done (no GPU; its Top-N is gone); a RuntimeError
        CounterCollectError   the ncu / nsight-python run of a re-run failed (L4: the analytic result stays)
      CounterReadError      a counter file that cannot be read (roofline.counters); a ValueError
      UnitError             a unit the one ncu unit table does not know (roofline.counters.units); a ValueError
      UnsafeInput           a path that is not a regular file or breaks a size limit (roofline.io.safeio); an OSError
        CorruptGzip           gzip data that does not decompress or ends early (roofline.io.safeio)
      TraceError, TopNError, NcuError   the Top-N builders' inputs (roofline/ingest)
      FeedbackError         a measurement or round that cannot be used (roofline/stagec: feedback, compare)
      AdviseError, BuildError   the ladder's advice and build (BuildError: a RuntimeError)
      NoGPU                 `roofline peaks measure` without a usable GPU; a RuntimeError
"""
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


class RerunError(RooflineError, RuntimeError):
    """Stage C's isolated re-run cannot be done here (no GPU, the Top-N behind the artifact is
    gone). One line; `roofline rerun` exits 2 on it, the hook returns it as its error."""


class FeedbackError(RooflineError):
    """A measurement or a round cannot be used (one line: what and where)."""


class CounterCollectError(RerunError):
    """The ncu / nsight-python run that counts a re-run's work mix failed. Level L4: the re-run
    stays, its `measured.counters` records the error line, the analytic bytes stay."""

"""One measurement of one logical op, whatever its source: the value the analysis applies.

Every counter source arrives as KernelCounters (an ncu report or CSV, rocprof, counters embedded
in a Top-N, a stage-C re-run's record, roofline/counters/records.py); `of` turns one matched
record into a Measurement: the counter reading the procedure merges (None when the record read no
counter: a re-run that carries its timing only) and the isolated ladder/library timing of a
stage-C re-run (None for every other source). The analysis builds these once, after matching
(roofline/core/analysis.py), and hands the reading and the isolated timing on from this one value.
Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import KernelCounters


@dataclass(frozen=True)
class Measurement:
    name: str                              # the Top-N entry it measures
    source: str                            # the record's source ("ncu-rep", "rerun: ...", ...)
    reading: KernelCounters | None         # per-launch counters; None: nothing was read
    isolated: dict | None = None           # a stage-C re-run's isolated timing; None otherwise

    @property
    def dram_bytes(self) -> float | None:
        return self.reading.dram_bytes if self.reading else None

    @property
    def flops_issued(self) -> float | None:
        return self.reading.flops_issued if self.reading else None

    @property
    def t_ms(self) -> float | None:
        return self.reading.t_ms if self.reading else None


def of(name: str, kc: KernelCounters) -> Measurement:
    """The measurement entry `name` gets from its matched record `kc`."""
    return Measurement(name=name, source=kc.source, reading=None if kc.read_nothing else kc,
                       isolated=kc.rerun or None)


def measurements(matched: dict[str, KernelCounters]) -> dict[str, Measurement]:
    """Entry name -> its Measurement, for every matched record (in the matching's order)."""
    return {n: of(n, kc) for n, kc in matched.items()}


def isolated_timings(meas: dict[str, Measurement]) -> dict[str, dict]:
    """Entry name -> isolated re-run timing, for the measurements that carry one."""
    return {n: m.isolated for n, m in meas.items() if m.isolated}

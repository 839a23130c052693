"""Stage C's one measurement record: what a re-run's profiler run counted for the work mix of ONE
logical op of a head (roofline/stagec/profiler.py writes the mix, `Measurement.from_mix` reads
it), and how it enters the analysis: as the per-LAUNCH counter record (`per_launch`) that the
stage-C merge (roofline/core/merge.py) reads for every counter source alike.

Units: ms, bytes, FLOPs. A logical op is `launches_per_logical_op` launches of the head's kernel
(docs/method.md section 3); the merge multiplies a per-launch record back by that count, so the
measured work of one logical op is what the entry shows (`bytes_measured`, `flops_issued`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from roofline.counters.base import KernelCounters


@dataclass
class Measurement:
    """One logical op's work mix, measured in isolation (`target`: "cublas" = the library kernel
    the run used, or "ladder"). `work_mix`: the problems it covers, each with its own counts and
    weight (the mix is sum(weight_i x problem_i)); None fields were not measured."""
    source: str                      # "ncu-cli" | "nsight-python"
    target: str
    l2_mode: str                     # "cold" (flushed before the launch) | "warm"
    t_ms: float | None               # per logical op
    dram_bytes: float | None         # per logical op, read + write
    flops_by_dtype: dict = field(default_factory=dict)   # issued tensor-pipe FLOPs per logical op
    l2_bytes: float | None = None
    work_mix: list = field(default_factory=list)
    launched: str | None = None      # what ran: "torch._grouped_mm", "ladder level 12", ... (None: say target)

    @classmethod
    def from_mix(cls, mix: dict | None) -> "Measurement | None":
        """The profiler's mix dict (collect_mix_counters); None when it holds no DRAM byte count
        (not collected, a failed run: level L4, the analytic bytes stay)."""
        if not mix or mix.get("error") or not mix.get("dram_bytes"):
            return None
        fl = mix.get("flops_issued")
        # the issued tensor FLOPs by source dtype (fp8 levels and torch._scaled_mm issue fp8, not bf16:
        # the merge's roof and plausibility read the dtype); a mix recorded before they were kept
        # apart (fixtures/rerun_real: dense bf16 runs only) holds their sum, all bf16
        by = {d: v for d, v in (mix.get("tensor_flops_by_dtype") or {}).items() if v}
        if "tensor_flops_by_dtype" not in mix and fl:
            by = {"bf16": fl}
        return cls(source=mix.get("source", "ncu"), target=mix.get("target"), l2_mode=mix.get("l2_mode"),
                   t_ms=mix.get("t_ms"), dram_bytes=mix["dram_bytes"], flops_by_dtype=by,
                   l2_bytes=mix.get("l2_bytes"), work_mix=list(mix.get("per_problem") or []),
                   launched=mix.get("launched"))

    def per_launch(self, name: str, launches_per_logical_op: int | None) -> KernelCounters:
        """The record the merge reads: per LAUNCH (this logical op / its launches), named as the
        entry so it matches it exactly."""
        n_l = launches_per_logical_op or 1
        return KernelCounters(
            name=name, launches=1,
            source=f"rerun {self.source}: {self.launched or self.target} isolated, L2 {self.l2_mode}, "
                   f"{len(self.work_mix)} problem(s) of the work mix",
            t_ms=self.t_ms / n_l if self.t_ms else None, dram_bytes=self.dram_bytes / n_l,
            tensor_flops_by_dtype={d: v / n_l for d, v in self.flops_by_dtype.items()},
            l2_bytes=self.l2_bytes / n_l if self.l2_bytes else None)


def counters_record(entry: dict, mix: dict | None) -> KernelCounters | None:
    """A re-run's counter mix as the per-launch record of `entry` (None: no DRAM byte count)."""
    m = Measurement.from_mix(mix)
    return None if m is None else m.per_launch(entry["name"], entry.get("launches_per_logical_op"))

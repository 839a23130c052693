"""Stage C: may a matched counter record be believed? (docs/input_policy.md, "Counters")

A record is used only when its numbers can be a measurement of the kernel it was matched to.
Otherwise it is L4, "implausible counters", with each reason said: the stage A/B analytic
result is kept and the confidence is not raised (never "high" on an impossible reading).

Each rule is a hard limit of the hardware or of the work, not a tuned factor:

1. a reading is a finite number >= 0 (a duration > 0): NaN, infinity, a negative count or a
   zero duration is no measurement;
2. DRAM cannot move more than its pins: DRAM bytes / the record's own duration above the memory
   roof (the report's own peak when the record carries it, ncu's dram__bytes peak x the DRAM
   clock it ran at; else the peak table's HBM pin rate) is impossible. Streaming reaches about
   0.88 of the pin rate (the H200's measured copy: peaks/h200.yaml), so no slack is needed;
3. the tensor cores cannot do more than their peak: the sum over dtypes of tensor FLOPs /
   (the dtype's peak x duration) above 1 is impossible. The peak is the report's own (peak ops per
   cycle x the SM clock it ran at) when the record carries it, else the table's highest figure
   for the dtype: the vendor's dense datasheet figure, which the best measured GEMMs reach to
   about 0.80 (peaks/h200.yaml);
4. a kernel moves at least its operands: where the model's bytes are compulsory (a dense GEMM or
   an elementwise / norm / quant op on captured shapes: every operand byte read once, every output
   byte written once), DRAM bytes per logical op below (model bytes - launches x L2 capacity) are
   impossible: at most one L2 of operands can already be on chip when a launch starts, and at most
   one L2 of output can stay unwritten when it ends. The L2 capacity is the peak table's
   `l2_bytes`; without it, or where the model's bytes are an estimate (MoE experts hit,
   attention's mean context), this rule is not applied.

Durations: the record's own (the counters and their time are one measurement), else the Top-N's.
"""
from __future__ import annotations

import math
from typing import Any

from roofline.core import opclasses
from roofline.counters.base import KernelCounters

_READINGS = ("t_ms", "dram_bytes", "dram_read_bytes", "dram_write_bytes", "cuda_core_flops", "l2_bytes",
             "l1_bytes", "report_peak_hbm_bw_bytes_s", "report_sm_clock_hz")


def _ok(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _pos(v: Any) -> float | None:
    return float(v) if _ok(v) and v > 0 else None


def _g(x: float) -> str:
    return f"{x:.3g}"


def bad_readings(kc: KernelCounters) -> list[str]:
    """Rule 1: the readings that are no measurement."""
    out = [f"{f} is {getattr(kc, f)}" for f in _READINGS if getattr(kc, f) is not None and not _ok(getattr(kc, f))]
    out += [f"tensor FLOPs ({d}) are {v}" for d, v in (kc.tensor_flops_by_dtype or {}).items()
            if v is not None and not _ok(v)]
    # a reader that kept the cells holding no number names them (file row and column)
    cells = f" (the file's cells: {'; '.join(kc.bad_cells[:3])})" if out and getattr(kc, "bad_cells", None) else ""
    return [f"{r}: not a count or a time{cells}" for r in out] + (["t_ms is 0: no kernel runs in no time"]
                                                            if kc.t_ms == 0 else [])


def _tensor_peak(kc: KernelCounters, peaks, dtype: str) -> float | None:
    """The FLOP/s the tensor cores cannot pass for `dtype` (rule 3)."""
    per_cycle, clock = _pos(kc.extra.get(f"peak_tensor_ops_per_cycle_dense.{dtype}")), _pos(kc.report_sm_clock_hz)
    if per_cycle and clock:
        return per_cycle * clock
    fig = ((peaks.raw or {}).get("flops") or {}).get(dtype)
    values = [peaks.compute_peak(dtype)]
    if isinstance(fig, dict):
        values += [(b.get("value") if isinstance(b, dict) else b) for b in fig.values()]
    values = [x for x in (_pos(v) for v in values) if x]
    return max(values) if values else None


def implausible(kc: KernelCounters, peaks, op_kind: str, shape_source: str, model_bytes: float,
                t_launch_s: float, n_launches: int) -> list[str]:
    """Why `kc` cannot be a measurement of this head ([] when it may be believed)."""
    why = bad_readings(kc)
    if why:
        return why
    t_s = kc.t_ms / 1e3 if _pos(kc.t_ms) else t_launch_s
    if kc.dram_bytes and t_s > 0:
        roof = _pos(kc.report_peak_hbm_bw_bytes_s) or _pos(peaks.hbm_bw_bytes_s)
        if roof and kc.dram_bytes / t_s > roof:
            why.append(f"{_g(kc.dram_bytes)} DRAM bytes in {_g(t_s * 1e6)} us is {_g(kc.dram_bytes / t_s)} B/s, "
                       f"above the memory roof {_g(roof)} B/s")
    load, parts = 0.0, []
    for d, fl in (kc.tensor_flops_by_dtype or {}).items():
        peak = _tensor_peak(kc, peaks, d) if fl else None
        if peak and t_s > 0:
            load += fl / (peak * t_s)
            parts.append(f"{_g(fl)} {d}")
    if load > 1.0:
        why.append(f"tensor FLOPs ({', '.join(parts)}) in {_g(t_s * 1e6)} us need {load:.0%} of the tensor peak")
    l2 = _pos((peaks.raw or {}).get("l2_bytes"))
    if l2 and opclasses.of(op_kind).compulsory_bytes and shape_source == "captured" and kc.dram_bytes is not None:
        floor = model_bytes - n_launches * l2
        if kc.dram_bytes * n_launches < floor:
            why.append(f"{_g(kc.dram_bytes * n_launches)} DRAM bytes per logical op, below the {_g(floor)} the "
                       f"operands need ({_g(model_bytes)} model bytes - {n_launches} x {_g(l2)} L2 bytes)")
    return why

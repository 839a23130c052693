"""Stage C's merge of one matched counter record into an artifact entry: `apply_stage_c`, the step
of the per-entry procedure (roofline/core/procedure.py) that every counter source goes through
(`analyze --counters`, the counters a Top-N carries, a re-run's measured work mix), first the
plausibility rules (roofline/core/plausible.py), then one of two cases (docs/method.md, stage C):

- the entry has a byte/FLOP model (captured or stage-A shapes): MEASURED DRAM bytes replace the
  model's on the memory axis, the model's USEFUL FLOPs stay on the compute axis, the issued FLOPs
  and the measured/model ratios are recorded (`apply_counters`);
- the entry has NO model (no shapes: the Top-N of an Nsight Compute report, a CUDA-graph replay)
  but its counters hold DRAM bytes: the counters are its work (`measured_result`): the memory
  axis is the measured DRAM bytes, the compute axis the ISSUED FLOPs (tensor pipe, padding
  included: at least the useful work), and the useful FLOPs are unknown and said so
  (`apply_measured`).

Pure functions: numbers in, fields and notes out. Units: bytes, FLOPs, seconds (t_s), bytes/s.
"""
from __future__ import annotations

import math
from typing import Any

from roofline.core.entry import UNSET, Measured
from roofline.counters.base import KernelCounters
from roofline.peaks import Peaks
from roofline.core.plausible import implausible


def counters_block(kc: KernelCounters) -> dict:
    """The entry's `counters` object: the record as read, a value that is no number written as null."""
    def num(v):
        return v if v is None or (isinstance(v, (int, float)) and math.isfinite(v)) else None

    out = {"source": kc.source, "launches": kc.launches, "t_ms": num(kc.t_ms), "dram_bytes": num(kc.dram_bytes),
           "flops_issued": num(kc.flops_issued),
           "tensor_flops_by_dtype": {d: num(v) for d, v in (kc.tensor_flops_by_dtype or {}).items()},
           "cuda_core_flops": num(kc.cuda_core_flops), "l2_bytes": num(kc.l2_bytes), "l1_bytes": num(kc.l1_bytes),
           "unstable": kc.unstable}
    if kc.extra:
        out["extra"] = {k: num(v) for k, v in kc.extra.items()}
    if getattr(kc, "derived_from_rate", None):
        out["derived_from_rate"] = list(kc.derived_from_rate)
    return out


def explained_by_mix(kc: KernelCounters, per_shape: list[tuple[float, float, float]], notes: list[str]
                     ) -> KernelCounters:
    """Launches of one kernel name that disagree (`unstable`) because the entry itself is a mix of
    captured shapes (a grouped GEMM's gate_up and down launches): where the counters' spread of DRAM
    bytes and of issued FLOPs is the spread of the entry's per-shape model bytes and FLOPs (within
    the aggregate's band), the mean over the launches is the entry's mix, and the record is used.
    per_shape: (launch weight, bytes, FLOPs) of each shape. NB: assumes the profiled launches hold
    the shapes in the entry's proportions (one step of the same run); said in the notes."""
    from roofline.counters.aggregate import UNSTABLE_BAND

    if not kc.unstable or len(per_shape) < 2:
        return kc
    tot = sum(w for w, _, _ in per_shape)

    def model_spread(i):
        vals = [x[i] for x in per_shape]
        mean = sum(x[0] * x[i] for x in per_shape) / tot if tot else 0.0
        return (max(vals) - min(vals)) / mean if mean > 0 else None

    pairs = [(kc.extra.get("launch_spread.dram_bytes"), model_spread(1))]
    if kc.extra.get("launch_spread.flops_issued") is not None:
        pairs.append((kc.extra["launch_spread.flops_issued"], model_spread(2)))
    if any(c is None or m is None or abs(c - m) > UNSTABLE_BAND for c, m in pairs):
        return kc
    notes.append("stage C: the launches of this kernel differ as the entry's captured shapes do (spread of DRAM bytes "
                 f"{pairs[0][0]:.2f} measured vs {pairs[0][1]:.2f} modelled): their mean is the entry's shape mix "
                 "(assuming the profiled launches hold the shapes in the entry's proportions)")
    from dataclasses import replace

    return replace(kc, unstable=False)


def _usable(kc: KernelCounters | None) -> bool:
    return kc is not None and kc.dram_bytes is not None and kc.dram_bytes > 0 and not kc.unstable


def apply_counters(kc, m, bytes_est, flops_est, t_s, peak_bw, peak_flops, n_l, confidence, notes):
    """A modelled entry: measured bytes on the memory axis. L4 on missing/unstable counters.
    Returns (metrics, bytes on the memory axis, confidence, Measured)."""
    from roofline.core.roofmath import _metrics

    from roofline.counters.ncu import rate_notes

    if not _usable(kc):
        why = "unstable across launches" if kc.unstable else "no DRAM byte counter"
        notes.append(f"L4: counters matched but {why}: stage A/B analytic result kept, confidence not raised")
        return m, bytes_est, confidence, Measured(counters_block(kc))
    measured_bytes = kc.dram_bytes * n_l
    issued = kc.flops_issued * n_l if kc.flops_issued else UNSET
    waste = UNSET if issued is UNSET else (issued / flops_est if flops_est > 0 else None)
    meas = Measured(counters_block(kc), bytes_model=bytes_est, bytes_measured=measured_bytes, flops_useful=flops_est,
                    flops_issued=issued, padding_waste_ratio=waste,
                    bytes_measured_over_model=measured_bytes / bytes_est if bytes_est > 0 else None)
    mm = _metrics(measured_bytes, flops_est, t_s, peak_bw, peak_flops)
    notes.append("stage C: roofline_pct uses MEASURED DRAM bytes on the memory axis and the model's USEFUL "
                 f"FLOPs on the compute axis ({kc.source}, {kc.launches} launch(es) averaged); measured/model "
                 f"bytes = {measured_bytes / bytes_est:.2f}" if bytes_est > 0 else "stage C: measured bytes")
    notes.extend(rate_notes(kc))
    return mm, measured_bytes, "high", meas


def issued_work(kc: KernelCounters) -> tuple[float, str | None, str]:
    """(issued FLOPs per launch, their dtype, what they are): the tensor-pipe FLOPs of the dtype
    that issued most, else the CUDA-core FLOPs (fp32 roof), else none measured (0, None)."""
    tdt = {d: v for d, v in kc.tensor_flops_by_dtype.items() if v}
    if tdt:
        d = max(tdt, key=tdt.get)
        return tdt[d], d, f"issued {d} tensor-pipe FLOPs (sm__ops_path_tensor_*; FMA = 2, padding included)"
    if kc.cuda_core_flops:
        return kc.cuda_core_flops, "fp32", "issued CUDA-core FLOPs (2 x fma + add + mul, thread level)"
    return 0.0, None, "no FLOP counter in the report"


# The counters' mean time per launch against the entry's: within this, they time the same launches
# (the Top-N of the same report: equal by construction; split-K pairs are summed on both sides).
SAME_LAUNCHES_BAND = 0.02


def same_launches(kc: KernelCounters | None, t_ms: float | None) -> bool:
    """Counters whose launches differ in work (`unstable`, with their launch groups) that time the
    same launches as the entry: their summed bytes over their summed time is the kernel's achieved
    bandwidth (sum(bytes) / sum(time) = mean bytes / mean time), whatever the mix of sizes."""
    return (kc is not None and bool(kc.groups) and bool(kc.t_ms) and bool(t_ms)
            and abs(kc.t_ms / t_ms - 1.0) <= SAME_LAUNCHES_BAND)


def measured_result(kc: KernelCounters | None, n_l: int, fallback_dtype: str | None, t_ms: float | None = None):
    """The work of an entry with no model, from its counters: one candidate `measured` (DRAM
    bytes, issued FLOPs, per logical op of n_l launches); None when the counters cannot stand in
    (absent, no DRAM bytes, unstable across launches unless they time the entry's own launches:
    `same_launches` with the entry's time per launch ``t_ms``)."""
    from roofline.core.models import Candidate, ModelResult

    if not (_usable(kc) or (kc is not None and kc.dram_bytes and same_launches(kc, t_ms))):
        return None
    flops, dtype, what = issued_work(kc)
    return ModelResult([Candidate("measured", kc.dram_bytes * n_l, flops * n_l, what)],
                       compute_dtype=dtype or fallback_dtype or "bf16",
                       assumptions=["no shapes: the measured counters are the work"], info={})


def apply_measured(kc, m, bytes_est, flops_est, t_s, peak_bw, peak_flops, n_l, confidence, notes):
    """An entry with no model whose work came from its counters (measured_result): record them and
    say what each axis is. Confidence high on the memory axis (measured bytes and time); medium
    on the compute axis (issued, not useful, FLOPs). Returns (metrics, bytes, confidence, Measured)."""
    from roofline.counters.ncu import rate_notes

    _, dtype, what = issued_work(kc)
    notes.append(f"measured input: memory axis = MEASURED DRAM bytes, {bytes_est / 1e6:.3f} MB per logical op "
                 f"({kc.source}, {kc.launches} launch(es) averaged); compute axis = {what}"
                 + ("" if dtype is None else ", at least the useful work")
                 + "; useful FLOPs unknown (no shapes: profile with record_shapes=True for the model's count)")
    notes.extend(rate_notes(kc))
    groups = UNSET
    if kc.unstable and kc.groups:
        groups = measured_groups(kc, peak_bw, peak_flops)
        notes.append(f"the launches differ in work ({len(kc.groups)} groups of like launches, measured_groups): the "
                     "verdict is their summed DRAM bytes over their summed time; each group's own figures beside it")
    meas = Measured(counters_block(kc), bytes_measured=bytes_est, flops_useful=None,
                    flops_issued=flops_est if flops_est > 0 else UNSET, measured_groups=groups)
    return m, bytes_est, "high" if m["roof_axis"] == "memory" else "medium", meas


def measured_groups(kc: KernelCounters, peak_bw: float, peak_flops: float | None) -> list[dict]:
    """One row per launch group (KernelCounters.groups): its launches, per-launch time, DRAM bytes and
    issued FLOPs, and the figures of sum(bytes) / sum(time) over its launches (one launch's means)."""
    from roofline.core.roofmath import _metrics

    rows = []
    for g in kc.groups:
        row = {k: g.get(k) for k in ("launches", "t_ms", "dram_bytes", "flops_issued")}
        if g.get("t_ms") and g.get("dram_bytes") is not None:
            m = _metrics(g["dram_bytes"], g.get("flops_issued") or 0.0, g["t_ms"] / 1e3, peak_bw, peak_flops)
            row.update(achieved_bw_bytes_s=m["achieved_bw_bytes_s"], hbm_util=m["hbm_util"],
                       compute_util=m["compute_util"], roof_axis=m["roof_axis"], roofline_pct=m["roofline_pct_raw"])
        rows.append(row)
    return rows


def apply_stage_c(op_kind: str, chosen: dict, shape_source: str, counters: Any | None, peaks: Peaks, cdtype: str,
                  peak_flops: float | None, t_s: float, peak_bw: float, n_l: int, notes: list[str]):
    """The chosen model's metrics, replaced by the measured ones where stage-C counters match
    (measured bytes on the memory axis, useful FLOPs on the compute axis).
    Returns (metrics, bytes on the memory axis, confidence, compute dtype, compute peak, Measured or None)."""
    m = dict(chosen["_m"])
    bytes_est, flops_est = chosen["bytes_est"], chosen["flops_est"]
    confidence = "medium" if shape_source == "captured" else "low"
    if shape_source not in ("captured", "measured"):
        notes.append("stage A shapes (estimated): display only, do not rank on it")
    if counters is None:
        return m, bytes_est, confidence, cdtype, peak_flops, None
    why = implausible(counters, peaks, op_kind, shape_source, bytes_est, t_s / n_l, n_l)
    if why:  # L4: a reading the hardware or the work rules out is not believed
        notes.append(f"L4: implausible counters ({'; '.join(why)}): stage A/B analytic result kept, "
                     "confidence not raised")
        return m, bytes_est, confidence, cdtype, peak_flops, Measured({**counters_block(counters), "implausible": why})
    tdt = {d: v for d, v in (counters.tensor_flops_by_dtype or {}).items() if v}
    if tdt and shape_source != "measured":   # measured work is already on its issued dtype
        measured_dt = max(tdt, key=tdt.get)
        if measured_dt != cdtype and peaks.compute_peak(measured_dt):
            notes.append(f"stage C: the tensor cores ran {measured_dt} (counters), not {cdtype}: the "
                         f"{measured_dt} compute roof is used")
            cdtype, peak_flops = measured_dt, peaks.compute_peak(measured_dt)
    merge = apply_measured if shape_source == "measured" else apply_counters
    m, bytes_est, confidence, meas = merge(counters, m, bytes_est, flops_est, t_s, peak_bw, peak_flops, n_l,
                                           confidence, notes)
    return m, bytes_est, confidence, cdtype, peak_flops, meas

"""Collectives (op class comm) in the procedure: the roof their memory axis is judged against, the
part of a collective kernel's time that is transfer (what the roof judges) and the part that is
waiting for the last rank to arrive (what it does not), and their levers. docs/method.md,
"Collectives" and "Several ranks".

A collective kernel on one rank starts when that rank gets there and ends when the exchange is
done, so its time = waiting for the slowest rank + transfer. With every rank's trace, `roofline
topn` aligns the ranks' collectives (the Nth all-reduce on each rank) and writes, per collective
kernel, its transfer time per launch (`collective.transfer_ms_per_launch`). The roofline is then
taken on the transfer part only; the attainable speedup of the KERNEL is what a link at
target efficiency gives when only the transfer shrinks (waiting stays), so that `pct_gpu_time x
(1 - 1/attainable)` is still the run's time saved. From one trace the two cannot be told apart:
the whole kernel time is judged, and the notes say so. Pure functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from roofline import opclasses
from roofline.inputs import Entry, Regime
from roofline.peaks import Peaks


def memory_roof(peaks: Peaks, op_class: str) -> tuple[float | None, str]:
    """(bytes/s, what it is) of the roof an op class's memory axis is judged against."""
    oc = opclasses.get(op_class)
    if oc is not None and oc.roof == "interconnect":
        return peaks.interconnect_bw_bytes_s, "interconnect"
    return peaks.hbm_bw_bytes_s, "hbm"


def missing_roof_reason(peaks: Peaks, op_class: str) -> str | None:
    """The L2 reason when the class's memory roof is absent, else None."""
    bw, what = memory_roof(peaks, op_class)
    if bw is not None:
        return None
    if what == "interconnect":
        return (f"no interconnect roof for {peaks.device} (the peak table has no interconnect_bw_bytes_s): a "
                "collective is judged against the link, not HBM")
    return f"no memory peak for {peaks.device}"


@dataclass
class CommSplit:
    """One collective kernel's per-launch time as transfer + waiting (ms)."""
    t_kernel_ms: float
    t_transfer_ms: float
    t_waiting_ms: float
    waiting_share: float


def _pos(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


def transfer_split(e: Entry, reg: Regime, out: dict, notes: list[str]) -> tuple[Regime, CommSplit | None]:
    """The regime record the roofline judges (the transfer part of each launch) and the split, or
    (reg, None) when the Top-N holds no transfer time (one trace). The transfer per launch is the
    median over the ranks of each rank's mean transfer (`collective.transfer_ms_per_launch`)."""
    out["memory_roof"] = "interconnect"
    c = e.raw.get("collective") if isinstance(e.raw, dict) else None
    t_x = _pos(c.get("transfer_ms_per_launch")) if isinstance(c, dict) else None
    if t_x is None:
        notes.append("collective judged on its whole kernel time: from one trace the wait for the other ranks "
                     "cannot be told from the transfer (give every rank's trace to `roofline topn`)")
        return reg, None
    t = reg.base_latency_ms
    t_x = min(t_x, t)
    sp = CommSplit(t, t_x, t - t_x, (t - t_x) / t)
    out.update(t_transfer_ms=sp.t_transfer_ms, t_waiting_ms=sp.t_waiting_ms, waiting_share=sp.waiting_share)
    notes.append(f"collective: the transfer takes {t_x * 1e3:.2f} of its {t * 1e3:.2f} us per launch (median over the "
                 f"ranks of their aligned collectives); the other {sp.waiting_share:.1%} is waiting for the last rank "
                 "to arrive, which the roofline does not judge")
    return Regime(sp.t_transfer_ms, reg.launches_per_step), sp


def kernel_speedup(sp: CommSplit | None, s_transfer: float | None, out: dict, notes: list[str]) -> float | None:
    """The attainable speedup of the whole kernel when only its transfer gets s_transfer x faster."""
    if sp is None or s_transfer is None:
        return s_transfer
    s = sp.t_kernel_ms / (sp.t_waiting_ms + sp.t_transfer_ms / s_transfer)
    out["attainable_speedup_transfer"] = s_transfer
    notes.append(f"attainable: the transfer {s_transfer:.3g}x faster leaves the waiting, so the kernel is {s:.3g}x "
                 "faster (the e2e gain counts the kernel)")
    return s


def levers(out: dict) -> list[str]:
    """Levers of a collective (other_levers): the waiting is a balance problem, small transfers a
    latency one, large ones the link's; none of them is kernel tuning of the HBM kind."""
    lv = []
    w = out.get("waiting_share")
    if isinstance(w, (int, float)) and w >= 0.1:
        lv.append(f"balance the ranks: {w:.0%} of this collective's time is waiting for the last rank (the "
                  "straggler named in the artifact's `ranks`); even out the work or the host-side stalls before it")
    if out.get("bound_type") == "latency":
        lv.append("small messages are latency-bound: a one-shot / custom all-reduce (vLLM, SGLang) or fusing the "
                  "collective with its neighbour (all-reduce + norm) cuts the fixed cost")
    lv.append("overlap the collective with independent compute (a second stream, or split the GEMM before it)")
    return lv

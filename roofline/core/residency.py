"""Where the L2, not HBM, decides a kernel's DRAM bytes, and shape rows that read above their roof:
the notes that name the measured cause when model bytes and DRAM bytes differ (docs/method.md
section 4)."""
from __future__ import annotations

from roofline.core import opclasses
from roofline.peaks import Peaks

def cache_residency(op_class: str, w, chosen: dict, peaks: Peaks, notes: list[str]) -> bool:
    """Where the L2 decides the DRAM bytes (docs/method.md section 4), measured on the real-model
    corpus with ncu in the run's own cache state: each class's rule (roofline/core/opclasses/, `residency`):
    a streaming op served from the L2 gets no verdict (returns True); a GEMM operand, an expert's
    weights or an attention mask above half the L2 is re-read from DRAM (a note)."""
    l2 = peaks.l2_bytes()
    oc = opclasses.of(op_class)
    return bool(l2) and oc.residency(w, chosen, l2, notes)


def _flag_rows_over_roof(rows: list[dict], peaks: Peaks, notes: list[str]) -> None:
    """A shape row reading above its roof (beyond the compute roof's own run-to-run spread on the
    compute axis) is no figure to read as fine: flagged `over_roof`, and the notes say which."""
    for r in rows:
        pct = r.get("roofline_pct")
        if pct is None:
            continue
        tol = peaks.compute_roof_spread(r.get("_cdtype") or "bf16") if r.get("roof_axis") == "compute" else 0.0
        r.pop("_cdtype", None)
        streaming_bound(r, r.get("bytes_est") or 0.0, r.get("t_ms") or 0.0, peaks.l2_bytes(), None)
        limit = 1.0 / (1.0 - tol) if tol < 1 else float("inf")
        if 1.0 < pct <= limit:     # within the roof's spread: at the wall, read as 100% (as an entry is)
            r["at_compute_wall"] = True
        if pct > limit:
            r["over_roof"] = True
            sh = ",".join(f"{k}={v}" for k, v in r["shape"].items() if not isinstance(v, (list, dict)))
            notes.append(f"shape {sh} reads {pct:.0%} of the {r.get('roof_axis')} roof, beyond the roof's spread "
                         f"({tol:.1%}): the model is wrong for this shape (flagged over_roof)")


# A transfer far bigger than the L2 and far longer than a dispatch cannot be short of work in flight:
# Little's law needs about peak_bw x DRAM latency (4.8 TB/s x ~1 us, a few MB on an H200) in flight to
# fill HBM, and such a launch holds tens of times that. Under LATENCY_UTIL it is starved of bandwidth
# by its access pattern (strided, partial sectors), not latency-bound: memory, its lever fewer or
# better-ordered bytes (docs/method.md section 3).
STREAMING_L2_FACTOR = 2.0          # bytes per logical op at least this many L2s: it streams from HBM
STREAMING_FLOOR_FACTOR = 20.0      # and its time at least this many dispatch floors (100 us at 5 us)


def streams_from_hbm(bytes_est: float, t_ms: float, l2: float | None) -> bool:
    from roofline.core.roofmath import DISPATCH_FLOOR_MS

    return bool(l2) and bytes_est >= STREAMING_L2_FACTOR * l2 and t_ms >= STREAMING_FLOOR_FACTOR * DISPATCH_FLOOR_MS


def streaming_bound(x: dict, bytes_est: float, t_ms: float, l2: float | None, notes: list[str] | None) -> None:
    """A `latency` bound on the memory axis of a big transfer (streams_from_hbm) becomes `memory`
    (bandwidth-starved), said in the notes; an entry or a shape row (x)."""
    if x.get("bound_type") != "latency" or x.get("roof_axis") != "memory" or x.get("dispatch_bound") \
            or x.get("l2_resident") or not streams_from_hbm(bytes_est, t_ms, l2):
        return
    x["bound_type"] = "memory"
    if notes is not None:
        notes.append(f"bandwidth-starved, not latency-bound: {bytes_est / 1e6:.4g} MB per logical op (over "
                     f"{STREAMING_L2_FACTOR:g}x the {l2 / 1e6:.0f} MB L2) in {t_ms * 1e3:.4g} us (over "
                     f"{STREAMING_FLOOR_FACTOR:g}x the dispatch floor) at {x.get('hbm_util', 0.0):.0%} of HBM: "
                     "bound memory; the lever is the access pattern or fewer bytes")

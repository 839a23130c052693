"""The roofline arithmetic of one byte/FLOP candidate: achieved rates, utilizations, arithmetic
intensity against the ridge point and the roof axis (`_metrics`: roofline.peaks.roof's `roofline`,
the one definition), feasibility against the roofs, and which compute peak applies (the dtype's,
else the bf16 / fp16 / fp32 fallback). Pure functions.

Units: bytes, FLOPs, seconds, bytes/s, FLOP/s.
"""
from __future__ import annotations

import math

from roofline.peaks import Peaks
from roofline.peaks.roof import roofline as _metrics  # noqa: F401  (the one roofline arithmetic)

DISPATCH_FLOOR_MS = 0.005      # ~5 us: a launch this short is timed by dispatch, not by its work

_CONF_ORDER = {"low": 0, "medium": 1, "high": 2}


def _min_conf(*cs: str) -> str:
    return min(cs, key=lambda c: _CONF_ORDER[c])


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _compute_peak(peaks: Peaks, dtype: str) -> tuple[float | None, str, list[str]]:
    notes = []
    p = peaks.compute_peak(dtype)
    if p is not None:
        return p, dtype, notes
    for alt in ("bf16", "fp16", "fp32"):
        if peaks.compute_peak(alt) is not None:
            notes.append(f"no {dtype} compute peak for {peaks.device}; the {alt} roof is used")
            return peaks.compute_peak(alt), alt, notes
    return None, dtype, ["no compute peak at all for this device"]


def _feasible(m: dict, compute_tol: float = 0.0) -> bool:
    """A byte model is refuted when it implies a rate above a roof; on a measured compute roof,
    only beyond the roof's own run-to-run spread (see Peaks.compute_roof_spread)."""
    return m["hbm_util"] <= 1.0 and m["compute_util"] <= 1.0 / (1.0 - compute_tol)

"""The roofline arithmetic of one byte/FLOP candidate: achieved rates, utilizations, arithmetic
intensity against the ridge point, the roof axis, feasibility against the roofs, and which compute
peak applies (the dtype's, else the bf16 / fp16 / fp32 fallback). Pure functions.

Units: bytes, FLOPs, seconds, bytes/s, FLOP/s.
"""
from __future__ import annotations

import math

from roofline.peaks import Peaks

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


def _metrics(bytes_est: float, flops_est: float, t_s: float, peak_bw: float, peak_flops: float | None) -> dict:
    achieved_bw = bytes_est / t_s
    achieved_flops = flops_est / t_s
    hbm_util = achieved_bw / peak_bw
    compute_util = achieved_flops / peak_flops if peak_flops else 0.0
    ai = flops_est / bytes_est if bytes_est > 0 else math.inf
    ridge = peak_flops / peak_bw if peak_flops else math.inf
    roof_axis = "compute" if ai > ridge else "memory"
    pct = compute_util if roof_axis == "compute" else hbm_util
    return {"achieved_bw_bytes_s": achieved_bw, "achieved_flops": achieved_flops, "hbm_util": hbm_util,
            "compute_util": compute_util, "arithmetic_intensity": ai, "ridge_point": ridge,
            "roof_axis": roof_axis, "roofline_pct_raw": pct}


def _feasible(m: dict, compute_tol: float = 0.0) -> bool:
    """A byte model is refuted when it implies a rate above a roof; on a measured compute roof,
    only beyond the roof's own run-to-run spread (see Peaks.compute_roof_spread)."""
    return m["hbm_util"] <= 1.0 and m["compute_util"] <= 1.0 / (1.0 - compute_tol)

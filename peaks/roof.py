"""The roofline arithmetic, defined once (docs/method.md section 3): a piece of work (`nbytes` over
HBM, `flops` on the compute pipe) that took `t_s` on a device with roofs `peak_bw` and
`peak_flops`. Every side counts with `roofline` (the analysis through roofline.core.roofmath, stage C's
re-run write-back, the ladder's benches and standing, the peaks measurement); it lives beside the
peak tables because every side may import those (the ladder imports nothing from the analysis).
tests/test_single_source.py fails on a second copy of the formula.

Pure functions; units: bytes, FLOPs, seconds, bytes/s, FLOP/s.
"""
from __future__ import annotations

import math


def roofline(nbytes: float, flops: float, t_s: float, peak_bw: float, peak_flops: float | None) -> dict:
    """Achieved rates, utilizations, arithmetic intensity against the ridge point, the roof axis
    (compute when the intensity is above the ridge, else memory) and the fraction of the roof
    reached on that axis (`roofline_pct_raw`). No compute peak: the memory axis alone."""
    achieved_bw = nbytes / t_s
    achieved_flops = flops / t_s
    hbm_util = achieved_bw / peak_bw
    compute_util = achieved_flops / peak_flops if peak_flops else 0.0
    ai = flops / nbytes if nbytes > 0 else math.inf
    ridge = peak_flops / peak_bw if peak_flops else math.inf
    roof_axis = "compute" if ai > ridge else "memory"
    pct = compute_util if roof_axis == "compute" else hbm_util
    return {"achieved_bw_bytes_s": achieved_bw, "achieved_flops": achieved_flops, "hbm_util": hbm_util,
            "compute_util": compute_util, "arithmetic_intensity": ai, "ridge_point": ridge,
            "roof_axis": roof_axis, "roofline_pct_raw": pct}


def roofline_bound_s(flops: float, nbytes: float, peak_flops: float, peak_bw: float) -> float:
    """The least time the work can take on these roofs (the slower of compute and memory): the
    roofline of the work done in one second is the fraction of that second the roofs need."""
    return roofline(nbytes, flops, 1.0, peak_bw, peak_flops)["roofline_pct_raw"]

"""The GEMM arithmetic, once (docs/method.md section 2): the useful FLOPs of C = A·B (2MNK), its
fewest bytes (each operand crosses HBM once); the roofline bound time of that work is
roofline.peaks.roof's (re-exported here). The
analysis' GEMM model, the ladder's benches and standing, the peaks measurement and stage C's
re-run all count with these. They live beside the peak tables because every side may import
those (the ladder imports nothing from the analysis; the peak tables nothing but themselves).
Pure functions; units: FLOPs, bytes, seconds, FLOP/s, bytes/s."""
from __future__ import annotations

from roofline.peaks.roof import roofline_bound_s  # noqa: F401  (the one roofline arithmetic)


def gemm_flops(m: float, n: float, k: float, batch: float = 1) -> float:
    """Useful FLOPs of [m,k] x [k,n]: one multiply and one add per (m, n, k)."""
    return 2.0 * m * n * k * batch


def gemm_fewest_bytes(m: float, n: float, k: float, a_bytes: float = 2, b_bytes: float | None = None,
                      c_bytes: float = 2, batch: float = 1, b_copies: float = 1) -> float:
    """Bytes when A [m,k], B [k,n] (b_copies of it: the experts of a grouped GEMM) and C [m,n] each
    cross HBM once, at their element widths (B defaults to A's width)."""
    b_bytes = a_bytes if b_bytes is None else b_bytes
    return float(batch * (m * k * a_bytes + b_copies * k * n * b_bytes + m * n * c_bytes))


def device_l2_bytes(device: str | None) -> float | None:
    """The L2 size of `device` from its peak table (`l2_bytes`), None without a table or the field."""
    from roofline.peaks import find_table

    hit = find_table(device) if device else None
    v = (hit[1] or {}).get("l2_bytes") if hit else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

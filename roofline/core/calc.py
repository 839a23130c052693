"""The roofline calculator (the README's "The roofline calculator" section), for any device in the
peak tables: pick a GEMM size and a dtype; compare the time to do the FLOPs at that dtype's peak
(t_compute) with the time to move the matrices across HBM once (t_HBM); the wall-clock bound is
the longer of the two, the arithmetic intensity (AI) sits left or right of the ridge, and the
crossover is the square size where the two bars are equal.

Pure functions: numbers in, numbers out. The roofs come only from peaks/*.yaml
(through roofline.peaks), the FLOP and byte counts only from roofline.core.models.gemm.gemm_counts.

    t_compute_s = 2 M N K / peak_flops_s
    t_hbm_s     = (M K a + K N b + M N c) / hbm_bw_bytes_s     (a, b, c: bytes per element)
    AI          = 2 M N K / bytes;   ridge = peak_flops_s / hbm_bw_bytes_s
    square N:   t_compute = t_hbm  at  N* = peak_flops_s (a + b + c) / (2 hbm_bw_bytes_s)
                (= 3 P / BW for fp16 in and out: a square GEMM's AI = N/3 against the ridge)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from roofline.io.errors import PeaksError
from roofline.core.models.gemm import gemm_counts
from roofline.peaks import DTYPE_BYTES, from_table, load_tables, norm_dtype
from roofline.peaks.roof import roofline

ROOF_CHOICES = ("table", "datasheet", "measured")
# NB: "table" is the project's convention (roofline.peaks.from_table): memory roof = the datasheet
# pin rate, compute roof = the measured/validated figure where the table has one. "datasheet" and
# "measured" take that kind of figure for both roofs (the worked B200 figures are datasheet-class).
SWEEP_SIZES = tuple(2 ** p for p in range(6, 15))   # 64 .. 16384


@dataclass(frozen=True)
class Roofs:
    device: str
    table_file: str
    dtype: str
    peak_flops_s: float
    peak_flops_kind: str
    hbm_bw_bytes_s: float
    hbm_bw_kind: str
    roof: str                      # which ROOF_CHOICES picked them


@dataclass(frozen=True)
class CalcResult:
    device: str
    dtype: str
    out_dtype: str
    roof: str
    m: int
    n: int
    k: int
    flops: float
    bytes_moved: float
    peak_flops_s: float
    peak_flops_kind: str
    hbm_bw_bytes_s: float
    hbm_bw_kind: str
    t_compute_s: float
    t_hbm_s: float
    t_wall_s: float                # the longer bar
    bound: str                     # "compute" | "memory"
    ai_flop_per_byte: float
    ridge_flop_per_byte: float
    ai_over_ridge: float
    crossover_n: float             # square N where t_compute = t_hbm, same dtypes and roofs
    attainable_flops_s: float      # min(peak, BW x AI)

    def to_dict(self) -> dict:
        return asdict(self)


def _find_table(device: str, directory=None) -> tuple[str, dict]:
    from roofline.peaks import find_table

    hit = find_table(device, directory)
    if hit is None:
        names = ", ".join(Path(p).stem for p, _ in load_tables(directory))
        raise PeaksError(f"no peak table for device {device!r} (tables: {names})")
    return hit


def device_keys(directory=None) -> list[str]:
    """File stems of the peak tables (h200, b200, ...): the devices the calculator knows."""
    return [Path(p).stem for p, _ in load_tables(directory)]


def _figure(block, kind: str):
    """(value, kind) of one figure block for the requested kind; (None, None) if absent."""
    if not isinstance(block, dict):
        return None, None
    blk = block.get(kind)
    if isinstance(blk, dict) and blk.get("value") is not None:
        return float(blk["value"]), kind
    return None, None


def roofs(device: str, dtype: str, roof: str = "table", directory=None) -> Roofs:
    """The compute roof of `dtype` and the memory roof of `device`, from its peak table."""
    if roof not in ROOF_CHOICES:
        raise ValueError(f"roof must be one of {ROOF_CHOICES}, got {roof!r}")
    path, data = _find_table(device, directory)
    d = norm_dtype(dtype)
    stem = Path(path).stem
    raw_flops = {norm_dtype(k): v for k, v in (data.get("flops") or {}).items()}
    if d not in raw_flops:
        raise PeaksError(f"{stem}: the peak table has no {d} figure (has: {', '.join(sorted(raw_flops))})")
    if roof == "table":
        pk = from_table(data, path)
        pf, pf_kind = pk.compute_peak(d), pk.flops_kind.get(d)
        bw, bw_kind = pk.hbm_bw_bytes_s, pk.hbm_bw_kind
    else:
        pf, pf_kind = _figure(raw_flops[d], roof)
        bw, bw_kind = _figure(data.get("hbm_bw_bytes_s"), roof)
        if pf is None:
            raise PeaksError(f"{stem}: no {roof} {d} compute figure in the peak table")
        if bw is None:
            raise PeaksError(f"{stem}: no {roof} HBM bandwidth figure in the peak table")
    if not pf or not bw:
        raise PeaksError(f"{stem}: incomplete peak table for {d}")
    return Roofs(str(data.get("device")), str(path), d, float(pf), str(pf_kind), float(bw), str(bw_kind), roof)


def elem_bytes(dtype: str) -> float:
    d = norm_dtype(dtype)
    if d not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BYTES))})")
    return float(DTYPE_BYTES[d])


def crossover_n(peak_flops_s: float, hbm_bw_bytes_s: float, a_bytes: float, b_bytes: float,
                c_bytes: float) -> float:
    """Square N where 2N^3/P = N^2 (a + b + c)/BW."""
    return peak_flops_s * (a_bytes + b_bytes + c_bytes) / (2.0 * hbm_bw_bytes_s)


def compute(m: int, n: int, k: int, r: Roofs, out_dtype: str | None = None) -> CalcResult:
    """One GEMM C[M,N] = A[M,K] B[K,N] at the roofs `r` (A and B in r.dtype, C in out_dtype)."""
    if min(m, n, k) < 1:
        raise ValueError(f"M, N, K must be >= 1, got {m}x{n}x{k}")
    out = norm_dtype(out_dtype) if out_dtype else r.dtype
    a = elem_bytes(r.dtype)
    c = elem_bytes(out)
    flops, nbytes = gemm_counts(m, n, k, a, a, c)
    # the roofline of the work done in one second (roofline.peaks.roof, the one arithmetic): each
    # axis' utilization is then the time that axis needs
    rf = roofline(nbytes, flops, 1.0, r.hbm_bw_bytes_s, r.peak_flops_s)
    t_c, t_h = rf["compute_util"], rf["hbm_util"]
    ai, ridge = rf["arithmetic_intensity"], rf["ridge_point"]
    return CalcResult(
        device=r.device, dtype=r.dtype, out_dtype=out, roof=r.roof, m=m, n=n, k=k, flops=flops,
        bytes_moved=nbytes, peak_flops_s=r.peak_flops_s, peak_flops_kind=r.peak_flops_kind,
        hbm_bw_bytes_s=r.hbm_bw_bytes_s, hbm_bw_kind=r.hbm_bw_kind, t_compute_s=t_c, t_hbm_s=t_h,
        t_wall_s=rf["roofline_pct_raw"], bound=rf["roof_axis"],
        ai_flop_per_byte=ai, ridge_flop_per_byte=ridge, ai_over_ridge=ai / ridge,
        crossover_n=crossover_n(r.peak_flops_s, r.hbm_bw_bytes_s, a, a, c),
        attainable_flops_s=min(r.peak_flops_s, r.hbm_bw_bytes_s * ai))


def sweep(r: Roofs, sizes=SWEEP_SIZES, out_dtype: str | None = None) -> list[CalcResult]:
    """Square GEMMs over `sizes`, sorted."""
    return [compute(s, s, s, r, out_dtype) for s in sorted(set(int(s) for s in sizes))]


def page_data(directory=None) -> dict:
    """Every device's roofs, per dtype and roof choice, for the HTML page (embedded at generation
    time from the same tables; the page holds no number of its own)."""
    devices = {}
    for path, data in load_tables(directory):
        stem = Path(path).stem
        dts = {}
        for dt in (data.get("flops") or {}):
            d = norm_dtype(dt)
            if d not in DTYPE_BYTES:
                continue
            per = {}
            for roof in ROOF_CHOICES:
                try:
                    rr = roofs(stem, d, roof, directory)
                except PeaksError:
                    continue
                per[roof] = {"peak_flops_s": rr.peak_flops_s, "peak_flops_kind": rr.peak_flops_kind,
                             "hbm_bw_bytes_s": rr.hbm_bw_bytes_s, "hbm_bw_kind": rr.hbm_bw_kind}
            if per:
                dts[d] = {"elem_bytes": DTYPE_BYTES[d], "roofs": per}
        if dts:
            devices[stem] = {"device": str(data.get("device")), "table_file": f"peaks/{Path(path).name}",
                             "dtypes": dts}
    return {"devices": devices, "roof_choices": list(ROOF_CHOICES)}


def fmt_time(t_s: float) -> str:
    """Seconds -> '12.3 us' / '1.23 ms' / '456 ns' (3 significant digits)."""
    if t_s >= 1.0:
        return f"{t_s:.3g} s"
    if t_s >= 1e-3:
        return f"{t_s * 1e3:.3g} ms"
    if t_s >= 1e-6:
        return f"{t_s * 1e6:.3g} us"
    return f"{t_s * 1e9:.3g} ns"


def render_text(res: CalcResult) -> str:
    bar_w = 40
    longest = max(res.t_compute_s, res.t_hbm_s)

    def bar(t):
        return "#" * max(1, round(bar_w * t / longest)) if longest > 0 else ""

    side = "right of" if res.ai_flop_per_byte >= res.ridge_flop_per_byte else "left of"
    lines = [
        f"{res.device} {res.dtype} (out {res.out_dtype}), GEMM {res.m}x{res.n}x{res.k}",
        f"roofs ({res.roof}): {res.peak_flops_s / 1e12:.4g} TFLOP/s ({res.peak_flops_kind}), "
        f"HBM {res.hbm_bw_bytes_s / 1e12:.4g} TB/s ({res.hbm_bw_kind})",
        f"FLOPs {res.flops:.4g}, bytes {res.bytes_moved:.4g} (A, B, C each cross HBM once)",
        f"t_compute {fmt_time(res.t_compute_s):>10s} |{bar(res.t_compute_s)}",
        f"t_HBM     {fmt_time(res.t_hbm_s):>10s} |{bar(res.t_hbm_s)}",
        f"wall-clock bound {fmt_time(res.t_wall_s)} ({res.bound}-bound: the longer bar)",
        f"AI {res.ai_flop_per_byte:.4g} FLOP/byte, {side} the ridge {res.ridge_flop_per_byte:.4g} FLOP/byte "
        f"(AI/ridge {res.ai_over_ridge:.3g})",
        f"crossover: square N* = {res.crossover_n:.4g} (t_compute = t_HBM; N < N* is memory-bound)",
        f"attainable {res.attainable_flops_s / 1e12:.4g} TFLOP/s",
    ]
    return "\n".join(lines)


def render_sweep(rows: list[CalcResult]) -> str:
    if not rows:
        return ""
    r0 = rows[0]
    head = (f"{r0.device} {r0.dtype} (out {r0.out_dtype}), roofs ({r0.roof}): {r0.peak_flops_s / 1e12:.4g} TFLOP/s, "
            f"HBM {r0.hbm_bw_bytes_s / 1e12:.4g} TB/s; ridge {r0.ridge_flop_per_byte:.4g} FLOP/byte; "
            f"crossover N* = {r0.crossover_n:.4g}")
    lines = [head, f"{'N':>7s} {'t_compute':>10s} {'t_HBM':>10s} {'wall':>10s} {'AI FLOP/B':>10s} {'bound':>8s}"]
    marked = False
    for r in rows:
        if not marked and r.n >= r0.crossover_n:
            lines.append(f"{'-' * 7} crossover N* = {r0.crossover_n:.4g}: memory-bound above this line, "
                         "compute-bound below")
            marked = True
        lines.append(f"{r.n:>7d} {fmt_time(r.t_compute_s):>10s} {fmt_time(r.t_hbm_s):>10s} "
                     f"{fmt_time(r.t_wall_s):>10s} {r.ai_flop_per_byte:>10.4g} {r.bound:>8s}")
    if not marked:
        lines.append(f"{'-' * 7} crossover N* = {r0.crossover_n:.4g} lies above the largest size")
    return "\n".join(lines)

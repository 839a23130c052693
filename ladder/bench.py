"""Timing of ladder levels beside cuBLAS, in one process, as data.

Every timed launch: L2 flushed first (a 256 MiB buffer rewritten; the H200's L2 is 60 MiB),
CUDA events around the launch alone, after warm-up. Reported: median with p20/p80 (ms),
TFLOP/s at the median, % of cuBLAS (same shape, same process, same method), and % of the
roofline bound for the shape: t_bound = max(2MNK / compute ceiling, fewest bytes / bandwidth),
fewest bytes = 2 (MK + NK + MN) (each bf16 operand read once, C written once). The ceilings are
measured in the same run (a device-to-device copy for bandwidth, cuBLAS at 8192^3 for compute);
the project's peak table (roofline.peaks) gives a second column when it resolves the device.
Each (level, shape) is checked for correctness before it is timed; a failing one is not timed.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from roofline.peaks.envelope import quantiles as _quantiles
from roofline.peaks.gemm import gemm_fewest_bytes, gemm_flops  # noqa: F401  (gemm_flops: bench.gemm_flops)
from roofline.peaks.measure import copy_benchmark
from roofline.peaks.roof import roofline, roofline_bound_s

from . import check, gpu
from .registry import DENSE_LEVELS, Level

DEFAULT_SHAPES: tuple[tuple[int, int, int], ...] = (
    (128, 128, 64),        # one tile, one K tile: every level can run it
    (128, 128, 8192),      # one tile, long K: levels 2 and 3
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (64, 4096, 4096),      # decode (M = 64): attention projection
    (64, 28672, 4096),     # decode: Llama-70B-like MLP up-projection
)

# Square and Llama shapes: 4096^3, 8192^3, LLM prefill M in {2048, 8192} x (N, K) in {(4096, 4096)
# attention projection, (28672, 4096) MLP up, (4096, 14336) MLP down}, the two decode shapes, and
# the two single-tile shapes so that levels 1-2 appear in the same run.
SQUARE_AND_LLAMA: tuple[tuple[int, int, int], ...] = (
    (128, 128, 64),
    (128, 128, 8192),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (2048, 4096, 4096),
    (2048, 28672, 4096),
    (2048, 4096, 14336),
    (8192, 4096, 4096),
    (8192, 28672, 4096),
    (8192, 4096, 14336),
    (64, 4096, 4096),
    (64, 28672, 4096),
)

# Serving shapes: the prefill gate set M in {2048, 4096, 8192} x (N, K) in {(4096, 4096),
# (28672, 4096), (4096, 14336), (8192, 8192)} (8192^3 among them), the decode gate set M in
# {16, 64, 128, 256} x (N, K) in {(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192)}, and
# two ragged shapes (3000x5000x1000, 777x1531x263).
PREFILL_NK = ((4096, 4096), (28672, 4096), (4096, 14336), (8192, 8192))
DECODE_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192))
SERVING_PREFILL = tuple((m, n, k) for m in (2048, 4096, 8192) for n, k in PREFILL_NK)
SERVING_DECODE = tuple((m, n, k) for m in (16, 64, 128, 256) for n, k in DECODE_NK)
RAGGED = ((3000, 5000, 1000), (777, 1531, 263))
SERVING = SERVING_PREFILL + SERVING_DECODE + RAGGED
SINGLE_TILE = ((128, 128, 64), (128, 128, 8192))   # levels 1-2 run only these
# Mid-size M (200-1000 rows: batched decode, chunked prefill), where one 128x256 tile per CTA leaves
# most SMs idle in the last wave: four named shapes, then held-out ones of the same kind (other
# M, N, K, none of them a multiple of the others) that a tile/schedule choice must also hold on.
MID_NAMED = ((200, 6144, 4096), (1000, 3000, 7000), (512, 4096, 4096), (777, 1531, 263))
MID_HELD_OUT = ((320, 8192, 4096), (640, 5120, 5120), (384, 11008, 4096), (896, 2048, 8192), (450, 3584, 3584))
MID = MID_NAMED + MID_HELD_OUT

SHAPE_SETS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "default": DEFAULT_SHAPES,
    "square-and-llama": SQUARE_AND_LLAMA,
    "serving": SERVING,
    "serving-prefill": SERVING_PREFILL,
    "serving-decode": SERVING_DECODE,
    # every level in one run (levels 1-2 only run the single-tile shapes): the README table
    "serving-all-levels": SINGLE_TILE + SERVING,
    "square-8192": ((8192, 8192, 8192),),
    "mid": MID,
    # each level's registry variants are timed beside it on these (those a level supports): one
    # long-K tile, square, prefill, ragged and decode shapes (`device_suite variants`)
    "variants": ((128, 128, 8192), (4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 4096),
                 (8192, 4096, 14336), (3000, 5000, 1000), (16, 4096, 4096), (64, 4096, 4096),
                 (64, 14336, 4096), (128, 4096, 14336), (256, 28672, 8192)),
}
# The names the recorded results (fixtures/ladder/, meta.shape_set) were made under.
FORMER_NAMES = {"issue6": "square-and-llama", "issue14": "serving", "issue14-prefill": "serving-prefill",
                "issue14-decode": "serving-decode", "issue14-all": "serving-all-levels", "gate8192": "square-8192"}

FLUSH_BYTES = 256 << 20


def gemm_min_bytes(m, n, k, elem_bytes=2) -> float:
    """Fewest bytes with A, B and C all at `elem_bytes` (roofline.peaks.gemm)."""
    return gemm_fewest_bytes(m, n, k, elem_bytes, elem_bytes, elem_bytes)


def quantiles(ts_ms):
    """(median, p20, p80) of per-call times: the one quantile rule (roofline.peaks.envelope)."""
    q = _quantiles([float(t) for t in ts_ms])
    return q["median"], q["p20"], q["p80"]


SPIN_NS = 300_000   # the GPU waits this long before each timed launch: longer than the host's launch work
_SPIN_SRC = r"""
extern "C" __global__ void roofline_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


class Timer:
    """Event timing with an L2 flush before every timed launch (``flush_l2=False``: warm L2, the
    operands left in L2 by the previous launch, as in a run where neighbours just touched them).

    Before each timed launch one thread spins on the GPU for SPIN_NS, so the start event and the
    launch are queued behind it while the host does the launch's Python work (tensor maps, plan,
    argument packing: tens of microseconds). Without it the start event fires on an idle GPU and
    the interval counts that host time: a 10 us decode GEMM read as ~100-200 us in the warm-L2
    re-run (the flush kernel hid part of it in the cold mode)."""

    def __init__(self, flush_l2: bool = True):
        cp = gpu.cupy()
        self.cp = cp
        self.flush_l2 = flush_l2
        self.flush = cp.empty(FLUSH_BYTES // 4 if flush_l2 else 1, dtype=cp.uint32)
        self.spin = cp.RawKernel(_SPIN_SRC, "roofline_spin")
        self.host_over_spin = 0   # launches of the last timing whose host time exceeded the spin

    def time(self, fn, *, warmup=3, reps=None, budget_ms=400.0, max_reps=100, min_reps=10):
        cp = self.cp
        for _ in range(warmup):
            fn()
        cp.cuda.runtime.deviceSynchronize()
        if reps is None:  # size the repeat count from one flushed launch
            t = self._once(fn, 1)[0]
            reps = int(min(max_reps, max(min_reps, budget_ms / max(t, 1e-3))))
        return self._once(fn, reps)

    def _once(self, fn, reps):
        cp = self.cp
        evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
        host = []
        for i, (e0, e1) in enumerate(evs):
            if self.flush_l2:
                self.flush.fill(i + 1)
            self.spin((1,), (1,), (cp.uint64(SPIN_NS),))
            e0.record()
            h0 = time.perf_counter()
            fn()
            host.append(time.perf_counter() - h0)
            e1.record()
        evs[-1][1].synchronize()
        # the host time of each launch: above the spin, the events count part of it (a row says so)
        self.host_over_spin = sum(h * 1e9 > SPIN_NS for h in host)
        return [cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]


def timed(timer: Timer, fn, min_reps: int = 10) -> dict:
    """One timed row: median, p20, p80 (ms) of min_reps..max(100, min_reps) launches of fn, how many,
    and how many of them took the host longer than the spin (the events then count host time)."""
    ts = timer.time(fn, min_reps=min_reps, max_reps=max(100, min_reps))
    med, p20, p80 = quantiles(ts)
    return {"t_ms_median": med, "t_ms_p20": p20, "t_ms_p80": p80, "reps": len(ts), "host_over_spin": timer.host_over_spin}


def geomean(vals) -> float:
    """Geometric mean of the positive values (NaN if none)."""
    v = [x for x in vals if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def measure_hbm_copy(timer: Timer, nbytes=2 << 30) -> dict:
    """Device-to-device copy of `nbytes`; bandwidth counts bytes read + bytes written (the one copy
    benchmark, roofline.peaks.measure.copy_benchmark, timed with this bench's Timer)."""
    cp = gpu.cupy()
    src = cp.ones(nbytes // 4, dtype=cp.uint32)
    dst = cp.empty_like(src)
    res = copy_benchmark(lambda: cp.copyto(dst, src), nbytes, lambda fn, reps: timer.time(fn, reps=reps), 20)
    med, p20, p80 = quantiles(res["ms"])
    del src, dst
    return {"what": f"device-to-device copy of {nbytes >> 20} MiB (read+write bytes)",
            "bytes_s": res["bytes_per_copy"] / (med * 1e-3), "t_ms_median": med, "t_ms_p20": p20, "t_ms_p80": p80}


def table_peaks(gpu_name: str) -> dict | None:
    """The project's peak table for this device (roofline.peaks; the only copy of those numbers);
    None when the device has none (PeaksError: an absent table, not a failure of the bench)."""
    from roofline import peaks as _peaks
    from roofline.io.errors import PeaksError

    try:
        p = _peaks.resolve(gpu_name=gpu_name, gfx=None)
    except PeaksError:
        return None
    bw, fl = p.hbm_bw_bytes_s, p.flops.get("bf16")
    if not (bw and fl):
        return None
    src = p.table_file
    return {"source": f"peaks/{Path(src).name}" if src else "roofline.peaks",
            "hbm_bw_bytes_s": float(bw), "hbm_bw_kind": p.hbm_bw_kind,
            "bf16_flops_s": float(fl), "bf16_flops_kind": p.flops_kind.get("bf16")}


def add_roofline_columns(res: dict, peaks: dict | None = None) -> dict:
    """(Re)compute the %-of-roofline columns of a bench result from its times.

    pct_roofline_measured: ceilings measured in the same run (HBM copy, cuBLAS 8192^3).
    pct_roofline_table: the project's peak table (roofline.peaks), when there is one.
    """
    c = res["ceilings"]
    fl = c.get("cublas_bf16_8192", {}).get("flops_s")
    bw = c["hbm_copy"]["bytes_s"]
    if peaks is not None:
        c["table"] = peaks
    tp = c.get("table")
    for r in res["rows"]:
        if "t_ms_median" not in r:
            continue
        m, n, k, t = r["m"], r["n"], r["k"], r["t_ms_median"]
        if fl:
            r["pct_roofline_measured"] = 100.0 * roofline_bound_ms(m, n, k, fl, bw) / t
            r["bound"] = roofline(gemm_min_bytes(m, n, k), gemm_flops(m, n, k), t / 1e3, bw, fl)["roof_axis"]
        if tp:
            r["pct_roofline_table"] = 100.0 * roofline_bound_ms(m, n, k, tp["bf16_flops_s"], tp["hbm_bw_bytes_s"]) / t
    return res


def roofline_bound_ms(m, n, k, flops_s, bytes_s) -> float:
    return 1e3 * roofline_bound_s(gemm_flops(m, n, k), gemm_min_bytes(m, n, k), flops_s, bytes_s)


@dataclass
class BenchResult:
    meta: dict
    ceilings: dict
    rows: list = field(default_factory=list)

    def to_dict(self):
        return {"meta": self.meta, "ceilings": self.ceilings, "rows": self.rows}


def run_bench(levels=DENSE_LEVELS, shapes=DEFAULT_SHAPES, progress=None, seed=0, min_reps=10) -> BenchResult:
    """Check, then time every level that supports each shape, beside cuBLAS; returns data."""
    cp = gpu.cupy()
    timer = Timer()
    name = gpu.device_name()
    hbm = measure_hbm_copy(timer)
    ceilings = {"hbm_copy": hbm}
    rows = []
    have_torch = gpu.torch_or_none() is not None

    # compute ceiling: cuBLAS at 8192^3 in this process
    if have_torch:
        m = n = k = 8192
        a = gpu.random_bf16((m, k), seed=11); b = gpu.random_bf16((n, k), seed=12)
        c = cp.empty((m, n), dtype=cp.uint16)
        med, p20, p80 = quantiles(timer.time(lambda: gpu.cublas_tn(a, b, c), reps=20))
        ceilings["cublas_bf16_8192"] = {"what": "cuBLAS bf16 TN 8192^3 (torch.mm)",
                                        "flops_s": gemm_flops(m, n, k) / (med * 1e-3),
                                        "t_ms_median": med, "t_ms_p20": p20, "t_ms_p80": p80}
        del a, b, c

    jobs = [(s, lv) for s in shapes for lv in [None, *levels] if lv is None or lv.supports(*s)]
    it = progress(jobs) if progress else jobs
    cublas_ms = {}
    for (m, n, k), lv in it:
        if lv is None and not have_torch:
            continue
        a = gpu.random_bf16((m, k), seed=seed + 1); b = gpu.random_bf16((n, k), seed=seed + 2)
        c = cp.empty((m, n), dtype=cp.uint16)
        row = {"level": 0 if lv is None else lv.id, "name": "cublas" if lv is None else lv.name,
               "m": m, "n": n, "k": k}
        if lv is not None:
            chk = check.check_shape(lv, m, n, k, seed=seed + 7, with_cublas=have_torch)
            row["check_ok"] = chk.ok
            row["check_rel_err"] = chk.rel_err_ref
            if not chk.ok:
                row["check_reason"] = chk.reason
                rows.append(row)
                continue
            fn = lambda: gpu.launch(lv, a, b, c, m, n, k)  # noqa: E731
        else:
            fn = lambda: gpu.cublas_tn(a, b, c)  # noqa: E731
        row.update(timed(timer, fn, min_reps))
        med = row["t_ms_median"]
        row["tflops"] = gemm_flops(m, n, k) / (med * 1e-3) / 1e12
        if lv is None:
            cublas_ms[(m, n, k)] = med
        if (m, n, k) in cublas_ms:
            row["pct_cublas"] = 100.0 * cublas_ms[(m, n, k)] / med
        rows.append(row)
        del a, b, c
    meta = {"device": name, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "method": "CUDA events around each launch, L2 flushed (256 MiB rewrite) before each, "
                      f"warm-up 3, reps sized to ~400 ms ({min_reps}..{max(100, min_reps)}), median/p20/p80",
            "contract": "C[M,N] = A[M,K] B[N,K]^T, bf16 in, fp32 acc, bf16 out",
            "cupy": cp.__version__}
    add_roofline_columns({"ceilings": ceilings, "rows": rows}, table_peaks(name))  # in place
    return BenchResult(meta, ceilings, rows)


def render_table(res: dict) -> str:
    """Markdown table of a bench result (the dict form, as written to JSON)."""
    lines = ["| shape MxNxK | level | t median ms (p20-p80) | TFLOP/s | % cuBLAS | % roofline (measured) "
             "| % roofline (peaks table) | bound | check |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        shape = f"{r['m']}x{r['n']}x{r['k']}"
        lvl = f"{r['level']} {r['name']}"
        if "t_ms_median" not in r:
            lines.append(f"| {shape} | {lvl} | - | - | - | - | - | - | FAIL: {r.get('check_reason', '')} |")
            continue
        t = f"{r['t_ms_median']:.4g} ({r['t_ms_p20']:.4g}-{r['t_ms_p80']:.4g})"
        pc = f"{r['pct_cublas']:.1f}" if "pct_cublas" in r else "-"
        pr = f"{r['pct_roofline_measured']:.1f}" if "pct_roofline_measured" in r else "-"
        pt = f"{r['pct_roofline_table']:.1f}" if "pct_roofline_table" in r else "-"
        ck = "baseline" if r["level"] == 0 else ("ok" if r.get("check_ok") else "FAIL")
        lines.append(f"| {shape} | {lvl} | {t} | {r['tflops']:.1f} | {pc} | {pr} | {pt} | {r.get('bound', '-')} | {ck} |")
    c = res["ceilings"]
    foot = [f"HBM copy ceiling (same run): {c['hbm_copy']['bytes_s'] / 1e12:.2f} TB/s"]
    if "cublas_bf16_8192" in c:
        foot.append(f"compute ceiling = cuBLAS 8192^3 (same run): {c['cublas_bf16_8192']['flops_s'] / 1e12:.0f} TFLOP/s")
    if "table" in c:
        foot.append(f"peaks table ({c['table']['source']}): {c['table']['hbm_bw_bytes_s'] / 1e12:.2f} TB/s "
                    f"({c['table'].get('hbm_bw_kind')}), bf16 {c['table']['bf16_flops_s'] / 1e12:.0f} TFLOP/s "
                    f"({c['table'].get('bf16_flops_kind')})")
    return "\n".join(lines) + "\n\n" + "; ".join(foot)


def render_pivot(res: dict) -> str:
    """One line per shape: cuBLAS median (ms) and every level's % of cuBLAS (median time ratio,
    same run), the best level in bold; '-' where a level does not run the shape (levels 1-2: one
    tile) or failed its check."""
    rows = [r for r in res["rows"] if "t_ms_median" in r]
    levels = sorted({(r["level"], r["name"]) for r in rows if r["level"]})
    shapes = []
    for r in res["rows"]:
        s = (r["m"], r["n"], r["k"])
        if s not in shapes:
            shapes.append(s)
    by = {(r["level"], r["name"], r["m"], r["n"], r["k"]): r for r in rows}
    head = "| shape MxNxK | cuBLAS ms | " + " | ".join(f"L{lv} {nm}" for lv, nm in levels) + " |"
    lines = [head, "|---|---|" + "---|" * len(levels)]
    for s in shapes:
        cub = by.get((0, "cublas", *s))
        pcts = [by[(lv, nm, *s)].get("pct_cublas") if (lv, nm, *s) in by else None for lv, nm in levels]
        best = max((p for p in pcts if p is not None), default=None)
        cells = ["-" if p is None else (f"**{p:.1f}**" if p == best else f"{p:.1f}") for p in pcts]
        lines.append(f"| {s[0]}x{s[1]}x{s[2]} | {cub['t_ms_median']:.4g} | " + " | ".join(cells) + " |"
                     if cub else f"| {s[0]}x{s[1]}x{s[2]} | - | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cluster_residency() -> dict:
    """The cluster builds' resident clusters per SM set, as the launches found them (gpu.CLUSTER_RESIDENCY)."""
    return {f"{k[0]} {' '.join(k[1])}".strip(): {"max_active_clusters": v[0], "how": v[1]}
            for k, v in gpu.CLUSTER_RESIDENCY.items()}


def bench_set(levels, shape_set: str = "default", min_reps: int = 50, log=None) -> dict:
    """The dense contract's bench (its record names it): the levels on a named shape set beside
    cuBLAS; -> the result as written to JSON (meta.shape_set, meta.cluster_residency)."""
    res = run_bench(levels=tuple(lv for lv in levels if lv.contract == "gemm-bf16"), shapes=SHAPE_SETS[shape_set],
                    min_reps=min_reps).to_dict()
    res["meta"]["shape_set"] = shape_set
    res["meta"]["cluster_residency"] = cluster_residency()
    return res


def report(res: dict) -> str:
    """The table of a dense bench result, then (with a measured HBM ceiling) the serving summary."""
    out = render_table(res)
    if res.get("ceilings", {}).get("hbm_copy"):
        out += "\n" + summary(res)
    return out


def summary(res: dict) -> str:
    """Per level: geomean % of cuBLAS over the serving prefill and decode shapes it ran, 8192^3
    with its spread; decode rows as achieved bandwidth against the HBM copy ceiling of the run."""
    rows = [r for r in res["rows"] if "t_ms_median" in r]
    hbm = res["ceilings"]["hbm_copy"]["bytes_s"]
    cub = {(r["m"], r["n"], r["k"]): r for r in rows if r["level"] == 0}
    lines = ["| level | geomean % cuBLAS serving-prefill | geomean % cuBLAS serving-decode | 8192^3 ms (p20-p80) | % cuBLAS 8192^3 |",
             "|---|---|---|---|---|"]
    for lid, nm in sorted({(r["level"], r["name"]) for r in rows if r["level"]}):
        mine = [r for r in rows if r["level"] == lid and r["name"] == nm]
        gp = geomean([r.get("pct_cublas") for r in mine if (r["m"], r["n"], r["k"]) in SERVING_PREFILL])
        gd = geomean([r.get("pct_cublas") for r in mine if (r["m"], r["n"], r["k"]) in SERVING_DECODE])
        big = [r for r in mine if (r["m"], r["n"], r["k"]) == (8192, 8192, 8192)]
        b = (f"{big[0]['t_ms_median']:.4g} ({big[0]['t_ms_p20']:.4g}-{big[0]['t_ms_p80']:.4g})",
             f"{big[0].get('pct_cublas', float('nan')):.1f}") if big else ("-", "-")
        lines.append(f"| {lid} {nm} | {gp:.1f} | {gd:.1f} | {b[0]} | {b[1]} |")
    if (8192, 8192, 8192) in cub:
        c = cub[(8192, 8192, 8192)]
        lines.append(f"cuBLAS 8192^3: {c['t_ms_median']:.4g} ms ({c['t_ms_p20']:.4g}-{c['t_ms_p80']:.4g})")
    lines += ["", "| decode shape | cuBLAS us, TB/s | best level: us, TB/s, % HBM copy, % cuBLAS |", "|---|---|---|"]
    for s in SERVING_DECODE:
        c = cub.get(s)
        cand = [r for r in rows if r["level"] and (r["m"], r["n"], r["k"]) == s]
        if not c or not cand:
            continue
        best = min(cand, key=lambda r: r["t_ms_median"])
        by = gemm_min_bytes(*s)
        lines.append(f"| {s[0]}x{s[1]}x{s[2]} | {c['t_ms_median'] * 1e3:.1f}, {by / c['t_ms_median'] / 1e9:.2f} | "
                     f"L{best['level']} {best['name']}: {best['t_ms_median'] * 1e3:.1f}, {by / best['t_ms_median'] / 1e9:.2f}, "
                     f"{100 * roofline(by, 0.0, best['t_ms_median'] * 1e-3, hbm, None)['hbm_util']:.0f}, {best.get('pct_cublas', 0):.0f} |")
    lines.append(f"HBM copy ceiling {hbm / 1e12:.2f} TB/s")
    return "\n".join(lines)

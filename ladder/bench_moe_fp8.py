"""Timing of levels 11-14 beside the library op, in one process, as data (bench.py's method).

Grouped cases: MoE layers at decode and prefill (MOE_CASES), a routing drawn by
routing.topk_counts (each token picks top_k distinct experts uniformly, seed 0), the ladder
level and torch._grouped_mm (fp8: torch._scaled_grouped_mm) on the same operands, every launch
after a 256 MiB L2 flush (bench.Timer), medians with p20-p80. Fewest bytes = the weights of the
experts hit + A read once + C written once; % of the HBM roof divides the bytes per second by
the peak table's bandwidth (roofline.peaks, 4.8 TB/s on the H200) and by the copy ceiling
measured in the same run. fp8 dense: levels 13-14 beside torch._scaled_mm (rowwise scales,
use_fast_accum=True) on the square-8192 and serving shape sets. Each case is checked first
(check.py); a failing one is not timed. Ratios: library median / level median, with the range
[lib p20 / level p80, lib p80 / level p20]."""
from __future__ import annotations

import math
import time

from roofline.peaks.gemm import gemm_fewest_bytes, gemm_flops

from . import bench, check, gpu, gpu_moe_fp8
from .registry import Level
from .routing import experts_hit, topk_counts

# name -> (E, tokens, top_k, N, K): gate_up is N = 2 x inter, K = hidden; down is N = hidden, K = inter
MOE_CASES: dict[str, tuple[int, int, int, int, int]] = {
    "qwen3moe-decode64-gate_up": (128, 64, 8, 1536, 2048),
    "qwen3moe-decode64-down": (128, 64, 8, 2048, 768),
    "qwen3moe-decode256-gate_up": (128, 256, 8, 1536, 2048),
    "qwen3moe-decode256-down": (128, 256, 8, 2048, 768),
    "mixtral-decode64-gate_up": (8, 64, 2, 28672, 4096),
    "mixtral-decode64-down": (8, 64, 2, 4096, 14336),
    "qwen3moe-prefill4096-gate_up": (128, 4096, 8, 1536, 2048),
    "qwen3moe-prefill4096-down": (128, 4096, 8, 2048, 768),
    # the corpus trace's prefill head is 8192 tokens (512 rows per expert): the class needs both sizes
    "qwen3moe-prefill8192-gate_up": (128, 8192, 8, 1536, 2048),
    "qwen3moe-prefill8192-down": (128, 8192, 8, 2048, 768),
    # the fp8 prefill target is ">= 2048 tokens over 128 experts" (round 5): its smallest size
    "qwen3moe-prefill2048-gate_up": (128, 2048, 8, 1536, 2048),
    "qwen3moe-prefill2048-down": (128, 2048, 8, 2048, 768),
}
# Coverage of the classes the grouped tables dispatch (experts 8..512, intermediate 512..14336,
# tokens 16..8192): real MoE layers, so that a table's pick for a model was measured on a case of
# its kind (with the Qwen3 and Mixtral cases above: E 8 and 128, inter 768 and 14336, tokens 64..8192).
# Level 12/15's device plan held at most 384 experts until round 6 (grouped.cuh MAX_E_WS, now 512): the
# E = 512 prefill case was refused by their launcher then (start8_round5) and runs since. Left out on purpose: prefill cases whose
# float64 check reference alone is over 0.5 TFLOP per build (DeepSeek-V3 and Mixtral prefill).
COVER_CASES: dict[str, tuple[int, int, int, int, int]] = {
    "qwen3moe-decode16-gate_up": (128, 16, 8, 1536, 2048),
    "qwen3next-decode64-gate_up": (512, 64, 10, 1024, 2048),      # E 512, inter 512
    "qwen3next-decode64-down": (512, 64, 10, 2048, 512),
    "qwen3next-prefill4096-down": (512, 4096, 10, 2048, 512),
    "gptoss-prefill2048-down": (128, 2048, 4, 2880, 2880),
    "dsv3-decode256-down": (256, 256, 8, 7168, 2048),             # the full-size layer that ran out of memory
}
MOE_CASES.update(COVER_CASES)
DECODE_CASES = tuple(k for k in MOE_CASES if "decode" in k and k not in COVER_CASES)
PREFILL_CASES = tuple(k for k in MOE_CASES if "prefill" in k and k not in COVER_CASES)


def release_device_memory() -> dict:
    """Give the memory pools back to the device between cases (CuPy's default and pinned pools,
    torch's caching allocator): a case's operands and float64 references are freed by Python, but
    the pools keep the blocks, and a later large case (the full-size DeepSeek-V3 layer) then ran out
    of memory with 122 GB held by the pool. -> the bytes the CuPy pool held before and after."""
    cp = gpu.cupy()
    pool = cp.get_default_memory_pool()
    before = pool.total_bytes()
    pool.free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
    torch = gpu.torch_or_none()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"pool_bytes_before": before, "pool_bytes_after": pool.total_bytes()}


def _ratio(row: dict, lib: dict) -> dict:
    return {"ratio_vs_lib": lib["t_ms_median"] / row["t_ms_median"],
            "ratio_range": [lib["t_ms_p20"] / row["t_ms_p80"], lib["t_ms_p80"] / row["t_ms_p20"]]}


def _timed(timer, fn, min_reps: int) -> dict:
    med, p20, p80 = bench.quantiles(timer.time(fn, min_reps=min_reps, max_reps=max(100, min_reps)))
    return {"t_ms_median": med, "t_ms_p20": p20, "t_ms_p80": p80, "host_over_spin": timer.host_over_spin}


def grouped_case(timer, case: str, levels: list[Level], ceil: dict, layout: str = "enk", fp8: bool = False,
                 min_reps: int = 50) -> list[dict]:
    """One MoE case: check then time each level beside the library op; rows with bytes and ratios."""
    cp = gpu.cupy()
    E, tokens, top_k, N, K = MOE_CASES[case]
    counts = topk_counts(tokens, E, top_k, seed=0)
    R, hit = sum(counts), experts_hit(counts)
    eb = 1 if fp8 else 2
    a, w, offs = check.grouped_operands(counts, N, K, layout, seed=1, fp8=fp8)
    sa = sw = None
    if fp8:
        sa = cp.ones(R, dtype=cp.float32); sw = cp.ones((E, N), dtype=cp.float32)
    c = cp.empty((R, N), dtype=cp.uint16)
    nbytes = hit * N * K * eb + R * K * eb + R * N * 2
    base = {"case": case, "E": E, "tokens": tokens, "top_k": top_k, "rows": R, "N": N, "K": K, "layout": layout,
            "dtype": "fp8" if fp8 else "bf16", "experts_hit": hit, "routing": "topk_counts(tokens, E, top_k, seed=0)",
            "bytes_min": nbytes, "flops": 2.0 * R * N * K}
    lib_fn = ((lambda: gpu_moe_fp8.torch_scaled_grouped(a, w, offs, sa, sw)) if fp8 else
              (lambda: gpu_moe_fp8.torch_grouped(a, w, offs, layout)))
    lib = {**base, "level": 0, "name": "torch._scaled_grouped_mm" if fp8 else "torch._grouped_mm", **_timed(timer, lib_fn, min_reps)}
    rows = [lib]
    for lv in levels:
        try:
            chk = check.check_grouped(lv, counts, N, K, layout=layout, seed=3, case=case)
        except ValueError as exc:   # the launcher refuses the case (more experts than the plan holds)
            rows.append({**base, "level": lv.id, "name": lv.name, "check_ok": False, "check_reason": f"refused: {exc}"})
            continue
        row = {**base, "level": lv.id, "name": lv.name, "check_ok": chk.ok, "check_rel_err": chk.rel_err_ref}
        if not chk.ok:
            rows.append({**row, "check_reason": chk.reason})
            continue
        row.update(_timed(timer, lambda: gpu_moe_fp8.launch_grouped(lv, a, w, offs, c, E, N, K, layout, sa, sw), min_reps))
        rows.append({**row, **_ratio(row, lib)})
    for r in rows:
        if "t_ms_median" in r:
            bps = nbytes / (r["t_ms_median"] * 1e-3)
            r["bytes_s"] = bps
            r["pct_hbm_peak"] = 100.0 * bps / ceil["hbm_peak_bytes_s"] if ceil.get("hbm_peak_bytes_s") else None
            r["pct_hbm_copy"] = 100.0 * bps / ceil["hbm_copy_bytes_s"]
            r["tflops"] = r["flops"] / (r["t_ms_median"] * 1e-3) / 1e12
    del a, w, c, offs, sa, sw, lib_fn
    freed = release_device_memory()
    for r in rows:
        r["pool_bytes_after_case"] = freed["pool_bytes_after"]
    return rows


def fp8_shape(timer, shape, levels: list[Level], min_reps: int = 50) -> list[dict]:
    cp = gpu.cupy()
    m, n, k = shape
    a, b = gpu_moe_fp8.random_fp8((m, k), 1), gpu_moe_fp8.random_fp8((n, k), 2)
    sa, sb = cp.ones(m, dtype=cp.float32), cp.ones(n, dtype=cp.float32)
    c = cp.empty((m, n), dtype=cp.uint16)
    base = {"m": m, "n": n, "k": k, "dtype": "fp8", "flops": gemm_flops(m, n, k),
            "bytes_min": gemm_fewest_bytes(m, n, k, 1, 1, 2)}
    lib = {**base, "level": 0, "name": "torch._scaled_mm", **_timed(timer, lambda: gpu_moe_fp8.torch_scaled(a, b, sa, sb), min_reps)}
    rows = [lib]
    for lv in levels:
        chk = check.check_fp8(lv, m, n, k, seed=5)
        row = {**base, "level": lv.id, "name": lv.name, "check_ok": chk.ok, "check_rel_err": chk.rel_err_ref}
        if not chk.ok:
            rows.append({**row, "check_reason": chk.reason})
            continue
        row.update(_timed(timer, lambda: gpu_moe_fp8.launch_fp8(lv, a, b, sa, sb, c, m, n, k), min_reps))
        rows.append({**row, **_ratio(row, lib)})
    for r in rows:
        if "t_ms_median" in r:
            r["tflops"] = r["flops"] / (r["t_ms_median"] * 1e-3) / 1e12
    del a, b, c, sa, sb
    release_device_memory()
    return rows


def ceilings(timer) -> dict:
    hbm = bench.measure_hbm_copy(timer)
    tp = bench.table_peaks(gpu.device_name()) or {}
    return {"hbm_copy_bytes_s": hbm["bytes_s"], "hbm_copy": hbm, "hbm_peak_bytes_s": tp.get("hbm_bw_bytes_s"),
            "peaks_source": tp.get("source")}


def meta(what: str) -> dict:
    return {"device": gpu.device_name(), "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "what": what, "method": "CUDA events around each launch, L2 flushed (256 MiB rewrite) and a 0.3 ms GPU "
            "spin before each, warm-up 3, median/p20/p80 of 50-100 launches; the library op in the same process"}


def geomean(vals) -> float:
    v = [x for x in vals if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def render(res: dict) -> str:
    """Markdown: one line per (case, level): median (p20-p80), ratio vs the library, TB/s, % roof."""
    lines = ["| case | level | t median us (p20-p80) | x library (range) | TB/s | % HBM peak | % copy | TFLOP/s | check |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        what = r.get("case") or f"{r['m']}x{r['n']}x{r['k']}"
        lvl = f"{r['level']} {r['name']}"
        if "t_ms_median" not in r:
            lines.append(f"| {what} | {lvl} | - | - | - | - | - | - | FAIL: {r.get('check_reason', '')} |")
            continue
        t = f"{r['t_ms_median'] * 1e3:.1f} ({r['t_ms_p20'] * 1e3:.1f}-{r['t_ms_p80'] * 1e3:.1f})"
        x = (f"{r['ratio_vs_lib']:.3f} ({r['ratio_range'][0]:.3f}-{r['ratio_range'][1]:.3f})"
             if "ratio_vs_lib" in r else "1 (baseline)")
        tb = f"{r['bytes_s'] / 1e12:.2f}" if "bytes_s" in r else "-"
        ph = f"{r['pct_hbm_peak']:.1f}" if r.get("pct_hbm_peak") else "-"
        pc = f"{r['pct_hbm_copy']:.1f}" if r.get("pct_hbm_copy") else "-"
        ck = "baseline" if r["level"] == 0 else ("ok" if r.get("check_ok") else "FAIL")
        lines.append(f"| {what} | {lvl} | {t} | {x} | {tb} | {ph} | {pc} | {r['tflops']:.0f} | {ck} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - render a stored result: python3 -m roofline.ladder.bench_moe_fp8 FILE.json
    import json
    import sys

    print(render(json.loads(open(sys.argv[1]).read())))

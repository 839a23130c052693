"""The benches of the grouped and fp8 contracts (levels 11-15) beside the library op, in one process, as
data (bench.py's method).

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

import time

from roofline.peaks.gemm import gemm_fewest_bytes, gemm_flops

from . import bench, check, gpu, gpu_moe_fp8
from .registry import Level
from .routing import experts_hit, topk_counts

# The MoE layers the cases are drawn from: name -> (E, top_k, hidden, inter). A case is one
# projection of a layer at a number of tokens: gate_up is N = 2 x inter, K = hidden; down is
# N = hidden, K = inter.
MOE_LAYERS: dict[str, tuple[int, int, int, int]] = {
    "qwen3moe": (128, 8, 2048, 768), "mixtral": (8, 2, 4096, 14336), "qwen3next": (512, 10, 2048, 512),
    "gptoss": (128, 4, 2880, 2880), "dsv3": (256, 8, 7168, 2048),
    # round 8 (round 8): layers no earlier bench named, the held-out kind of the measurements
    "qwen35moe": (256, 8, 2048, 512), "gptoss20b": (32, 4, 2880, 2880), "olmoe": (64, 8, 2048, 1024),
    "granite4h": (64, 6, 1536, 512)}
PROJECTIONS = ("gate_up", "down")


def moe_cases(*specs) -> dict[str, tuple[int, int, int, int, int]]:
    """(layer, "decode" | "prefill", tokens, projections) -> {"layer-phaseTOKENS-proj": (E, tokens, top_k, N, K)}."""
    out = {}
    for layer, phase, tokens, projs in specs:
        E, top_k, hidden, inter = MOE_LAYERS[layer]
        for proj in projs:
            out[f"{layer}-{phase}{tokens}-{proj}"] = (E, tokens, top_k, *((2 * inter, hidden) if proj == "gate_up" else (hidden, inter)))
    return out


# The corpus trace's prefill head is 8192 tokens (512 rows per expert): the class needs 4096 and
# 8192; the fp8 prefill target is ">= 2048 tokens over 128 experts" (round 5): its smallest size.
MOE_CASES = moe_cases(("qwen3moe", "decode", 64, PROJECTIONS), ("qwen3moe", "decode", 256, PROJECTIONS),
                      ("mixtral", "decode", 64, PROJECTIONS), ("qwen3moe", "prefill", 4096, PROJECTIONS),
                      ("qwen3moe", "prefill", 8192, PROJECTIONS), ("qwen3moe", "prefill", 2048, PROJECTIONS))
# Coverage of the classes the grouped tables dispatch (experts 8..512, intermediate 512..14336,
# tokens 16..8192): real MoE layers, so that a table's pick for a model was measured on a case of
# its kind (with the Qwen3 and Mixtral cases above: E 8 and 128, inter 768 and 14336, tokens 64..8192).
# Level 12/15's device plan held at most 384 experts until round 6 (grouped.cuh MAX_E_WS, now 512): the
# E = 512 prefill case (Qwen3-Next, inter 512) was refused by their launcher then (start8_round5) and runs since. dsv3-decode256-down
# is the full-size layer that ran out of memory. Left out on purpose: prefill cases whose float64
# check reference alone is over 0.5 TFLOP per build (DeepSeek-V3 and Mixtral prefill).
COVER_CASES = moe_cases(("qwen3moe", "decode", 16, ("gate_up",)), ("qwen3next", "decode", 64, PROJECTIONS),
                        ("qwen3next", "prefill", 4096, ("down",)), ("gptoss", "prefill", 2048, ("down",)),
                        ("dsv3", "decode", 256, ("down",)))
# Round 8: decode at 64 and 128 tokens of three layers, 16 and 64 of a Granite-4-H-like one, DeepSeek-V3 decode 128
# down; prefill 4096 (gpt-oss-20b: 2048) of three, both projections.
HELDOUT_CASES = moe_cases(*((lay, "decode", t, PROJECTIONS) for lay in ("qwen35moe", "gptoss20b", "olmoe") for t in (64, 128)),
                          ("granite4h", "decode", 16, PROJECTIONS), ("granite4h", "decode", 64, PROJECTIONS),
                          ("dsv3", "decode", 128, ("down",)), ("qwen35moe", "prefill", 4096, PROJECTIONS),
                          ("olmoe", "prefill", 4096, PROJECTIONS), ("gptoss20b", "prefill", 2048, PROJECTIONS))
DECODE_CASES = tuple(k for k in MOE_CASES if "decode" in k)
PREFILL_CASES = tuple(k for k in MOE_CASES if "prefill" in k)
MOE_CASES.update(COVER_CASES)
MOE_CASES.update(HELDOUT_CASES)
CASE_SETS = {"decode": DECODE_CASES, "prefill": PREFILL_CASES, "cover": tuple(COVER_CASES),
             "all": DECODE_CASES + PREFILL_CASES,
             "heldout-decode": tuple(k for k in HELDOUT_CASES if "decode" in k),
             "heldout-prefill": tuple(k for k in HELDOUT_CASES if "prefill" in k)}
# fp8 dense shape sets (torch._scaled_mm needs N, K % 16 == 0: shapes are padded up, see bench_fp8)
FP8_SHAPE_SETS = {"square-8192": ((8192, 8192, 8192),), "serving": bench.SERVING,
                  "mini": ((8192, 8192, 8192), (4096, 4096, 4096), (2048, 28672, 4096), (3008, 5000, 1024),
                           (64, 4096, 4096), (16, 14336, 4096), (256, 28672, 8192)),
                  "all": ((8192, 8192, 8192),) + bench.SERVING,
                  # round 8: serving shapes no earlier bench named (decode, mid, prefill); 2048x248320x2048 (an LM
                  # head) is left out: the check's float64 reference alone is ~2 TFLOP per build
                  "heldout": ((2048, 5760, 2880), (512, 7168, 2048), (1024, 2880, 5760), (256, 7168, 2048),
                              (16, 5760, 2880), (64, 2048, 7168), (128, 5120, 2880), (4096, 2048, 5632))}


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


def _beside_library(timer, base: dict, lib: dict, levels, min_reps: int, check_one, launch_one) -> list[dict]:
    """The library's row, then each build checked first on the same case (check_one(lv); a
    ValueError: its launcher refuses the case, e.g. more experts than its plan holds) and, if it
    passes, timed (launch_one(lv)) with its ratio to the library; a failing build is not timed."""
    rows = [lib]
    for lv in levels:
        try:
            chk = check_one(lv)
        except ValueError as exc:
            rows.append({**base, "level": lv.id, "name": lv.name, "check_ok": False, "check_reason": f"refused: {exc}"})
            continue
        row = {**base, "level": lv.id, "name": lv.name, "check_ok": chk.ok, "check_rel_err": chk.rel_err_ref}
        if not chk.ok:
            rows.append({**row, "check_reason": chk.reason})
            continue
        row.update(bench.timed(timer, lambda: launch_one(lv), min_reps))
        rows.append({**row, **_ratio(row, lib)})
    return rows


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
    lib = {**base, "level": 0, "name": "torch._scaled_grouped_mm" if fp8 else "torch._grouped_mm", **bench.timed(timer, lib_fn, min_reps)}
    rows = _beside_library(timer, base, lib, levels, min_reps,
                           lambda lv: check.check_grouped(lv, counts, N, K, layout=layout, seed=3, case=case),
                           lambda lv: gpu_moe_fp8.launch_grouped(lv, a, w, offs, c, E, N, K, layout, sa, sw))
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
    lib = {**base, "level": 0, "name": "torch._scaled_mm", **bench.timed(timer, lambda: gpu_moe_fp8.torch_scaled(a, b, sa, sb), min_reps)}
    rows = _beside_library(timer, base, lib, levels, min_reps, lambda lv: check.check_fp8(lv, m, n, k, seed=5),
                           lambda lv: gpu_moe_fp8.launch_fp8(lv, a, b, sa, sb, c, m, n, k))
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


def moe_plan(levels, cases: str) -> list[tuple[str, list, bool]]:
    """(case, builds, fp8) in the order the MoE bench times them (cases: a CASE_SETS name). Decode
    cases: every bf16 and every fp8 build; prefill cases: the tile-engine ("ws") builds and the
    first level-11 build of each dtype (the weight-streaming kernel at prefill, for the record).
    Builds that read W [E, K, N] are timed apart (bench_moe), on the bf16 decode cases."""
    plan = []
    for case in CASE_SETS[cases]:
        for fp8 in (False, True):
            mine = [x for x in levels if x.contract == ("grouped-fp8" if fp8 else "grouped-bf16")
                    and gpu_moe_fp8.grouped_layout(x) == "enk"]
            if "prefill" in case:
                mine = [x for x in mine if x.kind == "ws"] + [x for x in mine if x.id == 11][:1]
            if mine:
                plan.append((case, mine, fp8))
    return plan


def bench_moe(levels, cases: str = "all", min_reps: int = 50, log=None) -> dict:
    """The grouped contracts' bench (their records name it): every case of the set, each build
    checked then timed beside torch._grouped_mm / torch._scaled_grouped_mm. -> the result (rows)."""
    timer = bench.Timer()
    ceil = ceilings(timer)
    ekn = [x for x in levels if x.contract == "grouped-bf16" and gpu_moe_fp8.grouped_layout(x) == "ekn"]
    rows, skipped = [], []
    for case, builds, fp8 in moe_plan(levels, cases):
        try:
            rows += grouped_case(timer, case, builds, ceil, fp8=fp8, min_reps=min_reps)
        except gpu.cupy().cuda.memory.OutOfMemoryError as exc:   # a case too big for this device: say so, go on
            release_device_memory()
            skipped.append({"case": case, "dtype": "fp8" if fp8 else "bf16", "why": f"operands did not fit: {str(exc)[:160]}"})
            if log:
                log(f"moe {case} {'fp8' if fp8 else 'bf16'}: OUT OF MEMORY, skipped")
            continue
        if not fp8 and "decode" in case and ekn:
            rows += grouped_case(timer, case, ekn, ceil, layout="ekn", min_reps=min_reps)
        if log:
            log(f"moe {case} {'fp8' if fp8 else 'bf16'}: done, pool {rows[-1].get('pool_bytes_after_case') if rows else '-'} B after")
    return {"meta": {**meta("grouped MoE GEMMs beside torch._grouped_mm / torch._scaled_grouped_mm"), "case_set": cases,
                     "skipped": skipped}, "ceilings": ceil, "rows": rows}


def bench_fp8(levels, shapes: str = "all", min_reps: int = 50, log=None) -> dict:
    """The fp8 dense contract's bench (its record names it): the FP8_SHAPE_SETS set beside
    torch._scaled_mm; the ragged 3000x5000x1000 runs as 3000x5008x1008, 777x1531x263 as 777x1536x272
    (torch._scaled_mm needs N, K % 16 == 0)."""
    timer = bench.Timer()
    levels = [x for x in levels if x.contract == "gemm-fp8"]
    pad16 = lambda s: (s[0], -(-s[1] // 16) * 16, -(-s[2] // 16) * 16)  # noqa: E731
    rows = []
    for s in map(pad16, FP8_SHAPE_SETS[shapes]):
        use = levels if s == (8192, 8192, 8192) else [x for x in levels if x.name != "fp8_nocluster"]
        rows += fp8_shape(timer, s, use, min_reps=min_reps)
    return {"meta": {**meta("fp8 e4m3 dense beside torch._scaled_mm (rowwise, use_fast_accum=True)"),
                     "shape_set": shapes}, "ceilings": {}, "rows": rows}


def report(res: dict) -> str:
    """The table, then for fp8 dense rows each build's geomean over the shapes and the best build
    per shape's."""
    lines = [render(res)]
    rows = [x for x in res["rows"] if "ratio_vs_lib" in x and "m" in x]
    for lid, name in dict.fromkeys((x["level"], x["name"]) for x in rows):
        r = [x["ratio_vs_lib"] for x in rows if (x["level"], x["name"]) == (lid, name)]
        lines.append(f"fp8 {name}: geomean x torch._scaled_mm over {len(r)} shapes {bench.geomean(r):.3f}")
    best: dict = {}
    for x in rows:
        k = (x["m"], x["n"], x["k"])
        best[k] = max(best.get(k, 0), x["ratio_vs_lib"])
    if best:
        lines.append(f"fp8 best level per shape: geomean {bench.geomean(best.values()):.3f} over {len(best)} shapes")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - render a stored result: python3 -m roofline.ladder.bench_moe_fp8 FILE.json
    import json
    import sys

    print(report(json.loads(open(sys.argv[1]).read())))

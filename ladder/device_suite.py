"""The ladder's one device driver (numpy + cupy, torch for cuBLAS; argparse, no click, so it runs
under the device image's python3). Run it through `bash ladder/device.sh` (every stage, in order,
with time limits) or one stage at a time, with the project installed (`pip install --no-index
--no-deps --no-build-isolation -e .` on the device; ladder/README.md):

  python3 -m roofline.ladder.device_suite levels [--variants] [--files]  # the registry's list
  python3 -m roofline.ladder.device_suite smoke --level N      # a few shapes of one level
  python3 -m roofline.ladder.device_suite check    [--n-random 200] [--out DIR]   # one process
  python3 -m roofline.ladder.device_suite check-isolated [--targets 7,l09_pingpong,...] [--limit-s 60]
  python3 -m roofline.ladder.device_suite sanitize   # small shapes, host reference, no cuBLAS
  python3 -m roofline.ladder.device_suite bench    [--shapes SET] [--targets ...] [--tag T] [--out DIR]
  python3 -m roofline.ladder.device_suite variants [--targets ...] [--out DIR]  # each level's variants beside it

Levels and variants come from the registry (registry.LEVELS, registry.VARIANTS); --targets (or
LADDER_LEVELS=4,5,6 for check/sanitize/bench) narrows them. Shape sets: bench.SHAPE_SETS.
check-isolated runs every target in a FORKED child with a time limit, so that a hung or faulting
build costs only itself (the parent never touches CUDA), and writes the passing targets to
$OUT/pass.txt. Exit status 1 if any check fails (or the wrong kernel passes).
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from roofline.peaks.roof import roofline

from . import bench, check, gpu
from .registry import DENSE_LEVELS as LEVELS, VARIANTS, WRONG, get_level

# each level's variants are timed beside it on these shapes (those a level supports): one long-K
# tile, square, prefill, ragged and decode shapes
VARIANT_SHAPES = ((128, 128, 8192), (4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 4096),
                  (8192, 4096, 14336), (3000, 5000, 1000), (16, 4096, 4096), (64, 4096, 4096),
                  (64, 14336, 4096), (128, 4096, 14336), (256, 28672, 8192))


def all_targets(variants: bool = True) -> list[str]:
    """Every registry level id, then (variants=True) every registry variant name."""
    return [str(lv.id) for lv in LEVELS] + ([k for k, v in VARIANTS.items() if v.contract == "gemm-bf16"] if variants else [])


def _target(name: str):
    return get_level(int(name)) if name.isdigit() else VARIANTS[name]


def _levels():
    sel = os.environ.get("LADDER_LEVELS", "").strip()
    if not sel:
        return LEVELS
    ids = {int(x) for x in sel.split(",") if x.strip()}
    return tuple(lv for lv in LEVELS if lv.id in ids)


def do_smoke(level_id: int) -> bool:
    lv = get_level(level_id)
    ok = True
    shapes = [(128, 128, 64), (300, 200, 72), (1000, 1000, 1000), (129, 257, 33), (100, 37, 40)]
    if lv.kind in ("persistent", "ws"):
        shapes += [(1500, 2900, 77), (4096, 4096, 320), (64, 4096, 4096)]
    for s in shapes:
        if not lv.supports(*s):
            continue
        r = check.check_shape(lv, *s, seed=4)
        print(f"smoke L{lv.id} {s}: {'ok' if r.ok else 'FAIL ' + r.reason} (rel {r.rel_err_ref:.3g})")
        if not r.ok and s == (128, 128, 64):
            _diagnose(lv, *s)
        ok &= r.ok
    return ok


def _diagnose(level, m, n, k):
    """On a failing single tile, say which accumulator positions are wrong (layout debugging)."""
    import numpy as np
    cp = gpu.cupy()
    a = gpu.random_bf16((m, k), seed=5); b = gpu.random_bf16((n, k), seed=6)
    c = cp.full((m, n), gpu.POISON_BITS, dtype=cp.uint16)
    gpu.launch(level, a, b, c, m, n, k)
    ref = (gpu.bf16_bits_to_f32(a, cp).astype(cp.float64) @ gpu.bf16_bits_to_f32(b, cp).astype(cp.float64).T)
    out = gpu.bf16_bits_to_f32(c, cp).astype(cp.float64)
    bad = cp.asnumpy(~(cp.abs(out - ref) <= 0.02 * cp.abs(ref) + 0.05))
    print(f"  diag L{level.id} {m}x{n}x{k}: bad {bad.sum()} of {bad.size}; "
          f"bad rows (first 20) {np.nonzero(bad.any(1))[0][:20].tolist()}; "
          f"bad cols (first 20) {np.nonzero(bad.any(0))[0][:20].tolist()}")
    print("  out[0:2,0:8]", cp.asnumpy(out[0:2, 0:8]).round(3).tolist())
    print("  ref[0:2,0:8]", cp.asnumpy(ref[0:2, 0:8]).round(3).tolist())
    # does out match ref transposed / permuted somewhere? cheap probes
    if m == n:
        print("  rel err vs ref.T:", float(cp.linalg.norm(out - ref.T) / cp.linalg.norm(ref)))


def do_check(n_random: int, out_dir: Path | None) -> bool:
    ok_all = True
    summary = {}
    allres = []
    for lv in _levels():
        t0 = time.time()
        first = check.check_shape(lv, 128 if lv.max_m else 256, 128 if lv.max_n else 256, 64, seed=1)
        if not first.ok:
            print(f"L{lv.id}: first check FAILED: {first.reason}")
            _diagnose(lv, 128, 128, 64)
        res = check.check_level(lv, n_random=n_random, seed=0)
        allres += [r.to_dict() for r in res]
        fails = [r for r in res if not r.ok]
        rels = [r.rel_err_ref for r in res if r.ok]
        relc = [r.rel_err_cublas for r in res if r.ok and r.rel_err_cublas is not None]
        summary[lv.id] = {"shapes": len(res), "failed": len(fails),
                          "specials": sum(r.specials for r in res),
                          "max_rel_err_ref": max(rels) if rels else None,
                          "max_rel_err_cublas": max(relc) if relc else None,
                          "seconds": time.time() - t0}
        print(f"L{lv.id} check: {len(res) - len(fails)}/{len(res)} shapes pass "
              f"({summary[lv.id]['specials']} with NaN/Inf), max rel err vs f64 "
              f"{summary[lv.id]['max_rel_err_ref']}, vs cuBLAS {summary[lv.id]['max_rel_err_cublas']}")
        for r in fails[:8]:
            print(f"   FAIL {r.m}x{r.n}x{r.k} specials={r.specials}: {r.reason}")
        ok_all &= not fails
    # the deliberately wrong kernel must fail on shapes with more than one K tile
    wrong = WRONG["l03_skip_last_k"]
    wshapes = [(128, 128, 128), (200, 300, 65), (64, 4096, 4096), (16, 16, 129)]
    wres = [check.check_shape(wrong, *s, seed=3) for s in wshapes]
    caught = all(not r.ok for r in wres)
    print(f"wrong kernel (skip last K tile) caught on {sum(not r.ok for r in wres)}/{len(wres)} shapes: "
          + "; ".join(f"{r.m}x{r.n}x{r.k}: {r.reason or 'PASSED (bad)'}" for r in wres))
    ok_all &= caught
    if out_dir:
        (out_dir / "check.json").write_text(json.dumps(
            {"summary": summary, "wrong_kernel_caught": caught,
             "wrong": [r.to_dict() for r in wres], "results": allres}, indent=1))
    return ok_all


def do_sanitize() -> bool:
    """Small shapes only, float64 reference on the host, no cuBLAS: for compute-sanitizer.
    LADDER_SAN_VARIANTS=name,name adds registry VARIANTS."""
    ok = True
    extra = [VARIANTS[v] for v in os.environ.get("LADDER_SAN_VARIANTS", "").split(",") if v]
    for lv in list(_levels()) + extra:
        shapes = [(128, 128, 64), (100, 37, 40), (129, 130, 200)]
        if lv.kind in ("persistent", "ws"):
            shapes.append((1600, 4400, 72))
        if lv.splitk == -2:
            shapes += [(1792, 2560, 1024), (512, 2560, 1024)]   # stream-K: whole waves + split tail, all split
        if lv.splitk:
            shapes.append((64, 512, 2048))   # split-K: 8 tiles, several splits, the reduction   # 13 x 18 = 234 tiles > 132 CTAs: ledger crosses tiles
        for s in shapes:
            if not lv.supports(*s):
                continue
            r = check.check_shape(lv, *s, seed=9, host_ref=True, with_cublas=False)
            print(f"sanitize-mode L{lv.id} {lv.name} {s}: {'ok' if r.ok else 'FAIL ' + r.reason}")
            ok &= r.ok
    return ok


def _check_child(name: str, n_random: int, q) -> None:
    from . import check
    lv = _target(name)
    t0 = time.time()
    res = check.check_level(lv, n_random=n_random, seed=0)
    fails = [r for r in res if not r.ok]
    rels = [r.rel_err_ref for r in res if r.ok]
    relc = [r.rel_err_cublas for r in res if r.ok and r.rel_err_cublas is not None]
    q.put({"target": name, "level": lv.id, "name": lv.name, "shapes": len(res), "failed": len(fails),
           "specials": sum(r.specials for r in res), "max_rel_err_ref": max(rels) if rels else None,
           "max_rel_err_cublas": max(relc) if relc else None, "seconds": time.time() - t0,
           "fails": [r.to_dict() for r in fails[:10]]})


def do_check_isolated(targets, n_random: int, out: Path | None, limit_s: float) -> list[str]:
    ctx = mp.get_context("fork")
    summary, passing = [], []
    for name in targets:
        q = ctx.Queue()
        p = ctx.Process(target=_check_child, args=(name, n_random, q))
        t0 = time.time()
        p.start()
        p.join(limit_s)
        if p.is_alive():
            p.kill(); p.join()
            rec = {"target": name, "hang": True, "seconds": time.time() - t0}
        else:
            rec = q.get() if not q.empty() else {"target": name, "crashed": True, "exitcode": p.exitcode}
        summary.append(rec)
        ok = rec.get("failed") == 0
        if ok:
            passing.append(name)
        desc = (f"{rec['shapes'] - rec['failed']}/{rec['shapes']} pass ({rec['specials']} NaN/Inf), max rel err "
                f"vs f64 {rec['max_rel_err_ref']:.3g}, vs cuBLAS {rec['max_rel_err_cublas']:.3g}, {rec['seconds']:.1f} s"
                if "shapes" in rec and rec["max_rel_err_ref"] is not None else json.dumps(rec)[:300])
        print(f"check {name}: {'OK' if ok else 'FAIL'} {desc}", flush=True)
        for f in rec.get("fails", [])[:5]:
            print(f"   FAIL {f['m']}x{f['n']}x{f['k']} specials={f['specials']}: {f['reason']}", flush=True)
    if out:
        (out / "check_isolated.json").write_text(json.dumps({"n_random": n_random, "targets": summary}, indent=1))
        (out / "pass.txt").write_text(",".join(passing))
    return passing


def _gm(vals):
    vals = [v for v in vals if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def summarize(res: dict) -> str:
    """Per level: geomean % of cuBLAS over the serving prefill and decode shapes it ran, 8192^3
    with its spread; decode rows as achieved bandwidth against the HBM copy ceiling of the run."""
    rows = [r for r in res["rows"] if "t_ms_median" in r]
    hbm = res["ceilings"]["hbm_copy"]["bytes_s"]
    pre = set(bench.SERVING_PREFILL)
    dec = set(bench.SERVING_DECODE)
    lines = []
    names = sorted({(r["level"], r["name"]) for r in rows if r["level"]})
    lines.append("| level | geomean % cuBLAS serving-prefill | geomean % cuBLAS serving-decode | 8192^3 ms (p20-p80) | % cuBLAS 8192^3 |")
    lines.append("|---|---|---|---|---|")
    cub = {(r["m"], r["n"], r["k"]): r for r in rows if r["level"] == 0}
    for lid, nm in names:
        mine = [r for r in rows if r["level"] == lid and r["name"] == nm]
        gp = _gm([r.get("pct_cublas") for r in mine if (r["m"], r["n"], r["k"]) in pre])
        gd = _gm([r.get("pct_cublas") for r in mine if (r["m"], r["n"], r["k"]) in dec])
        big = [r for r in mine if (r["m"], r["n"], r["k"]) == (8192, 8192, 8192)]
        b = (f"{big[0]['t_ms_median']:.4g} ({big[0]['t_ms_p20']:.4g}-{big[0]['t_ms_p80']:.4g})", f"{big[0].get('pct_cublas', float('nan')):.1f}") if big else ("-", "-")
        lines.append(f"| {lid} {nm} | {gp:.1f} | {gd:.1f} | {b[0]} | {b[1]} |")
    if (8192, 8192, 8192) in cub:
        c = cub[(8192, 8192, 8192)]
        lines.append(f"cuBLAS 8192^3: {c['t_ms_median']:.4g} ms ({c['t_ms_p20']:.4g}-{c['t_ms_p80']:.4g})")
    lines.append("")
    lines.append("| decode shape | cuBLAS us, TB/s | best level: us, TB/s, % HBM copy, % cuBLAS |")
    lines.append("|---|---|---|")
    for s in bench.SERVING_DECODE:
        c = cub.get(s)
        cand = [r for r in rows if r["level"] and (r["m"], r["n"], r["k"]) == s]
        if not c or not cand:
            continue
        best = min(cand, key=lambda r: r["t_ms_median"])
        by = bench.gemm_min_bytes(*s)
        lines.append(f"| {s[0]}x{s[1]}x{s[2]} | {c['t_ms_median'] * 1e3:.1f}, {by / c['t_ms_median'] / 1e9:.2f} | "
                     f"L{best['level']} {best['name']}: {best['t_ms_median'] * 1e3:.1f}, {by / best['t_ms_median'] / 1e9:.2f}, "
                     f"{100 * roofline(by, 0.0, best['t_ms_median'] * 1e-3, hbm, None)['hbm_util']:.0f}, {best.get('pct_cublas', 0):.0f} |")
    lines.append(f"HBM copy ceiling {hbm / 1e12:.2f} TB/s")
    return "\n".join(lines)


def _residency() -> dict:
    from . import gpu
    r = {f"{k[0]} {' '.join(k[1])}".strip(): {"max_active_clusters": v[0], "how": v[1]}
         for k, v in gpu.CLUSTER_RESIDENCY.items()}
    if r:
        print("cluster residency:", json.dumps(r), flush=True)
    return r


def do_bench(targets, out: Path | None, shape_set: str, tag: str, min_reps: int) -> bool:
    lvls = tuple(_target(t) for t in targets)
    res = bench.run_bench(levels=lvls, shapes=bench.SHAPE_SETS[shape_set], min_reps=min_reps).to_dict()
    res["meta"]["shape_set"] = shape_set
    res["meta"]["cluster_residency"] = _residency()
    if out:
        (out / f"bench_{tag}.json").write_text(json.dumps(res, indent=1))
    print(bench.render_table(res), flush=True)
    if res.get("ceilings", {}).get("hbm_copy"):
        print(summarize(res), flush=True)
    return all(r.get("check_ok", True) for r in res["rows"])


def do_variants(targets, out: Path | None, min_reps: int) -> bool:
    """Each registry level with variants, timed beside them (same process, VARIANT_SHAPES)."""
    chosen = set(targets)
    allres, ok = [], True
    for lv in LEVELS:
        names = [k for k, v in VARIANTS.items() if v.id == lv.id and k in chosen]
        if not names or str(lv.id) not in chosen:
            continue
        res = bench.run_bench(levels=(lv, *(VARIANTS[n] for n in names)), shapes=VARIANT_SHAPES,
                              min_reps=min_reps).to_dict()
        res["meta"]["cluster_residency"] = _residency()
        allres.append(res)
        print(bench.render_table(res), flush=True)
        ok &= all(r.get("check_ok", True) for r in res["rows"])
    if out:
        (out / "variants.json").write_text(json.dumps(allres, indent=1))
    return ok


def do_levels(variants: bool, files: bool) -> None:
    if files:
        print(" ".join(dict.fromkeys(lv.file for lv in LEVELS)))
    else:
        print(",".join(all_targets(variants)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["levels", "smoke", "check", "check-isolated", "sanitize", "bench", "variants"])
    ap.add_argument("--n-random", type=int, default=200)
    ap.add_argument("--level", type=int, default=None)
    ap.add_argument("--targets", default=None, help="level ids and variant names (default: the registry's)")
    ap.add_argument("--shapes", default="default", choices=sorted(bench.SHAPE_SETS))
    ap.add_argument("--tag", default=None, help="bench: writes bench_<tag>.json (default: the shape set)")
    ap.add_argument("--min-reps", type=int, default=50)
    ap.add_argument("--limit-s", type=float, default=60.0)
    ap.add_argument("--variants", action="store_true", help="levels: list the variants too")
    ap.add_argument("--files", action="store_true", help="levels: the kernel files instead")
    ap.add_argument("--set", default=None, help="levels: a named set of targets (registry.TARGET_SETS)")
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args(argv)
    if args.what == "levels":
        if args.set:
            from .target_sets import TARGET_SETS
            print(",".join(TARGET_SETS[args.set]))
            return 0
        do_levels(args.variants, args.files)
        return 0
    if args.what == "check-isolated":   # the parent never touches CUDA
        targets = args.targets.split(",") if args.targets else all_targets()
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
        passing = do_check_isolated([t for t in targets if t], args.n_random, args.out, args.limit_s)
        return 0 if len(passing) == len([t for t in targets if t]) else 1
    if not gpu.gpu_available():
        print("no GPU / cupy: nothing to do", file=sys.stderr)
        return 2
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    print(f"device: {gpu.device_name()}")
    targets = [t for t in args.targets.split(",") if t] if args.targets else None
    ok = True
    if args.what == "smoke":
        ok &= do_smoke(args.level)
    if args.what == "check":
        ok &= do_check(args.n_random, args.out)
    if args.what == "sanitize":
        ok &= do_sanitize()
    if args.what == "bench":
        ok &= do_bench(targets or [str(lv.id) for lv in _levels()], args.out, args.shapes,
                       args.tag or args.shapes, args.min_reps)
    if args.what == "variants":
        ok &= do_variants(targets or all_targets(), args.out, args.min_reps)
    print("SUITE", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

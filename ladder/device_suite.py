"""One script for a device call: build, check, sanitize-mode, bench. Needs only numpy + cupy
(+ torch for cuBLAS); no click/tqdm, so it runs under the device image's python3 with
PYTHONPATH=. and no install.

  python3 -m roofline.ladder.device_suite smoke --level N     # a few shapes of one level
  python3 -m roofline.ladder.device_suite check    [--n-random 200] [--out DIR]
  python3 -m roofline.ladder.device_suite sanitize   # small shapes, host reference, no cuBLAS
  python3 -m roofline.ladder.device_suite bench    [--shapes default|issue6] [--out DIR]
  python3 -m roofline.ladder.device_suite variants [--out DIR]   # v1 vs current, same run
  python3 -m roofline.ladder.device_suite overlap  [--out DIR]   # level 5 depth 1/2/4, level 6 order
  python3 -m roofline.ladder.device_suite epilogue [--out DIR]   # level 6 epilogue variants
  python3 -m roofline.ladder.device_suite all      [--out DIR]   # check, then bench
LADDER_LEVELS=4,5,6 restricts check/sanitize/bench to those levels (device_all.sh sets it to
the levels whose smoke test passed, so that one hung or broken level costs only its smoke run).
Exit status 1 if any check fails (or the wrong kernel passes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import bench, check, gpu
from .registry import LEVELS, VARIANTS, WRONG, get_level


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
        if lv.splitk:
            shapes.append((64, 512, 2048))   # split-K: 8 tiles, several splits, the reduction   # 13 x 18 = 234 tiles > 132 CTAs: ledger crosses tiles
        for s in shapes:
            if not lv.supports(*s):
                continue
            r = check.check_shape(lv, *s, seed=9, host_ref=True, with_cublas=False)
            print(f"sanitize-mode L{lv.id} {lv.name} {s}: {'ok' if r.ok else 'FAIL ' + r.reason}")
            ok &= r.ok
    return ok


def do_bench(out_dir: Path | None, shape_set: str = "default") -> bool:
    res = bench.run_bench(levels=_levels(), shapes=bench.SHAPE_SETS[shape_set], progress=None).to_dict()
    res["meta"]["shape_set"] = shape_set
    if out_dir:
        (out_dir / "bench.json").write_text(json.dumps(res, indent=1))
    print(bench.render_table(res))
    return all(r.get("check_ok", True) for r in res["rows"])


def do_variants(out_dir: Path | None) -> bool:
    """Earlier measured versions beside the current ones, same process (notes: v1 -> v2)."""
    ok = True
    for v in VARIANTS.values():
        res = check.check_level(v, n_random=20, seed=77)
        bad = [r for r in res if not r.ok]
        print(f"variant {v.name}: {len(res) - len(bad)}/{len(res)} shapes pass")
        ok &= not bad
    lv = (VARIANTS["l02_v1_serial_copy"], get_level(2), VARIANTS["l03_v1_serial_copy"], get_level(3))
    res = bench.run_bench(levels=lv, shapes=((128, 128, 8192), (4096, 4096, 4096), (64, 28672, 4096))).to_dict()
    if out_dir:
        (out_dir / "variants.json").write_text(json.dumps(res, indent=1))
    print(bench.render_table(res))
    return ok and all(r.get("check_ok", True) for r in res["rows"])


def do_overlap(out_dir: Path | None) -> bool:
    """Level 5 at PIPE_DEPTH 1 (no overlap), 2 and 4 (shipped), same 128x256 tile, same process;
    level 6 with and without the grouped tile order."""
    ok = True
    vs = (VARIANTS["l05_depth1"], VARIANTS["l05_depth2"], VARIANTS["l06_group1"])
    for v in vs:
        res = check.check_level(v, n_random=20, seed=77)
        bad = [r for r in res if not r.ok]
        print(f"variant {v.name}: {len(res) - len(bad)}/{len(res)} shapes pass"
              + "".join(f"\n   FAIL {r.m}x{r.n}x{r.k}: {r.reason}" for r in bad[:4]))
        ok &= not bad
    lv = (vs[0], vs[1], get_level(5), vs[2], get_level(6))
    res = bench.run_bench(levels=lv, shapes=((4096, 4096, 4096), (8192, 8192, 8192), (8192, 28672, 4096))).to_dict()
    if out_dir:
        (out_dir / "overlap.json").write_text(json.dumps(res, indent=1))
    print(bench.render_table(res))
    return ok and all(r.get("check_ok", True) for r in res["rows"])


def do_epilogue(out_dir: Path | None, n_random: int) -> bool:
    """Level 6's epilogue variants (register store at depth 4 = level 6, depth 3, TMA store at
    depth 3) checked on the full suite, then timed beside level 5 and level 6, same process."""
    ok = True
    vs = (VARIANTS["l06_depth3"], VARIANTS["l06_tma_store"])
    summary = {}
    for v in vs:
        res = check.check_level(v, n_random=n_random, seed=0)
        bad = [r for r in res if not r.ok]
        summary[v.name] = {"shapes": len(res), "failed": len(bad), "specials": sum(r.specials for r in res)}
        print(f"variant {v.name}: {len(res) - len(bad)}/{len(res)} shapes pass"
              + "".join(f"\n   FAIL {r.m}x{r.n}x{r.k}: {r.reason}" for r in bad[:4]))
        ok &= not bad
    lv = (get_level(5), get_level(6), vs[0], vs[1])
    shapes = ((4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 4096), (8192, 4096, 4096),
              (8192, 28672, 4096), (64, 28672, 4096))
    res = bench.run_bench(levels=lv, shapes=shapes).to_dict()
    res["meta"]["variant_checks"] = summary
    if out_dir:
        (out_dir / "epilogue.json").write_text(json.dumps(res, indent=1))
    print(bench.render_table(res))
    return ok and all(r.get("check_ok", True) for r in res["rows"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["smoke", "check", "sanitize", "bench", "variants", "overlap", "epilogue", "all"])
    ap.add_argument("--n-random", type=int, default=200)
    ap.add_argument("--level", type=int, default=None)
    ap.add_argument("--shapes", default="default", choices=sorted(bench.SHAPE_SETS))
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args(argv)
    if not gpu.gpu_available():
        print("no GPU / cupy: nothing to do", file=sys.stderr)
        return 2
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    print(f"device: {gpu.device_name()}")
    ok = True
    if args.what == "smoke":
        ok &= do_smoke(args.level)
    if args.what == "overlap":
        ok &= do_overlap(args.out)
    if args.what == "epilogue":
        ok &= do_epilogue(args.out, args.n_random)
    if args.what in ("check", "all"):
        ok &= do_check(args.n_random, args.out)
    if args.what == "sanitize":
        ok &= do_sanitize()
    if args.what == "variants":
        ok &= do_variants(args.out)
    if args.what in ("bench", "all"):
        ok &= do_bench(args.out, args.shapes)
    print("SUITE", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

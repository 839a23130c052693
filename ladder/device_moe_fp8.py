"""The device driver of levels 11-14 (grouped MoE and fp8; numpy + cupy, torch for the library
ops; argparse, so it runs under the device image's python3). With the project installed:

  python3 -m roofline.ladder.device_moe_fp8 levels                    # the registry's grouped / fp8 targets
  python3 -m roofline.ladder.device_moe_fp8 check [--targets 12,l11_fp8,...] [--n-random 30] [--out DIR]
  python3 -m roofline.ladder.device_moe_fp8 sanitize [--targets ...]     # small cases, no library op
  python3 -m roofline.ladder.device_moe_fp8 probe --targets 11           # edge cases one by one, in process
  python3 -m roofline.ladder.device_moe_fp8 bench-moe [--cases decode|prefill|all] [--out DIR]
  python3 -m roofline.ladder.device_moe_fp8 bench-fp8 [--shapes square-8192|serving|all] [--out DIR]

check runs each target in a forked child with a time limit (a hung build costs only itself) and
writes check_x.json + pass_x.txt; the benches write bench_moe.json / bench_fp8.json (bench_moe_fp8's
rows) and print the table. tools/device/moe_fp8.sh runs them in order under one time budget.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from . import bench, bench_moe_fp8, check, gpu, gpu_moe_fp8
from .registry import VARIANTS, contract_fn, get_level

from .registry import LEVELS


def x_targets() -> list[str]:
    """The registry's levels and variants of the grouped and fp8 contracts (device_suite runs the dense ones)."""
    return ([str(lv.id) for lv in LEVELS if lv.contract != "gemm-bf16"]
            + [k for k, v in VARIANTS.items() if v.contract != "gemm-bf16"])


def _target(name: str):
    return get_level(int(name)) if name.isdigit() else VARIANTS[name]


def _summ(name, res) -> dict:
    fails = [r for r in res if not r.ok]
    rels = [r.rel_err_ref for r in res if r.ok]
    libs = [r.rel_err_lib for r in res if r.ok and r.rel_err_lib is not None]
    return {"target": name, "cases": len(res), "failed": len(fails), "specials": sum(r.specials for r in res),
            "max_rel_err_ref": max(rels) if rels else None, "max_rel_err_lib": max(libs) if libs else None,
            "lib_compared": len(libs), "fails": [r.to_dict() for r in fails[:10]]}


def _child(name: str, n_random: int, q) -> None:
    lv = _target(name)
    t0 = time.time()
    res = contract_fn(lv.contract, "check")(lv, n_random=n_random, seed=0)   # the contract's check of one level
    q.put({**_summ(name, res), "seconds": time.time() - t0})


def do_check(targets, n_random: int, out: Path | None, limit_s: float) -> list[str]:
    ctx = mp.get_context("fork")
    summary, passing = [], []
    for name in targets:
        q = ctx.Queue()
        p = ctx.Process(target=_child, args=(name, n_random, q))
        t0 = time.time()
        p.start()
        p.join(limit_s)
        if p.is_alive():
            p.kill(); p.join()
            rec = {"target": name, "hang": True, "seconds": time.time() - t0}
        else:
            rec = q.get() if not q.empty() else {"target": name, "crashed": True, "exitcode": p.exitcode}
        summary.append(rec)
        if rec.get("failed") == 0:
            passing.append(name)
        print(f"check {name}: {'OK' if rec.get('failed') == 0 else 'FAIL'} " + json.dumps(
            {k: rec.get(k) for k in ("cases", "failed", "specials", "max_rel_err_ref", "max_rel_err_lib",
                                     "lib_compared", "seconds", "hang", "crashed")}), flush=True)
        for f in rec.get("fails", [])[:4]:
            print(f"   FAIL {f['case']}: {f['reason']}", flush=True)
    if out:
        (out / "check_x.json").write_text(json.dumps({"n_random": n_random, "targets": summary}, indent=1))
        (out / "pass_x.txt").write_text(",".join(passing))
    return passing


def do_sanitize(targets) -> bool:
    """Small cases only, no library op: under compute-sanitizer only the ladder's kernels run."""
    ok = True
    for name in targets:
        lv = _target(name)
        if lv.contract.startswith("grouped"):
            lay = gpu_moe_fp8.grouped_layout(lv)
            cases = [([0, 1, 0, 3, 17, 0, 40, 2], 200, 72, lay), ([5, 0, 130], 64, 256, lay)]
            res = [check.check_grouped(lv, c, n, k, layout=lay, seed=9, with_lib=False) for c, n, k, lay in cases]
        else:
            res = [check.check_fp8(lv, *s, seed=9, with_lib=False) for s in ((128, 256, 128), (100, 37, 40), (64, 512, 2048))]
        for r in res:
            print(f"sanitize-mode {name} {r.case}: {'ok' if r.ok else 'FAIL ' + r.reason}", flush=True)
            ok &= r.ok
    return ok


def do_probe(targets, only: int | None = None) -> bool:
    """In this process (no fork), each grouped edge case alone (or only case `only`), printed before
    and after its launch, so a faulting case is named (level 11's bf16 builds stopped with an
    illegal instruction inside a forked check child and passed their sanitize cases: notes/l11.md)."""
    ok = True
    for name in targets:
        lv = _target(name)
        for i, (counts, n, k, lay, case) in enumerate(check.grouped_cases(lv, 0, 0)):
            if only is not None and i != only:
                continue
            print(f"probe {name} {case}: launching", flush=True)
            r = check.check_grouped(lv, counts, n, k, layout=lay, seed=i, with_lib=False, case=case)
            print(f"probe {name} {case}: {'ok' if r.ok else 'FAIL ' + r.reason}", flush=True)
            ok &= r.ok
    return ok


def moe_plan(targets, cases: str) -> list[tuple[str, list, bool]]:
    """(case, builds, fp8) in the order the MoE bench times them. Decode cases: every bf16 build and
    every fp8 build; prefill cases: the tile-engine ("ws") builds and the first level-11 build of
    each dtype (the weight-streaming kernel at prefill, for the record). cases: decode | prefill |
    cover (bench_moe_fp8.COVER_CASES) | all (decode + prefill)."""
    names = {"decode": bench_moe_fp8.DECODE_CASES, "prefill": bench_moe_fp8.PREFILL_CASES, "cover": tuple(bench_moe_fp8.COVER_CASES)}.get(
        cases, bench_moe_fp8.DECODE_CASES + bench_moe_fp8.PREFILL_CASES)
    lv = [_target(t) for t in targets]
    plan = []
    for case in names:
        for fp8 in (False, True):
            mine = [x for x in lv if x.contract == ("grouped-fp8" if fp8 else "grouped-bf16") and x.name != "grouped_decode_wkn"]
            if "prefill" in case:
                mine = [x for x in mine if x.kind == "ws"] + [x for x in mine if x.id == 11][:1]
            if mine:
                plan.append((case, mine, fp8))
    return plan


def do_bench_moe(targets, cases: str, out: Path | None, min_reps: int) -> bool:
    timer = bench.Timer()
    ceil = bench_moe_fp8.ceilings(timer)
    rows = []
    for case, builds, fp8 in moe_plan(targets, cases):
        rows += bench_moe_fp8.grouped_case(timer, case, builds, ceil, fp8=fp8, min_reps=min_reps)
        if not fp8 and "decode" in case and "l11_wkn" in targets:
            rows += bench_moe_fp8.grouped_case(timer, case, [_target("l11_wkn")], ceil, layout="ekn", min_reps=min_reps)
        print(f"moe {case} {'fp8' if fp8 else 'bf16'}: done, pool {rows[-1].get('pool_bytes_after_case') if rows else '-'} B after", flush=True)
    res = {"meta": bench_moe_fp8.meta("grouped MoE GEMMs beside torch._grouped_mm / torch._scaled_grouped_mm"),
           "ceilings": ceil, "rows": rows}
    if out:
        (out / f"bench_moe{'' if cases == 'all' else '_' + cases}.json").write_text(json.dumps(res, indent=1))
    print(bench_moe_fp8.render(res), flush=True)
    return all(r.get("check_ok", True) for r in rows)


def do_bench_fp8(targets, shapes: str, out: Path | None, min_reps: int) -> bool:
    timer = bench.Timer()
    lv = [_target(t) for t in targets if _target(t).contract == "gemm-fp8"]
    sets = {"square-8192": ((8192, 8192, 8192),), "serving": bench.SERVING,
            "mini": ((8192, 8192, 8192), (4096, 4096, 4096), (2048, 28672, 4096), (3008, 5000, 1024),
                     (64, 4096, 4096), (16, 14336, 4096), (256, 28672, 8192))}
    # torch._scaled_mm needs N, K % 16 == 0: the ragged 3000x5000x1000 runs as 3000x5008x1008, 777x1531x263 as 777x1536x272
    pad16 = lambda s: (s[0], -(-s[1] // 16) * 16, -(-s[2] // 16) * 16)  # noqa: E731
    todo = tuple(map(pad16, sets.get(shapes) or ((8192, 8192, 8192),) + bench.SERVING))
    rows = []
    for s in todo:
        use = lv if s == (8192, 8192, 8192) else [x for x in lv if x.name != "fp8_nocluster"]
        rows += bench_moe_fp8.fp8_shape(timer, s, use, min_reps=min_reps)
    res = {"meta": {**bench_moe_fp8.meta("fp8 e4m3 dense beside torch._scaled_mm (rowwise, use_fast_accum=True)"),
                    "shape_set": shapes}, "ceilings": {}, "rows": rows}
    if out:
        (out / f"bench_fp8_{shapes}.json").write_text(json.dumps(res, indent=1))
    print(bench_moe_fp8.render(res), flush=True)
    for lvl in lv:
        r = [x["ratio_vs_lib"] for x in rows if x["level"] == lvl.id and x["name"] == lvl.name and "ratio_vs_lib" in x]
        print(f"fp8 {lvl.name}: geomean x torch._scaled_mm over {len(r)} shapes {bench_moe_fp8.geomean(r):.3f}", flush=True)
    best = {}
    for x in rows:
        if "ratio_vs_lib" in x:
            k = (x["m"], x["n"], x["k"])
            best[k] = max(best.get(k, 0), x["ratio_vs_lib"])
    print(f"fp8 best level per shape: geomean {bench_moe_fp8.geomean(best.values()):.3f} over {len(best)} shapes", flush=True)
    return all(r.get("check_ok", True) for r in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["levels", "check", "sanitize", "probe", "bench-moe", "bench-fp8"])
    ap.add_argument("--targets", default=None)
    ap.add_argument("--n-random", type=int, default=30)
    ap.add_argument("--limit-s", type=float, default=90.0)
    ap.add_argument("--cases", default="all", choices=["all", "decode", "prefill", "cover"])
    ap.add_argument("--shapes", default="all")
    ap.add_argument("--min-reps", type=int, default=50)
    ap.add_argument("--case", type=int, default=None, help="probe: only this edge case (its index)")
    ap.add_argument("--set", default=None, help="levels: a named set of targets (registry.TARGET_SETS)")
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args(argv)
    targets = [t for t in (args.targets.split(",") if args.targets else x_targets()) if t]
    if args.set:
        from .target_sets import TARGET_SETS
        targets = list(TARGET_SETS[args.set])
    if args.what == "levels":
        print(",".join(targets))
        return 0
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "check":
        passing = do_check(targets, args.n_random, args.out, args.limit_s)
        return 0 if len(passing) == len(targets) else 1
    if not gpu.gpu_available():
        print("no GPU / cupy: nothing to do", file=sys.stderr)
        return 2
    ok = {"sanitize": lambda: do_sanitize(targets), "probe": lambda: do_probe(targets, args.case),
          "bench-moe": lambda: do_bench_moe(targets, args.cases, args.out, args.min_reps),
          "bench-fp8": lambda: do_bench_fp8(targets, args.shapes, args.out, args.min_reps)}[args.what]()
    print("SUITE", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

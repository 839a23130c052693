"""The ladder's one device driver, for every contract (numpy + cupy, torch for the library ops;
argparse, no click, so it runs under the device image's python3). Run it through `bash
ladder/device.sh` (the dense stages in order, with time limits), a tools/device/call_*.sh script,
or one subcommand at a time, with the project installed (`pip install --no-index --no-deps
--no-build-isolation -e .` on the device; ladder/README.md):

  python3 -m roofline.ladder.device_suite levels [--contract C,...] [--variants] [--files] [--set NAME]
  python3 -m roofline.ladder.device_suite smoke --level N            # a few shapes of one dense level
  python3 -m roofline.ladder.device_suite check [--n-random 200]     # the dense levels in one process + the wrong kernel
  python3 -m roofline.ladder.device_suite check-isolated [--targets 7,l09_pingpong,12,l13_pingpong,...] [--limit-s 60]
  python3 -m roofline.ladder.device_suite sanitize [--targets ...]   # small cases, no library op
  python3 -m roofline.ladder.device_suite probe --targets 11 [--case I]   # grouped edge cases one by one, in process
  python3 -m roofline.ladder.device_suite bench [--shapes SET] [--tag T]  # gemm-bf16 beside cuBLAS
  python3 -m roofline.ladder.device_suite bench-fp8 [--shapes square-8192|serving|mini|all]   # beside torch._scaled_mm
  python3 -m roofline.ladder.device_suite bench-moe [--cases decode|prefill|cover|all]  # beside torch._(scaled_)grouped_mm
  python3 -m roofline.ladder.device_suite variants [--targets ...]   # each dense level's variants beside it
(every subcommand but levels and smoke takes --targets, --out DIR and --contract; --out defaults to $OUT).

Targets are registry level ids and VARIANTS names (registry.get_level). What runs for a target is
read from its Contract record (contracts.CONTRACTS): the check (check-isolated), the sanitize-mode cases
(sanitize), and for a bench subcommand (a record's `command`) its bench and report. Without
--targets a subcommand runs its contracts' levels and variants (the benches: the levels only);
LADDER_LEVELS=4,5,6 narrows the levels, LADDER_SAN_VARIANTS=a,b names the variants. check-isolated
runs every target in a FORKED child with a time limit, so that a hung or faulting build costs only
itself (the parent never touches CUDA), and writes $OUT/check_isolated.json and the passing
targets to $OUT/pass.txt. Exit status 1 if any check fails (or the wrong kernel passes).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from . import bench, bench_moe_fp8, check, gpu
from .contracts import CONTRACTS, contract_fn
from .registry import LEVELS, VARIANTS, WRONG, get_level

DENSE = ("gemm-bf16",)
GROUPED = ("grouped-bf16", "grouped-fp8")


def all_targets(contracts=tuple(CONTRACTS), variants: bool = True) -> list[str]:
    """Every registry level id of the contracts, then (variants=True) every registry variant name of them."""
    return ([str(lv.id) for lv in LEVELS if lv.contract in contracts]
            + ([k for k, v in VARIANTS.items() if v.contract in contracts] if variants else []))


def default_targets(contracts, variants: bool = True) -> list[str]:
    """The targets when --targets is not given: LADDER_LEVELS narrows the levels, LADDER_SAN_VARIANTS
    names the variants (device.sh's sanitize stage); neither set: all_targets."""
    sel = {x.strip() for x in os.environ.get("LADDER_LEVELS", "").split(",") if x.strip()}
    extra = [x for x in os.environ.get("LADDER_SAN_VARIANTS", "").split(",") if x]
    if not (sel or extra):
        return all_targets(contracts, variants)
    return [t for t in all_targets(contracts, False) if not sel or t in sel] + extra


def _n(n_random: int | None) -> dict:
    """--n-random, or (not given) the contract check's own default."""
    return {} if n_random is None else {"n_random": n_random}


def summarize_check(name: str, lv, res, seconds: float) -> dict:
    """One target's check results (check.CheckResult, any contract) as one record."""
    fails = [r for r in res if not r.ok]
    rels = [r.rel_err_ref for r in res if r.ok]
    libs = [r.rel_err_lib for r in res if r.ok and r.rel_err_lib is not None]
    return {"target": name, "level": lv.id, "name": lv.name, "contract": lv.contract, "cases": len(res),
            "failed": len(fails), "specials": sum(r.specials for r in res), "max_rel_err_ref": max(rels, default=None),
            "max_rel_err_lib": max(libs, default=None), "lib_compared": len(libs), "seconds": seconds,
            "fails": [r.to_dict() for r in fails[:10]]}


def print_check(rec: dict) -> bool:
    ok = rec.get("failed") == 0
    desc = (f"{rec['cases'] - rec['failed']}/{rec['cases']} pass ({rec['specials']} NaN/Inf), max rel err vs f64 "
            f"{rec['max_rel_err_ref']:.3g}, vs library {rec['max_rel_err_lib'] or float('nan'):.3g} "
            f"({rec['lib_compared']} compared), {rec['seconds']:.1f} s"
            if rec.get("max_rel_err_ref") is not None else json.dumps({k: v for k, v in rec.items() if k != "fails"})[:300])
    print(f"check {rec['target']}: {'OK' if ok else 'FAIL'} {desc}", flush=True)
    for f in rec.get("fails", [])[:5]:
        print(f"   FAIL {f['case']}: {f['reason']}", flush=True)
    return ok


def do_smoke(level_id: int) -> bool:
    lv = get_level(level_id)
    if lv.contract not in DENSE:
        raise SystemExit(f"smoke runs the dense levels; level {lv.id} solves {lv.contract}: use check-isolated")
    ok = True
    shapes = [(128, 128, 64), (300, 200, 72), (1000, 1000, 1000), (129, 257, 33), (100, 37, 40)]
    if lv.kind in ("persistent", "ws"):
        shapes += [(1500, 2900, 77), (4096, 4096, 320), (64, 4096, 4096)]
    for s in (s for s in shapes if lv.supports(*s)):
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
    if m == n:   # does out match ref transposed? a cheap probe
        print("  rel err vs ref.T:", float(cp.linalg.norm(out - ref.T) / cp.linalg.norm(ref)))


def do_check(targets, n_random: int, out_dir: Path | None) -> bool:
    """The dense levels in this process (a first single-tile case, diagnosed if it fails, then the
    contract's check), and the deliberately wrong kernel, which must fail on shapes with more than
    one K tile."""
    ok_all, summary, allres = True, {}, []
    for lv in (lv for lv in map(get_level, targets) if lv.contract in DENSE):
        t0 = time.time()
        first = check.check_shape(lv, 128 if lv.max_m else 256, 128 if lv.max_n else 256, 64, seed=1)
        if not first.ok:
            print(f"L{lv.id}: first check FAILED: {first.reason}")
            _diagnose(lv, 128, 128, 64)
        res = contract_fn(lv.contract, "check")(lv, seed=0, **_n(n_random))
        allres += [r.to_dict() for r in res]
        summary[lv.id] = summarize_check(str(lv.id), lv, res, time.time() - t0)
        ok_all &= print_check(summary[lv.id])
    wres = [check.check_shape(WRONG["l03_skip_last_k"], *s, seed=3)
            for s in ((128, 128, 128), (200, 300, 65), (64, 4096, 4096), (16, 16, 129))]
    caught = all(not r.ok for r in wres)
    print(f"wrong kernel (skip last K tile) caught on {sum(not r.ok for r in wres)}/{len(wres)} shapes: "
          + "; ".join(f"{r.case}: {r.reason or 'PASSED (bad)'}" for r in wres))
    if out_dir:
        (out_dir / "check.json").write_text(json.dumps(
            {"summary": summary, "wrong_kernel_caught": caught, "wrong": [r.to_dict() for r in wres], "results": allres}, indent=1))
    return ok_all and caught


def _check_child(name: str, n_random: int, q) -> None:
    lv = get_level(name)
    t0 = time.time()
    res = contract_fn(lv.contract, "check")(lv, seed=0, **_n(n_random))   # the contract's check of one build
    q.put(summarize_check(name, lv, res, time.time() - t0))


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
        if print_check(rec):
            passing.append(name)
    if out:
        (out / "check_isolated.json").write_text(json.dumps({"n_random": n_random, "targets": summary}, indent=1))
        (out / "pass.txt").write_text(",".join(passing))
    return passing


def do_sanitize(targets) -> bool:
    """Each target's sanitize-mode cases (its contract's record names them): under compute-sanitizer
    only the ladder's kernels run."""
    ok = True
    for name in targets:
        lv = get_level(name)
        for r in contract_fn(lv.contract, "sanitize")(lv):
            print(f"sanitize-mode {name} {lv.name} {r.case}: {'ok' if r.ok else 'FAIL ' + r.reason}", flush=True)
            ok &= r.ok
    return ok


def do_probe(targets, only: int | None = None) -> bool:
    """In this process (no fork), each grouped edge case alone (or only case `only`), printed before
    and after its launch, so a faulting case is named (level 11's bf16 builds stopped with an
    illegal instruction inside a forked check child and passed their sanitize cases: notes/l11.md)."""
    ok = True
    for name in targets:
        lv = get_level(name)
        for i, (counts, n, k, lay, case) in enumerate(check.grouped_cases(lv, 0, 0)):
            if only is not None and i != only:
                continue
            print(f"probe {name} {case}: launching", flush=True)
            r = check.check_grouped(lv, counts, n, k, layout=lay, seed=i, with_lib=False, case=case)
            print(f"probe {name} {case}: {'ok' if r.ok else 'FAIL ' + r.reason}", flush=True)
            ok &= r.ok
    return ok


def do_bench(command: str, targets, what: str, tag: str, out: Path | None, min_reps: int) -> bool:
    """A bench subcommand: the records whose `command` it is name the bench and its report."""
    mine = [c for c in CONTRACTS.values() if c.command == command]
    levels = [lv for lv in map(get_level, targets) if lv.contract in {c.name for c in mine}]
    res = contract_fn(mine[0].name, "bench")(levels, what, min_reps, log=lambda s: print(s, flush=True))
    if res["meta"].get("cluster_residency"):
        print("cluster residency:", json.dumps(res["meta"]["cluster_residency"]), flush=True)
    if out:
        (out / f"bench_{tag}.json").write_text(json.dumps(res, indent=1))
    print(contract_fn(mine[0].name, "report")(res), flush=True)
    return all(r.get("check_ok", True) for r in res["rows"])


def do_variants(targets, out: Path | None, min_reps: int) -> bool:
    """Each dense level with variants among the targets, timed beside them (same process, the
    shape set `variants`)."""
    chosen = set(targets)
    allres, ok = [], True
    for lv in (lv for lv in LEVELS if lv.contract in DENSE and str(lv.id) in chosen):
        names = [k for k, v in VARIANTS.items() if v.id == lv.id and k in chosen]
        if not names:
            continue
        res = bench.run_bench(levels=(lv, *(VARIANTS[n] for n in names)), shapes=bench.SHAPE_SETS["variants"],
                              min_reps=min_reps).to_dict()
        res["meta"]["cluster_residency"] = bench.cluster_residency()
        allres.append(res)
        print(bench.render_table(res), flush=True)
        ok &= all(r.get("check_ok", True) for r in res["rows"])
    if out:
        (out / "variants.json").write_text(json.dumps(allres, indent=1))
    return ok


# subcommand -> (its contracts, variants among its default targets)
SUBCOMMANDS = {"levels": (tuple(CONTRACTS), False), "smoke": (DENSE, False), "check": (DENSE, False),
               "check-isolated": (tuple(CONTRACTS), True), "sanitize": (tuple(CONTRACTS), False),
               "probe": (GROUPED, True), "variants": (DENSE, True),
               **{c.command: (tuple(x.name for x in CONTRACTS.values() if x.command == c.command), False)
                  for c in CONTRACTS.values()}}


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--targets", default=None, help="level ids and variant names (default: the subcommand's)")
    common.add_argument("--contract", default=None, help="comma-separated contract names: narrows the default targets")
    common.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    common.add_argument("--min-reps", type=int, default=50)
    common.add_argument("--n-random", type=int, default=None, help="random cases per build (default: the contract check's)")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    for name in SUBCOMMANDS:
        sp = sub.add_parser(name, parents=[common])
        if name == "levels":
            sp.add_argument("--variants", action="store_true", help="the variants too")
            sp.add_argument("--files", action="store_true", help="the kernel files instead")
            sp.add_argument("--set", default=None, help="a named set of targets (target_sets.TARGET_SETS)")
        sp.add_argument("--level", type=int, default=None) if name == "smoke" else None
        sp.add_argument("--limit-s", type=float, default=60.0) if name == "check-isolated" else None
        sp.add_argument("--case", type=int, default=None, help="only this edge case (its index)") if name == "probe" else None
        sp.add_argument("--tag", default=None, help="writes bench_<tag>.json") if name in ("bench", "bench-fp8", "bench-moe") else None
        if name in ("bench", "bench-fp8"):
            sets = bench.SHAPE_SETS if name == "bench" else bench_moe_fp8.FP8_SHAPE_SETS
            sp.add_argument("--shapes", default="default" if name == "bench" else "all", choices=sorted(sets))
        if name == "bench-moe":
            sp.add_argument("--cases", default="all", choices=sorted(bench_moe_fp8.CASE_SETS))
    return ap


def _targets(args) -> list[str]:
    contracts, variants = SUBCOMMANDS[args.what]
    if args.contract:
        unknown = set(args.contract.split(",")) - set(CONTRACTS)
        if unknown:
            raise SystemExit(f"unknown contract(s) {sorted(unknown)}; known: {sorted(CONTRACTS)}")
        contracts = tuple(c for c in contracts if c in args.contract.split(","))
    if args.targets:
        return [t for t in args.targets.split(",") if t]
    return default_targets(contracts, variants or getattr(args, "variants", False))


def do_levels(args) -> None:
    if args.set:
        from .target_sets import TARGET_SETS
        print(",".join(TARGET_SETS[args.set]))
    elif args.files:
        print(" ".join(dict.fromkeys(get_level(t).file for t in _targets(args) if t.isdigit())))
    else:
        print(",".join(_targets(args)))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.what == "levels":
        do_levels(args)
        return 0
    targets = _targets(args)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "check-isolated":   # the parent never touches CUDA
        return 0 if len(do_check_isolated(targets, args.n_random, args.out, args.limit_s)) == len(targets) else 1
    if not gpu.gpu_available():
        print("no GPU / cupy: nothing to do", file=sys.stderr)
        return 2
    print(f"device: {gpu.device_name()}")
    if args.what in ("bench", "bench-fp8", "bench-moe"):
        what = args.cases if args.what == "bench-moe" else args.shapes
        default_tag = {"bench": what, "bench-fp8": f"fp8_{what}", "bench-moe": "moe" + ("" if what == "all" else f"_{what}")}
        ok = do_bench(args.what, targets, what, args.tag or default_tag[args.what], args.out, args.min_reps)
    else:
        ok = {"smoke": lambda: do_smoke(args.level), "check": lambda: do_check(targets, args.n_random, args.out),
              "sanitize": lambda: do_sanitize(targets), "probe": lambda: do_probe(targets, args.case),
              "variants": lambda: do_variants(targets, args.out, args.min_reps)}[args.what]()
    print("SUITE", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

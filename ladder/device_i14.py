"""Issue 14's device call, driven from one process (numpy, cupy, torch; no install):

  python3 -m roofline.ladder.device_i14 check  [--n-random 200] [--targets 7,8,9,10,l09_pingpong,...]
  python3 -m roofline.ladder.device_i14 bench  [--targets ...] [--set issue14|issue6]
  python3 -m roofline.ladder.device_i14 variants

check: every target (a level id or a registry VARIANTS key) in a FORKED child with a time limit,
so a hung or faulting build costs only itself; the parent never touches CUDA. Prints one line
per target and writes $OUT/check_i14.json; the passing targets go to $OUT/pass.txt.
bench: `bench.run_bench` over the passing levels (cuBLAS in the same process, every row checked
first, L2 flushed, >= 50 timed launches), writes $OUT/bench_<set>.json and prints a summary: per
level the geomean % of cuBLAS over the issue's prefill and decode gate sets, 8192^3 with its
p20-p80 spread, and the decode rows as achieved bandwidth (fewest bytes / median time) against
the HBM copy ceiling measured in the same run.
variants: level 9's and level 10's alternatives beside them on a subset, same process.
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

from . import bench
from .registry import LEVELS, VARIANTS, get_level

NEW = ("7", "8", "9", "10", "l09_coop_cluster", "l09_pingpong_nocluster", "l09_pingpong_wide_nocluster",
       "l09_coop_regstore", "l07_regstore", "l10_m128", "l10_nosplit", "l10_n256")


def _target(name: str):
    return get_level(int(name)) if name.isdigit() else VARIANTS[name]


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


def do_check(targets, n_random: int, out: Path | None, limit_s: float) -> list[str]:
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
        (out / "check_i14.json").write_text(json.dumps({"n_random": n_random, "targets": summary}, indent=1))
        (out / "pass.txt").write_text(",".join(passing))
    return passing


def _gm(vals):
    vals = [v for v in vals if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def summarize(res: dict) -> str:
    rows = [r for r in res["rows"] if "t_ms_median" in r]
    hbm = res["ceilings"]["hbm_copy"]["bytes_s"]
    pre = set(bench.ISSUE14_PREFILL)
    dec = set(bench.ISSUE14_DECODE)
    lines = []
    names = sorted({(r["level"], r["name"]) for r in rows if r["level"]})
    lines.append("| level | geomean % cuBLAS prefill (12) | geomean % cuBLAS decode (16) | 8192^3 ms (p20-p80) | % cuBLAS 8192^3 |")
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
    for s in bench.ISSUE14_DECODE:
        c = cub.get(s)
        cand = [r for r in rows if r["level"] and (r["m"], r["n"], r["k"]) == s]
        if not c or not cand:
            continue
        best = min(cand, key=lambda r: r["t_ms_median"])
        by = bench.gemm_min_bytes(*s)
        lines.append(f"| {s[0]}x{s[1]}x{s[2]} | {c['t_ms_median'] * 1e3:.1f}, {by / c['t_ms_median'] / 1e9:.2f} | "
                     f"L{best['level']} {best['name']}: {best['t_ms_median'] * 1e3:.1f}, {by / best['t_ms_median'] / 1e9:.2f}, "
                     f"{100 * by / best['t_ms_median'] / 1e-3 / hbm:.0f}, {best.get('pct_cublas', 0):.0f} |")
    lines.append(f"HBM copy ceiling {hbm / 1e12:.2f} TB/s")
    return "\n".join(lines)


def _residency() -> dict:
    from . import gpu
    r = {f"{k[0]} {' '.join(k[1])}".strip(): {"max_active_clusters": v[0], "how": v[1]}
         for k, v in gpu.CLUSTER_RESIDENCY.items()}
    if r:
        print("cluster residency:", json.dumps(r), flush=True)
    return r


def do_bench(targets, out: Path | None, shape_set: str, tag: str) -> None:
    lvls = tuple(_target(t) for t in targets)
    res = bench.run_bench(levels=lvls, shapes=bench.SHAPE_SETS[shape_set], min_reps=50).to_dict()
    res["meta"]["shape_set"] = shape_set
    res["meta"]["cluster_residency"] = _residency()
    if out:
        (out / f"bench_{tag}.json").write_text(json.dumps(res, indent=1))
    print(bench.render_table(res), flush=True)
    print(summarize(res), flush=True)


def do_variants(passing, out: Path | None) -> None:
    groups = (
        (("9", "l09_coop_cluster", "l09_pingpong_nocluster", "l09_pingpong_wide_nocluster", "l09_coop_regstore",
          "8", "7", "l07_regstore"),
         ((8192, 8192, 8192), (4096, 28672, 4096), (2048, 4096, 4096), (8192, 4096, 14336), (3000, 5000, 1000))),
        (("10", "l10_m128", "l10_nosplit", "l10_n256", "6"),
         ((16, 4096, 4096), (64, 4096, 4096), (64, 14336, 4096), (128, 4096, 14336), (256, 28672, 8192),
          (256, 4096, 4096))),
    )
    allres = []
    for names, shapes in groups:
        lv = tuple(_target(t) for t in names if t in passing)
        if not lv:
            continue
        res = bench.run_bench(levels=lv, shapes=shapes, min_reps=50).to_dict()
        res["meta"]["cluster_residency"] = _residency()
        allres.append(res)
        print(bench.render_table(res), flush=True)
    if out:
        (out / "variants_i14.json").write_text(json.dumps(allres, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check", "bench", "variants"])
    ap.add_argument("--n-random", type=int, default=200)
    ap.add_argument("--targets", default=",".join(NEW))
    ap.add_argument("--set", default="issue14", choices=sorted(bench.SHAPE_SETS))
    ap.add_argument("--tag", default="i14")
    ap.add_argument("--limit-s", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    a = ap.parse_args(argv)
    targets = [t for t in a.targets.split(",") if t]
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    if a.what == "check":
        passing = do_check(targets, a.n_random, a.out, a.limit_s)
        return 0 if len(passing) == len(targets) else 1
    if a.what == "bench":
        do_bench(targets, a.out, a.set, a.tag)
    if a.what == "variants":
        do_variants(set(targets), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

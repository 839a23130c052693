"""Round 6 device checks and benches that the project's drivers do not cover (notes/l13.md, notes/l15.md),
run by tools/device/call_round6.sh with the project installed:

  python3 tools/device/round6_extra.py check-sk  --targets l13_sk,l13_sk_wepi --out DIR
      fp8 dense shapes where the stream-K tail runs beside whole data-parallel waves (the plan printed per
      shape): 66 clusters of 2 CTAs, 72 or 272 cluster tiles (tails of 6 and 8 tiles spread over 12 clusters),
      M / N tails, NaN / Inf; check.check_fp8 (float64 of the dequantised inputs, poisoned output, torch).
  python3 tools/device/round6_extra.py check-e512 --targets 15,l15_pp_m128,... --out DIR
      grouped builds on 512 experts (the plan's new bound): Qwen3-Next-like routings (top-10 of 512),
      experts with 0 rows at both ends; check.check_grouped beside torch.
  python3 tools/device/round6_extra.py bench-prefill --targets l15_pp_m128,... --out DIR
      the six E 128 prefill cases of bench_moe_fp8 (fp8) as `device_moe_fp8 bench-moe --cases prefill` times them,
      but bench_moe_prefill.json is rewritten after every case (a time limit keeps the cases done).
  python3 tools/device/round6_extra.py bench-e512 --targets l15_pp_m128,... --out DIR
      Qwen3-Next (E 512, top-10, hidden 2048, inter 512) fp8 prefill at 4096 tokens, down and gate_up,
      beside torch._scaled_grouped_mm (bench_moe_fp8.grouped_case: L2 flushed, medians of >= 50 launches).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the checkout (also when not pip-installed)
from roofline.ladder import bench, bench_moe_fp8, check, gpu, gpu_moe_fp8  # noqa: E402
from roofline.ladder.registry import VARIANTS, get_level  # noqa: E402
from roofline.ladder.routing import topk_counts  # noqa: E402

SK_SHAPES = ((2304, 2048, 2048), (2200, 2000, 2048), (4352, 4096, 1536), (64, 1024, 8192))
# Qwen3-Next's fp8 prefill at 4096 tokens: the down projection is the coverage bench's case; gate_up is added here
E512_CASES = {"qwen3next-prefill4096-down": (512, 4096, 10, 2048, 512),
              "qwen3next-prefill4096-gate_up": (512, 4096, 10, 1024, 2048)}


def _lv(name: str):
    return get_level(int(name)) if name.isdigit() else VARIANTS[name]


def check_sk(targets, out: Path | None) -> bool:
    rows, ok = [], True
    for name in targets:
        lv = _lv(name)
        for i, (m, n, k) in enumerate(SK_SHAPES):
            bm, bn, _ = lv.tile_mnk
            tiles_mc = -(-(-(-m // bm)) // lv.cluster)
            plan = gpu.streamk_plan(lv, tiles_mc * bm, n, k, gpu.sm_count() // lv.cluster)
            r = check.check_fp8(lv, m, n, k, seed=11 + i, specials=(i == 1))
            ok &= r.ok
            rows.append({**r.to_dict(), "streamk_plan_s_dp": plan})
            print(f"check-sk {name} {m}x{n}x{k} plan (tail clusters, dp tiles) {plan}: "
                  f"{'ok' if r.ok else 'FAIL ' + r.reason} rel {r.rel_err_ref:.2e} lib {r.rel_err_lib}", flush=True)
    if out:
        (out / "check_sk.json").write_text(json.dumps(rows, indent=1))
    return ok


def check_e512(targets, out: Path | None) -> bool:
    routings = [("topk2048-512-10", topk_counts(2048, 512, 10, seed=4)),
                ("topk256-512-10-ends-empty", [0] * 3 + topk_counts(256, 506, 10, seed=5) + [0] * 3)]
    rows, ok = [], True
    for name in targets:
        lv = _lv(name)
        lay = gpu_moe_fp8.grouped_layout(lv)
        for j, (rname, counts) in enumerate(routings):
            for N, K in ((512, 1024), (200, 136)):
                r = check.check_grouped(lv, counts, N, K, layout=lay, seed=21 + j, specials=(N == 200), case=f"E512 {rname} N{N} K{K}")
                ok &= r.ok
                rows.append(r.to_dict())
                print(f"check-e512 {name} {r.case}: {'ok' if r.ok else 'FAIL ' + r.reason} rel {r.rel_err_ref:.2e} lib {r.rel_err_lib}", flush=True)
    if out:
        (out / "check_e512.json").write_text(json.dumps(rows, indent=1))
    return ok


def bench_e512(targets, out: Path | None, min_reps: int) -> bool:
    bench_moe_fp8.MOE_CASES.update(E512_CASES)
    timer = bench.Timer()
    ceil = bench_moe_fp8.ceilings(timer)
    rows = []
    for case in E512_CASES:
        rows += bench_moe_fp8.grouped_case(timer, case, [_lv(t) for t in targets], ceil, fp8=True, min_reps=min_reps)
    res = {"meta": bench_moe_fp8.meta("Qwen3-Next fp8 prefill (E 512) beside torch._scaled_grouped_mm"), "ceilings": ceil, "rows": rows}
    if out:
        (out / "bench_moe_e512.json").write_text(json.dumps(res, indent=1))
    print(bench_moe_fp8.render(res), flush=True)
    return all(r.get("check_ok", True) for r in rows)


def bench_prefill(targets, out: Path | None, min_reps: int) -> bool:
    timer = bench.Timer()
    ceil = bench_moe_fp8.ceilings(timer)
    rows = []
    for case in bench_moe_fp8.PREFILL_CASES:
        rows += bench_moe_fp8.grouped_case(timer, case, [_lv(t) for t in targets], ceil, fp8=True, min_reps=min_reps)
        res = {"meta": bench_moe_fp8.meta("grouped fp8 prefill beside torch._scaled_grouped_mm"), "ceilings": ceil, "rows": rows}
        if out:
            (out / "bench_moe_prefill.json").write_text(json.dumps(res, indent=1))
        print(f"prefill {case}: done", flush=True)
    print(bench_moe_fp8.render(res), flush=True)
    return all(r.get("check_ok", True) for r in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check-sk", "check-e512", "bench-e512", "bench-prefill"])
    ap.add_argument("--targets", required=True)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--min-reps", type=int, default=50)
    a = ap.parse_args(argv)
    t = [x for x in a.targets.split(",") if x]
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    ok = {"check-sk": lambda: check_sk(t, a.out), "check-e512": lambda: check_e512(t, a.out),
          "bench-e512": lambda: bench_e512(t, a.out, a.min_reps), "bench-prefill": lambda: bench_prefill(t, a.out, a.min_reps)}[a.what]()
    print("ROUND6", a.what, "OK" if ok else "FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""`roofline analyze` on a 50-entry Top-N, cold start included (a fresh process each run).

Target: under 1 s wall on the 2-core CI machine. Prints median and spread of N runs.
The Top-N is built from the bundled worked example's shapes, repeated over every op class so that
every model runs: 50 entries, all in the head (threshold 0, cap 50).

    python benchmarks/bench_analyze.py [--runs 7]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "roofline" / "data" / "example"


def make_topn(n: int) -> dict:
    kinds = [
        ("fused_moe_kernel_{i}", "moe", {"M": 64, "E": 256, "top_k": 8, "hidden": 2048, "inter": 512}, 0.049),
        ("kernel_paged_attention_2d_{i}", "attn", {"batch": 64, "n_q_heads": 16, "n_kv_heads": 2, "head_dim": 256}, 0.14),
        ("nvjet_tst_128x256_{i}", "gemm", {"M": 64, "N": 4096, "K": 2048}, 0.02),
        ("rms_norm_kernel_{i}", "norm", {"elems_in": 64 * 2048}, 0.006),
        ("act_and_mul_quant_{i}", "quant", {"elems_in": 64 * 1024, "elems_out": 64 * 512}, 0.008),
    ]
    entries = []
    for i in range(n):
        name, cls, shape, lat = kinds[i % len(kinds)]
        entries.append({"name": name.format(i=i), "pct_gpu_time": round(100.0 / n, 3), "classification": cls,
                        "regimes": {"decode": {"base_latency_ms": lat, "launches_per_step": 40}},
                        "shapes": [shape]})
    return {"schema_version": 1, "round": 1, "serving": {"n_decode_steps": 2033, "n_prefill_steps": 24},
            "entries": entries}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--entries", type=int, default=50)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="roofline-bench-"))
    try:
        shutil.copy(EXAMPLE / "env_report.json", d)
        shutil.copy(EXAMPLE / "config.json", d)
        topn = d / "profile_topN.json"
        topn.write_text(json.dumps(make_topn(args.entries)))
        exe = shutil.which("roofline")
        cmd = ([exe] if exe else [sys.executable, "-m", "roofline.cli"]) + [
            "analyze", str(topn), "--head-threshold", "0", "--head-cap", str(args.entries), "--format", "json"]
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if res.returncode != 0:
                sys.exit(f"analyze failed: {res.stderr.strip()}")
        art = json.loads(res.stdout)
        modeled = sum(1 for e in art["entries"] if e["modeled"])
        times.sort()
        print(f"entries analysed: {len(art['entries'])} ({modeled} modeled, {len(art['degraded'])} degraded)")
        print(f"wall per run, cold start (s): median {statistics.median(times):.3f}  "
              f"min {times[0]:.3f}  max {times[-1]:.3f}  over {args.runs} runs")
        print(f"target < 1 s: {'met' if statistics.median(times) < 1.0 else 'NOT met'}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

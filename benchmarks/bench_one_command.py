#!/usr/bin/env python3
"""Start-up cost of one command from a trace to a verdict, beside the peer.

Each run is a fresh process (cold: interpreter start, imports, parse, analysis, files written),
timed by wall clock, on real H200 traces of fixtures/:
  * one:   `roofline analyze TRACE --out DIR -q` (the Top-N built in the same process);
  * two:   `roofline topn TRACE -o DIR/profile_topN.json -q` then `roofline analyze DIR -q` (two
           interpreter starts: the way it was done before);
  * hta:   HolisticTraceAnalysis (the `bench` extra): TraceAnalysis(trace_dir) +
           get_gpu_kernel_breakdown(), the peer's kernel table of the same trace (it writes nothing
           and gives no verdict, so it does less work than ours);
  * tracelens: AMD TraceLens (the `peer` extra: installed from its git repository) is timed when it
           imports, else reported as not installed.
Medians over --runs runs (after one untimed run that fills the bytecode cache).

    python3 benchmarks/bench_one_command.py [--runs 7] [--only one,two,hta,tracelens]

Results: benchmarks/bench_one_command_results.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TRACES = ("fixtures/traces/mixed.json.gz", "fixtures/traces_real/decode_b64_cat.json.gz",
          "fixtures/traces_real/prefill_llama.json.gz", "fixtures/corpus/qwen3moe_grouped_mm.json.gz")

HTA = ("import logging, sys; logging.disable(logging.WARNING)\n"
       "from hta.trace_analysis import TraceAnalysis\n"
       "ta = TraceAnalysis(trace_dir=sys.argv[1]); ta.get_gpu_kernel_breakdown(visualize=False)\n")
TRACELENS = ("import sys\nfrom TraceLens import TreePerfAnalyzer\n"
             "a = TreePerfAnalyzer.from_file(sys.argv[1]); a.get_df_kernel_launchers()\n")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def commands(kind: str, trace: str, work: str) -> list[list[str]] | None:
    py = sys.executable
    cli = [py, "-m", "roofline.cli"]
    if kind == "one":
        return [cli + ["analyze", trace, "--out", os.path.join(work, "one"), "-q"]]
    if kind == "two":
        d = os.path.join(work, "two")
        return [cli + ["topn", trace, "-o", os.path.join(d, "profile_topN.json"), "-q"], cli + ["analyze", d, "-q"]]
    if kind in ("hta", "tracelens"):
        mod = "hta" if kind == "hta" else "TraceLens.TreePerf"
        if subprocess.run([py, "-c", f"import {mod}"], capture_output=True).returncode != 0:
            return None
        d = os.path.join(work, kind)
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, os.path.basename(trace))
        if not os.path.exists(dst):
            shutil.copy(trace, dst)          # HTA reads every trace of a folder: one trace per folder
        return [[py, "-c", HTA if kind == "hta" else TRACELENS, d if kind == "hta" else dst]]
    raise ValueError(kind)


def time_cold(cmds: list[list[str]], runs: int) -> tuple[list[float], list[float]]:
    """(wall s, CPU s of the processes: user + system) per run, sorted. On a shared machine the CPU
    time is the steadier figure: the wall time also holds the wait for a core."""
    import resource

    env = _env()
    for c in cmds:                                      # untimed: the bytecode cache
        subprocess.run(c, capture_output=True, env=env, check=True, cwd=REPO)
    wall, cpu = [], []
    for _ in range(runs):
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        for c in cmds:
            subprocess.run(c, capture_output=True, env=env, check=True, cwd=REPO)
        wall.append(time.perf_counter() - t0)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
    return sorted(wall), sorted(cpu)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", default="one,two,hta,tracelens")
    a = ap.parse_args(argv)
    kinds = a.only.split(",")
    work = tempfile.mkdtemp(prefix="bench_one_command_")
    print(f"cold start to finish, seconds: wall median / CPU median (user + system) of {a.runs} fresh processes")
    print(f"{'trace':34s} {'MB':>5s} " + " ".join(f"{k:>19s}" for k in kinds))
    missing = set()
    try:
        for rel in TRACES:
            trace = os.path.join(REPO, rel)
            cells = []
            for k in kinds:
                cmds = commands(k, trace, work)
                if cmds is None:
                    missing.add(k)
                    cells.append(f"{'not installed':>19s}")
                    continue
                wall, cpu = time_cold(cmds, a.runs)
                cells.append(f"{statistics.median(wall):9.3f} / {statistics.median(cpu):.3f}")
            mb = os.path.getsize(trace) / 1e6
            print(f"{os.path.basename(rel):34s} {mb:5.1f} " + " ".join(cells))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for k in sorted(missing):
        print(f"{k}: not installed here (pip install -e '.[{'bench' if k == 'hta' else 'peer'}]')")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

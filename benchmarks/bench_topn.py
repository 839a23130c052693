#!/usr/bin/env python3
"""Speed and peak memory of building a Top-N from a large PyTorch trace, side by side.

1. Generates a ~500 MB uncompressed trace (into /tmp, never the repo) by replicating a real fixture
   trace (fixtures/traces/decode.json.gz, made on the H200): each copy's events are shifted in time
   and given fresh External ids / correlation ids, so links stay one-to-one as in a long run.
2. Runs, each in its own subprocess (peak RSS = that process's ru_maxrss):
   * ours:    roofline.ingest (streaming ijson parse + links + shapes + Top-N);
   * hta:     HolisticTraceAnalysis TraceAnalysis(trace_dir=...) + get_gpu_kernel_breakdown();
   * json:    json.load of the whole file and a loop summing kernel durations per name.
3. Prints MB/s and peak memory per approach, and checks ours against the json loop's totals.

    python benchmarks/bench_topn.py [--mb 500] [--src fixtures/traces/decode.json.gz]
                                    [--only ours,ours1,hta,json] [--hta-python PATH] [--keep]
    python benchmarks/bench_topn.py --cli [--runs 7]

--cli times the `roofline topn` command itself on the real fixture inputs (two H200 traces and an
Nsight Compute report), cold (a fresh process per run) and warm (again in one process), each the
median of at least 7 runs; results in benchmarks/bench_topn_results.md.
(--only also knows ours1: our parser in one process, and ours_ijson: our general ijson path.)
HTA is the `bench` extra (pip install HolisticTraceAnalysis); --hta-python runs it under another
interpreter (e.g. a venv that has it).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


_NUM_RX = re.compile(rb'"(ts|External id|correlation|id)": (-?\d+(?:\.\d+)?)')


def generate(src: str, dst: str, target_mb: float) -> tuple[int, int]:
    """Write a trace of about target_mb MB made of textual copies of src's events.

    The events' text is kept byte for byte as torch.profiler wrote it (Kineto's layout), except
    that each copy shifts "ts" by the trace's span and offsets "External id", "correlation" and
    the ac2g flow "id", so that every copy links one-to-one like a longer run. Returns (bytes, copies).
    """
    raw = gzip.open(src, "rb").read() if src.endswith(".gz") else open(src, "rb").read()
    k = raw.index(b'"traceEvents"')
    lb = raw.index(b"[", k)
    end = raw.rindex(b"]")
    head, body, tail = raw[:lb + 1], raw[lb + 1:end], raw[end:]
    items = [b"{" + x.rstrip(b" \t\r\n,") for x in body.split(b"\n  {")[1:]]
    once, rep = [], []
    max_ext = max_corr = 0
    ts_lo, ts_hi = float("inf"), float("-inf")
    for it in items:
        meta = b'"ph": "M"' in it or b'"cat": "Trace"' in it
        parts, pos = [], 0
        for m in _NUM_RX.finditer(it):
            key, val = m.group(1), m.group(2)
            parts.append(it[pos:m.start(2)])
            if key == b"ts":
                v = float(val)
                ts_lo, ts_hi = min(ts_lo, v), max(ts_hi, v)
                parts.append(("ts", v, len(val.split(b".")[1]) if b"." in val else 0))
            elif key == b"External id":
                max_ext = max(max_ext, int(val))
                parts.append(("ext", int(val), 0))
            elif key == b"correlation" or (key == b"id" and b'"ac2g"' in it):
                max_corr = max(max_corr, int(val))
                parts.append(("corr", int(val), 0))
            else:
                parts.append(val)
            pos = m.end(2)
        parts.append(it[pos:])
        (once if meta else rep).append(parts)
    span = ts_hi - ts_lo + 1000.0
    one = sum(len(x) for x in items)
    copies = max(1, int(target_mb * 1e6 / one))
    with open(dst, "wb") as out:
        out.write(head)
        first = True
        for c in range(copies):
            dt, dx, dc = c * span, c * (max_ext + 1), c * (max_corr + 1)
            for parts in (once + rep if c == 0 else rep):
                buf = []
                for x in parts:
                    if type(x) is tuple:
                        kind, v, nd = x
                        if kind == "ts":
                            buf.append(b"%.*f" % (nd, v + dt))
                        else:
                            buf.append(b"%d" % (v + (dx if kind == "ext" else dc)))
                    else:
                        buf.append(x)
                out.write((b"\n  " if first else b",\n  ") + b"".join(buf))
                first = False
        out.write(b"\n  " + tail)
    return os.path.getsize(dst), copies


# --- the three approaches; each runs as `python bench_topn.py --child KIND PATH` and prints one JSON line

def child_ours(path: str, **kw) -> dict:
    sys.path.insert(0, REPO)
    from roofline.ingest.topn import StepPlan, aggregate_trace, build_topn
    from roofline.ingest.torch_trace import parse_trace
    import ijson
    pt = parse_trace(path, range_regex=["decode", "prefill"], **kw)
    aggs, steps, notes = aggregate_trace(pt, StepPlan())
    doc = build_topn(aggs, steps, notes, sigs=pt.sigs, top=1000)
    n_shapes = sum(1 for e in doc["entries"] if e.get("shapes"))
    return {"kernels": pt.n_kernels, "names": len(aggs), "total_us": sum(a.all_us for a in aggs),
            "entries_with_shapes": n_shapes, "ijson_backend": ijson.backend,
            "per_name_us": {a.name: a.all_us for a in aggs}}


def child_json(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    tot: dict[str, float] = {}
    n = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            tot[e["name"]] = tot.get(e["name"], 0.0) + e["dur"]
            n += 1
    return {"kernels": n, "names": len(tot), "total_us": sum(tot.values()), "per_name_us": tot}


def child_hta(path: str) -> dict:
    import logging
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    d = os.path.dirname(path)
    ta = TraceAnalysis(trace_dir=d)
    kt, kd = ta.get_gpu_kernel_breakdown(visualize=False)
    return {"kernels": int(kd["count"].sum()) if "count" in kd else None, "names": int(len(kd)),
            "total_us": float(kd["sum"].sum()) if "sum" in kd else None, "columns": [str(c) for c in kd.columns]}


def _child(kind: str, path: str) -> None:
    import resource
    t0 = time.perf_counter()
    r = {"ours": child_ours, "json": child_json, "hta": child_hta,
         "ours1": lambda p: child_ours(p, workers=1),                  # one process
         "ours_ijson": lambda p: child_ours(p, engine="ijson"),        # the general ijson fallback
         }[kind](path)
    r["wall_s"] = time.perf_counter() - t0
    # Linux: KiB. Worker processes (our 2-process parse) are added: parent peak + largest child peak.
    r["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    r["peak_rss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    r["peak_rss_mb"] += r["peak_rss_children_mb"]
    print("RESULT " + json.dumps(r))


def run_child(kind: str, path: str, python: str) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([python, os.path.abspath(__file__), "--child", kind, path],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["process_wall_s"] = wall
            return r
    log = os.path.join(tempfile.gettempdir(), f"bench_topn_{kind}.stderr")
    with open(log, "w") as f:
        f.write(p.stderr)
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:200] + f" (stderr: {log})",
            "process_wall_s": wall}


CLI_INPUTS = ("fixtures/traces_real/decode_b64_cat.json.gz", "fixtures/traces_real/prefill_llama.json.gz",
              "fixtures/ncu/known.ncu-rep.gz")


def cli_figures(runs: int) -> None:
    """`roofline topn SRC` cold and warm on each of CLI_INPUTS (median, min, max in s)."""
    import resource
    import statistics

    sys.path.insert(0, REPO)
    from roofline.cli import main as cli_main

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    tmpd = tempfile.mkdtemp(prefix="bench_topn_cli_")
    print(f"{'input':34s} {'cold median':>11s} {'min':>6s} {'max':>6s} {'cold CPU':>9s} {'warm median':>11s}")
    for src in CLI_INPUTS:
        args = ["topn", os.path.join(REPO, src), "-o", os.path.join(tmpd, "t.json"), "--no-env-report", "-q"]
        cmd = [sys.executable, "-m", "roofline.cli", *args]
        subprocess.run(cmd, capture_output=True, env=env, check=True)   # bytecode cache, untimed
        cold, cpu = [], []
        for _ in range(runs):
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, env=env, check=True)
            cold.append(time.perf_counter() - t0)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
        warm = []
        for _ in range(runs + 1):
            t0 = time.perf_counter()
            cli_main(args, standalone_mode=False)
            warm.append(time.perf_counter() - t0)
        warm = sorted(warm[1:])
        cold.sort()
        print(f"{os.path.basename(src):34s} {statistics.median(cold):11.3f} {cold[0]:6.3f} {cold[-1]:6.3f} "
              f"{statistics.median(cpu):9.3f} {statistics.median(warm):11.3f}")
    print(f"({runs} runs each; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for f in os.listdir(tmpd):
        os.unlink(os.path.join(tmpd, f))
    os.rmdir(tmpd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--src", default=os.path.join(REPO, "fixtures", "traces", "decode.json.gz"))
    ap.add_argument("--mb", type=float, default=500.0)
    ap.add_argument("--only", default="ours,ours1,hta,json")
    ap.add_argument("--hta-python", default=sys.executable)
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    ap.add_argument("--cli", action="store_true", help="time `roofline topn` on the fixture inputs, cold and warm")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    if a.child:
        _child(*a.child)
        return 0
    if a.cli:
        cli_figures(max(7, a.runs))
        return 0
    tmpd = tempfile.mkdtemp(prefix="bench_topn_", dir="/tmp")
    path = os.path.join(tmpd, "big_trace.json")   # HTA wants a directory holding the trace(s)
    t0 = time.perf_counter()
    size, copies = generate(a.src, path, a.mb)
    print(f"generated {path}: {size/1e6:.1f} MB ({copies} copies of {os.path.basename(a.src)}) "
          f"in {time.perf_counter()-t0:.1f} s", flush=True)
    results = {}
    for kind in a.only.split(","):
        py = a.hta_python if kind == "hta" else sys.executable
        r = run_child(kind, path, py)
        results[kind] = r
        if "error" in r:
            print(f"{kind:5s} FAILED: {r['error']}", flush=True)
        else:
            print(f"{kind:5s} {r['wall_s']:7.2f} s  {size/1e6/r['wall_s']:7.1f} MB/s  peak RSS {r['peak_rss_mb']:7.0f} MB"
                  f"  kernels={r.get('kernels')} names={r.get('names')}", flush=True)
    if "ours" in results and "json" in results and "error" not in results["ours"] and "error" not in results["json"]:
        o, j = results["ours"]["per_name_us"], results["json"]["per_name_us"]
        worst = max(abs(o[k] - j[k]) / j[k] for k in j) if set(o) == set(j) else float("inf")
        print(f"check: ours vs json.load per-kernel totals: same names={set(o) == set(j)}, "
              f"worst relative difference {worst:.2e}; shapes filled for {results['ours']['entries_with_shapes']} "
              f"of {results['ours']['names']} kernel names; ijson backend {results['ours']['ijson_backend']}")
    print()
    print(f"{'approach':10s} {'s':>8s} {'MB/s':>8s} {'peak MB':>8s} {'vs ours':>8s}")
    base = results.get("ours", {}).get("wall_s")
    for kind, r in results.items():
        if "error" in r:
            print(f"{kind:10s} {'failed':>8s}")
            continue
        rel = f"{r['wall_s']/base:.1f}x" if base else ""
        print(f"{kind:10s} {r['wall_s']:8.2f} {size/1e6/r['wall_s']:8.1f} {r['peak_rss_mb']:8.0f} {rel:>8s}")
    if not a.keep:
        os.unlink(path)
        os.rmdir(tmpd)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Run TraceLens (AMD-AGI/TraceLens) as a peer analyzer on the real H200 traces and record its
per-op figures as fixtures, so that tests can compare against them without TraceLens installed.

    pip install -e ".[peer]"         # TraceLens from its source repository (see fixtures/peer/README.md)
    python3 benchmarks/peer_tracelens.py                 # writes fixtures/peer/tracelens_<trace>.csv
    python3 benchmarks/peer_tracelens.py --traces prefill_llama --out /tmp/peer

Careful: the PyPI project named "TraceLens" is an unrelated package (an agent-evaluation
framework). AMD's TraceLens is installed from its repository; this script refuses a TraceLens
without ``TraceLens.TreePerf``.

What TraceLens is asked: ``TreePerfAnalyzer.from_file(trace)``, then
``build_df_perf_metrics(events, include_kernel_details=True, include_args=True)`` on every CPU op
that has a TraceLens perf model (``op_to_perf_model_class_map``): per op event its GFLOPS, busy
kernel time (µs), TFLOPS/s, Data Moved (MB, which is MiB: bytes / 2**20), TB/s and the
perf model's parsed parameters. Ops that launch kernels but have no TraceLens perf model (cat,
the embedding gather) are recorded from ``get_df_kernel_launchers`` with their kernel times and
empty FLOPs/bytes, so the fixture shows what the peer does not model.

One CSV row per op instance group: (op, Input Dims, Input type, Concrete Inputs, the kernel
names it launched). Figures are TraceLens's own; flops_per_op and bytes_per_op are exact
integers recovered from its GFLOPS (x 1e9, rounded) and Data Moved (x 2**20).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import warnings
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRACES = ("prefill_llama", "decode_b64_cat", "graph_decode_mixed")
COLUMNS = (
    "trace", "op", "peer_model", "parent_ops", "input_dims", "input_types", "concrete_inputs",
    "launches", "kernel_names", "kernels_per_op", "kernel_dur_us_mean_by_name",
    "kernel_time_us_mean", "kernel_time_us_sum", "flops_per_op", "bytes_per_op",
    "data_moved_mib", "tflops_per_s_mean", "tb_per_s_mean", "compute_spec", "peer_params",
)


def _import_tracelens():
    try:
        import TraceLens  # noqa: F401
        from TraceLens import TreePerfAnalyzer
        from TraceLens.PerfModel.torch_op_mapping import op_to_perf_model_class_map
    except ImportError as e:
        raise SystemExit(
            f"peer_tracelens: AMD TraceLens is not importable ({e}); install it with "
            f"pip install -e \".[peer]\" (the PyPI project named TraceLens is a different package)")
    return TraceLens, TreePerfAnalyzer, op_to_perf_model_class_map


def _tracelens_version(TraceLens):
    try:
        from importlib.metadata import version
        return version("TraceLens")
    except Exception:  # pragma: no cover - metadata missing
        return getattr(TraceLens, "__version__", "unknown")


def _plain(x):
    """Trace args as JSON-able plain lists (TraceLens hands tuples back in places)."""
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def _ancestors(tree, event, limit=6):
    out = []
    p = tree.get_parent_event(event)
    while p is not None and len(out) < limit:
        if p.get("cat") == "cpu_op":
            out.append(p["name"])
        p = tree.get_parent_event(p)
    return out


def _group_key(op, args, kernel_names):
    return (op, json.dumps(_plain(args.get("Input Dims"))), json.dumps(_plain(args.get("Input type"))),
            json.dumps(_plain(args.get("Concrete Inputs"))), tuple(kernel_names))


def analyze_trace(path, trace_name):
    """TraceLens on one trace -> list of CSV row dicts (one per op instance group)."""
    _, TreePerfAnalyzer, op_map = _import_tracelens()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        an = TreePerfAnalyzer.from_file(path)
        modeled = [e for e in an.tree.events if e.get("cat") == "cpu_op" and e["name"] in op_map]
        df = an.build_df_perf_metrics(modeled, include_kernel_details=True, include_args=True)
        launchers = an.get_df_kernel_launchers(include_kernel_details=True)
    groups = OrderedDict()
    modeled_uids = set()
    by_uid = {e["UID"]: e for e in modeled}
    for rec in df.to_dict("records"):
        ev = by_uid[rec["UID"]]
        kd = rec.get("kernel_details") or []
        if not kd:
            continue                     # an op that launched nothing in the window (a wrapper)
        modeled_uids.add(rec["UID"])
        names = [k["name"] for k in kd]
        key = _group_key(rec["name"], ev["args"], names)
        g = groups.setdefault(key, dict(rows=[], event=ev, kind="modeled", rec=rec))
        g["rows"].append(dict(
            time=rec["Kernel Time (µs)"], durs=[(k["name"], k["dur"]) for k in kd],
            flops=round(rec["GFLOPS"] * 1e9),
            bytes=(None if rec.get("Data Moved (MB)") is None or math.isnan(rec["Data Moved (MB)"])
                   else round(rec["Data Moved (MB)"] * 2 ** 20)),
            tflops=rec["TFLOPS/s"], tbs=rec.get("TB/s")))
    # launchers without a TraceLens perf model, unless a modeled ancestor already counts their kernels
    for rec in launchers.to_dict("records"):
        ev = an.tree.get_UID2event(rec["UID"])
        anc = []
        p = an.tree.get_parent_event(ev)
        covered = False
        while p is not None:
            if p["UID"] in modeled_uids:
                covered = True
                break
            if p.get("cat") == "cpu_op":
                anc.append(p["name"])
            p = an.tree.get_parent_event(p)
        if covered or rec["UID"] in modeled_uids or rec["name"] in op_map:
            continue
        kd = rec.get("kernel_details") or []
        names = [k["name"] for k in kd]
        key = _group_key(rec["name"], ev["args"], names)
        g = groups.setdefault(key, dict(rows=[], event=ev, kind="unmodeled", rec=rec, parents=anc[:4]))
        g["rows"].append(dict(time=rec["total_direct_kernel_time"], durs=[(k["name"], k["dur"]) for k in kd],
                              flops=None, bytes=None, tflops=None, tbs=None))
    out = []
    for (op, dims, types, conc, names), g in groups.items():
        rows = g["rows"]
        n = len(rows)
        flops = {r["flops"] for r in rows}
        byts = {r["bytes"] for r in rows}
        if len(flops) != 1 or len(byts) != 1:
            raise RuntimeError(f"{trace_name} {op} {dims}: TraceLens figures differ inside one group")
        by_name = OrderedDict()
        for r in rows:
            for k, d in r["durs"]:
                by_name.setdefault(k, []).append(d)
        params = {}
        if g["kind"] == "modeled":
            params = {k[len("param: "):]: _plain(v) for k, v in g["rec"].items()
                      if k.startswith("param: ") and _plain(v) is not None
                      and not (isinstance(v, float) and math.isnan(v))}
            for k in list(params):
                if k.startswith("stride"):
                    del params[k]
        fl, by = flops.pop(), byts.pop()
        mean = lambda xs: (sum(xs) / len(xs)) if xs and None not in xs else None  # noqa: E731
        out.append(OrderedDict(
            trace=trace_name, op=op,
            peer_model=(type_name(g["event"]["name"]) if g["kind"] == "modeled" else "none"),
            parent_ops=json.dumps(g.get("parents") or _ancestors_names(an, g["event"])),
            input_dims=dims, input_types=types, concrete_inputs=conc, launches=n,
            kernel_names=json.dumps(list(dict.fromkeys(names))), kernels_per_op=len(names),
            kernel_dur_us_mean_by_name=json.dumps({k: round(sum(v) / n, 4) for k, v in by_name.items()}),
            kernel_time_us_mean=round(mean([r["time"] for r in rows]), 4),
            kernel_time_us_sum=round(sum(r["time"] for r in rows), 4),
            flops_per_op=("" if fl is None else fl), bytes_per_op=("" if by is None else by),
            data_moved_mib=("" if by is None else repr(by / 2 ** 20)),
            tflops_per_s_mean=("" if fl is None else repr(mean([r["tflops"] for r in rows]))),
            tb_per_s_mean=("" if by is None else repr(mean([r["tbs"] for r in rows]))),
            compute_spec=(g["rec"].get("Compute Spec", "") if g["kind"] == "modeled" else ""),
            peer_params=json.dumps(params, sort_keys=True)))
    out.sort(key=lambda r: -float(r["kernel_time_us_sum"]))
    return out


def _ancestors_names(an, ev):
    return _ancestors(an.tree, ev)[:4]


def type_name(op):
    _, _, op_map = _import_tracelens()
    return op_map[op].__name__


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", nargs="*", default=list(TRACES), help="trace names under fixtures/traces_real/")
    p.add_argument("--out", default=os.path.join(ROOT, "fixtures", "peer"), help="output folder")
    a = p.parse_args(argv)
    TraceLens, _, _ = _import_tracelens()
    if not hasattr(TraceLens, "TreePerf"):
        raise SystemExit("peer_tracelens: this TraceLens has no TreePerf: not AMD's TraceLens")
    os.makedirs(a.out, exist_ok=True)
    for t in a.traces:
        src = os.path.join(ROOT, "fixtures", "traces_real", f"{t}.json.gz")
        if not os.path.exists(src):
            raise SystemExit(f"peer_tracelens: no trace {src}")
        rows = analyze_trace(src, t)
        dst = os.path.join(a.out, f"tracelens_{t}.csv")
        write_csv(rows, dst)
        print(f"{t}: {len(rows)} op groups -> {os.path.relpath(dst, ROOT)}")
    print(f"TraceLens {_tracelens_version(TraceLens)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

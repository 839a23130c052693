#!/usr/bin/env python3
"""Accuracy of the byte models on the real-model corpus (fixtures/corpus/): for every corpus trace,
`roofline topn` -> `roofline analyze` through the CLI, then each head's model bytes per launch
against the DRAM bytes Nsight Compute measured for the same kernel in one step of the same run.

The measured side is independent of roofline's readers: the trace is parsed here with json, each
step's kernel sequence (GPU-side step ranges) is aligned launch by launch with the ncu step of the
same case and regime (fixtures/corpus/ncu_rows.json.gz, same code path, same order: the base function
names must agree at every position), and a head's measured bytes per launch is the mean DRAM read +
write of the ncu launches aligned with its launches in that step.

    python3 benchmarks/corpus_accuracy.py [--out DIR] [--md benchmarks/corpus_accuracy_results.md]

Prints one table (case, regime, kernel, class, shapes, model MB, measured MB, error, explained cause)
and the summary: the share of head GPU time within +-15%, or with an entry note naming a measured
cause of the difference. `explained` means the entry's notes name the cause (a phrase from
CAUSES below); a difference beyond the band without one counts against the figure.
"""
from __future__ import annotations

import argparse
import re
import gzip
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fixtures" / "corpus"
BAND = 0.15
# phrases an entry's notes use to name the measured cause of a model-vs-DRAM difference
CAUSES = ("re-read", "exceeds the L2", "L2-resident", "fits in the L2", "served from L2", "write-back")


def base_name(name: str) -> str:
    """The kernel's base function name: no return type, templates or arguments (`void at::native::
    elementwise_kernel<128, 4, ...>(...)` -> `elementwise_kernel`); mangled names keep their first
    identifier (`_ZN7cutlass13device_kernel...` -> `device_kernel`)."""
    n = name.strip()
    if n.startswith("_Z"):
        ids, i = [], 2 + (n[2] == "N")
        while i < len(n) and n[i].isdigit():
            j = i
            while n[j].isdigit():
                j += 1
            ln = int(n[i:j])
            ids.append(n[j:j + ln])
            i = j + ln
        return ids[-1] if ids else n
    depth, out = 0, []
    for ch in n:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).split()
    return (s[-1] if s else n).split("::")[-1]


def trace_steps(path: Path) -> tuple[dict, dict]:
    """regime -> [step kernel lists in time order], each kernel (name, ts); and kernel name ->
    total launches. Steps are the GPU-side ranges prefill_step/decode_step; none -> one step."""
    ev = json.load(gzip.open(path))["traceEvents"]
    ks = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    rng = sorted((e for e in ev if e.get("cat") == "gpu_user_annotation"
                  and e.get("name") in ("prefill_step", "decode_step")), key=lambda e: e["ts"])
    steps = defaultdict(list)
    if not rng:
        steps["prefill"].append([(k["name"], k["ts"]) for k in ks])
        return steps
    for r in rng:
        lo, hi = r["ts"], r["ts"] + r["dur"]
        steps[r["name"].split("_")[0]].append([(k["name"], k["ts"]) for k in ks if lo <= k["ts"] <= hi])
    return steps


def align(trace_steps_: list, ncu: list) -> list | None:
    """The run of consecutive trace steps whose kernels line up with the ncu step position by
    position (same base names); -> [(trace kernel name, ncu row)] or None."""
    want = [base_name(r["name"]) for r in ncu]
    for i in range(len(trace_steps_)):
        seq = []
        for s in trace_steps_[i:]:
            seq += s
            if len(seq) >= len(ncu):
                break
        if len(seq) == len(ncu) and [base_name(n) for n, _ in seq] == want:
            return [(n, r) for (n, _), r in zip(seq, ncu)]
    return None


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


# the op classes of hybrid models and MoE routing (linear-attention / state-space layers, their convs, scatter-adds, MoE
# routing sorts): every kernel of theirs is measured, head or not (the wide pass)
NEW_CLASSES = ("recurrent", "chunk_scan", "causal_conv", "scatter_add", "routing_sort")


def analyse_case(case: str, meta: dict, work: Path, wide: bool = False) -> dict:
    d, p = meta["decode"], meta["prefill"]
    isl, osl = p["tokens_per_seq"], max(d["steps"], 1)
    conc = d["batch"] if d["steps"] else p["batch"]
    rd = work / case / ("wide" if wide else "") / "profile" / "round_1"
    rd.mkdir(parents=True, exist_ok=True)
    topn = rd / "profile_topN.json"
    r = run([sys.executable, "-m", "roofline.cli", "topn", str(CORPUS / f"{case}.json.gz"), "-o", str(topn), "--force",
             "--isl", str(isl), "--osl", str(osl), "--conc", str(conc), "--config", str(CORPUS / "configs" / f"{case}.json")]
            + (["--top", "400"] if wide else []))
    if r.returncode:
        raise RuntimeError(f"{case}: topn failed: {r.stderr.strip().splitlines()[-1:]}")
    if wide:
        # every kernel of the Top-N analysed (no head threshold), through the API: the artifact's markdown
        # is not needed here
        sys.path.insert(0, str(ROOT))
        from roofline import api

        return api.analyze(str(topn), head_threshold_pct=0.0, head_cap=400)
    r = run([sys.executable, "-m", "roofline.cli", "analyze", str(topn), "--format", "json"])
    if r.returncode:
        raise RuntimeError(f"{case}: analyze failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads((rd / "profile_roofline.json").read_text())


def verdicts(entry: dict) -> list[dict]:
    """The entry's regime verdicts: the entry itself, plus any other regime analysed beside it."""
    return [entry] + [v for v in entry.get("regime_verdicts") or [] if v.get("regime") != entry.get("regime")]


def measure(case: str, art: dict, steps: dict, ncu_by: dict) -> list[dict]:
    rows = []
    for e in art["entries"]:
        for v in verdicts(e):
            reg = v.get("regime")
            share = v.get("regime_pct_gpu_time", e["pct_gpu_time"])
            row = {"case": case, "regime": reg, "kernel": e.get("short_name") or e["name"], "name": e["name"],
                   "class": e.get("op_kind"), "pct": share, "model_bytes": v.get("bytes_model", v.get("bytes_est")),
                   "measured_bytes": None, "n": 0, "shape": _shape_text(v), "notes": v.get("notes") or "",
                   "headroom": v.get("headroom_class"), "modeled": v.get("modeled")}
            ncu = ncu_by.get((case, reg))
            al = align(steps.get(reg, []), ncu) if ncu else None
            if al is not None:
                mine = [r for n, r in al if n == e["name"]]
                if mine:
                    b = [(r["dram__bytes_read.sum"] or 0) + (r["dram__bytes_write.sum"] or 0) for r in mine]
                    row["measured_bytes"], row["n"] = sum(b) / len(b), len(b)
            elif ncu:
                # the step's kernel sequence differs (routing-dependent loops, recompiles): fall back
                # to the ncu launches of the same base kernel name in that step
                same = [r for r in ncu if base_name(r["name"]) == base_name(e["name"])]
                if same:
                    b = [(r["dram__bytes_read.sum"] or 0) + (r["dram__bytes_write.sum"] or 0) for r in same]
                    row["measured_bytes"], row["n"], row["matched_by"] = sum(b) / len(b), len(b), "name"
                else:
                    row["why_unmeasured"] = "ncu step does not align with a trace step"
            else:
                row["why_unmeasured"] = "no ncu step for this case and regime"
            rows.append(row)
    return rows


def _shape_text(v: dict) -> str:
    sh = v.get("shape") or {}
    if not sh:
        return "-"
    s = ",".join(f"{k}={x}" for k, x in sh.items() if not isinstance(x, (list, dict)))
    n = len(v.get("shapes_used") or [])
    return s + (f" (+{n - 1} shapes)" if n > 1 else "")


def classify_row(r: dict) -> str:
    if not r["modeled"] or r["model_bytes"] is None:
        return "degraded"
    if r["class"] == "routing_sort":
        return "no HBM verdict (routing step)"     # the copy model's bytes shown for reference only
    if r["measured_bytes"] is None:
        return "unmeasured"
    err = r["model_bytes"] / r["measured_bytes"] - 1 if r["measured_bytes"] > 0 else float("inf")
    r["err"] = err
    if abs(err) <= BAND:
        return "within"
    cause = next((c for c in CAUSES if c in r["notes"] and _holds(c, r)), None)
    if cause:
        r["cause"] = cause
        return "explained"
    return "unexplained"


# the bound a write-back note states: the kernel's reads alone (roofline/core/opclasses/stream.py writeback_note)
_READS_ALONE = re.compile(r"as low as its reads alone \(([0-9.e+-]+) MB per launch\)")


def _holds(cause: str, r: dict) -> bool:
    """A cause whose note states a bound explains only a measurement inside it: deferred write-back
    lowers a kernel's DRAM bytes from the model's down to its reads alone, no further and never above."""
    if cause != "write-back":
        return True
    m = _READS_ALONE.search(r["notes"])
    return bool(m) and float(m.group(1)) * 1e6 * (1 - BAND) <= r["measured_bytes"] <= r["model_bytes"]


def _line(r: dict) -> str:
    """One markdown table row."""
    mb = f"{r['model_bytes'] / 1e6:.2f}" if r["model_bytes"] else "-"
    me = f"{r['measured_bytes'] / 1e6:.2f}" if r["measured_bytes"] is not None else "-"
    er = f"{r['err']:+.1%}" if "err" in r else "-"
    st = r["status"] + (f" ({r['cause']})" if r.get("cause") else "") + (
        f" ({r['why_unmeasured']})" if r.get("why_unmeasured") and r["status"] == "unmeasured" else "") + (
        f": {_reason(r['notes'])}" if r["status"] == "degraded" else "")
    return (f"| {r['case']} | {r['regime']} | {r['kernel'][:48]} | {r['class']} | {r['shape'][:40]} | "
            f"{r['pct']:.2f} | {mb} | {me} | {er} | {st} |")


def _has_new(config: dict) -> bool:
    """A hybrid model: config.json names linear-attention or Mamba layers."""
    return any(k in (config or {}) for k in ("linear_num_value_heads", "mamba_n_heads", "mamba_d_state"))


def _reason(notes: str) -> str:
    """A degraded row's reason, short: what would give it a verdict is its last clause."""
    r = notes.removeprefix("degraded (L2): ").replace("|", "/")
    return (r[:90] + " ... " + r[-110:]) if len(r) > 200 else r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--md", default=None, help="also write the table as markdown here")
    ap.add_argument("--cases", default=None)
    a = ap.parse_args(argv)
    meta = json.loads((CORPUS / "corpus_meta.json").read_text())["cases"]
    ncu_rows = json.load(gzip.open(CORPUS / "ncu_rows.json.gz"))["rows"]
    ncu_by = defaultdict(list)
    for r in ncu_rows:
        ncu_by[(r["case"], r["regime"])].append(r)
    work = Path(a.out or tempfile.mkdtemp(prefix="corpus_acc_"))
    cases = a.cases.split(",") if a.cases else list(meta)
    rows = []
    wide_rows = []
    for case in cases:
        art = analyse_case(case, meta[case], work)
        rows += measure(case, art, trace_steps(CORPUS / f"{case}.json.gz"), ncu_by)
        if any(r["class"] in NEW_CLASSES for r in rows if r["case"] == case) or _has_new(meta[case]["config"]):
            wart = analyse_case(case, meta[case], work, wide=True)
            wart["entries"] = [e for e in wart["entries"] if e.get("op_kind") in NEW_CLASSES]
            wide_rows += measure(case, wart, trace_steps(CORPUS / f"{case}.json.gz"), ncu_by)
    for r in rows:
        r["status"] = classify_row(r)
    lines = ["| case | regime | kernel | class | shape | % GPU | model MB | measured MB | error | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(_line(r))
    tot = sum(r["pct"] for r in rows)
    by = defaultdict(float)
    for r in rows:
        by[r["status"]] += r["pct"]
    ok = by["within"] + by["explained"]
    meas = tot - by["unmeasured"] - by["degraded"]
    summary = [f"heads (kernel x regime rows): {len(rows)}; head GPU time {tot:.1f}% summed over the cases",
               *(f"  {k}: {v / tot:.1%} of head GPU time ({v:.1f} % GPU summed over the cases)"
                 for k, v in sorted(by.items())),
               f"within +-{BAND:.0%} or explained: {ok / meas:.1%} of the measured head GPU time "
               f"({ok / tot:.1%} of all head GPU time)" if meas else "nothing measured"]
    summary += ["", "per case (share of the case's head GPU time; measured: within +-15% or explained):"]
    for case in cases:
        mine = [r for r in rows if r["case"] == case]
        t = sum(r["pct"] for r in mine) or 1.0
        parts = {k: sum(r["pct"] for r in mine if r["status"] == k) / t for k in
                 ("within", "explained", "unexplained", "degraded", "unmeasured")}
        summary.append(f"  {case}: {len(mine)} heads; " + ", ".join(f"{k} {v:.0%}" for k, v in parts.items() if v))
    for r in wide_rows:
        r["status"] = classify_row(r)
    wl = ["", f"every kernel of the hybrid-model and routing op classes ({', '.join(NEW_CLASSES)}), head or not "
          "(% GPU: its share of the case's GPU time in that regime):", "", *lines[:2]]
    for r in wide_rows:
        wl.append(_line(r))
    by_kind = defaultdict(lambda: defaultdict(float))
    for r in wide_rows:
        by_kind[r["class"]][r["status"]] += r["pct"]
    wl += ["", "by class (share of the class's GPU time): " + "; ".join(
        f"{k}: " + ", ".join(f"{st} {v / sum(d.values()):.0%}" for st, v in sorted(d.items())) for k, d in by_kind.items())]
    sorts = [r for r in rows + wide_rows if re.search(r"sort|topk", r["kernel"], re.IGNORECASE)]
    judged = [r for r in sorts if r["class"] != "routing_sort" or r["headroom"] not in (None, "unknown")]
    wl += ["", f"sort / top-k kernels: {len(sorts)} rows, judged as a copy (an HBM verdict): {len(judged)}"
           + "".join(f"; {r['case']} {r['kernel']}" for r in judged)]
    text = "\n".join(lines + [""] + summary + (wl if wide_rows else []))
    print(text)
    if a.md:
        Path(a.md).write_text("# Model bytes vs measured DRAM bytes on the real-model corpus\n\n"
                              "Made by `python3 benchmarks/corpus_accuracy.py --md " + a.md + "`.\n\n" + text + "\n",
                              encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

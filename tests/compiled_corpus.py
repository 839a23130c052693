"""The corpus cases of issue #40's findings (compiled kernels, gathers, last-position logits): each case
through the CLI as a user runs it (`roofline topn TRACE --isl --osl --conc --config`, then `roofline
analyze`), and what the trace itself records, read here with json (never through roofline's readers),
for the expected figures."""
from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fixtures" / "corpus"


@functools.lru_cache(maxsize=None)
def meta(case: str) -> dict:
    return json.loads((CORPUS / "corpus_meta.json").read_text())["cases"][case]


def config(case: str) -> dict:
    return json.loads((CORPUS / "configs" / f"{case}.json").read_text())


@functools.lru_cache(maxsize=None)
def cli_artifact(case: str) -> dict:
    """roofline topn -> roofline analyze through the CLI, with the case's workload and config.json."""
    m = meta(case)
    d, p = m["decode"], m["prefill"]
    rd = Path(tempfile.mkdtemp(prefix=f"cmp_{case}_")) / "profile" / "round_1"
    rd.mkdir(parents=True)
    topn = rd / "profile_topN.json"
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(CORPUS / f"{case}.json.gz"), "-o", str(topn),
                        "--force", "--isl", str(p["tokens_per_seq"]), "--osl", str(max(d["steps"], 1)),
                        "--conc", str(d["batch"] if d["steps"] else p["batch"]),
                        "--config", str(CORPUS / "configs" / f"{case}.json")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-800:]
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "analyze", str(topn), "--format", "json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-800:]
    return json.loads((rd / "profile_roofline.json").read_text())


@functools.lru_cache(maxsize=None)
def events(case: str) -> list:
    return json.load(gzip.open(CORPUS / f"{case}.json.gz"))["traceEvents"]


def kernel_share(case: str, pred) -> float:
    """% of the trace's kernel time in kernels whose name satisfies pred."""
    ks = [e for e in events(case) if e.get("cat") == "kernel"]
    return 100.0 * sum(e["dur"] for e in ks if pred(e["name"])) / sum(e["dur"] for e in ks)


def launching_op(case: str, kernel_pred) -> tuple[dict, dict]:
    """(the first kernel event whose name satisfies kernel_pred, the cpu_op its External id points at)."""
    ev = events(case)
    k = next(e for e in ev if e.get("cat") == "kernel" and kernel_pred(e["name"]))
    x = k["args"]["External id"]
    op = next(e for e in ev if e.get("cat") == "cpu_op" and e["args"].get("External id") == x)
    return k, op


def ncu_bytes(case: str, regime: str, pred) -> list[float]:
    """DRAM bytes (read + write) of each ncu launch of the case's regime whose name satisfies pred."""
    rows = json.load(gzip.open(CORPUS / "ncu_rows.json.gz"))["rows"]
    return [(r["dram__bytes_read.sum"] or 0) + (r["dram__bytes_write.sum"] or 0) for r in rows
            if r["case"] == case and r["regime"] == regime and pred(r["name"])]


def entry(art: dict, pred) -> dict:
    return next(e for e in art["entries"] if pred(e["name"]))

"""The real-model corpus cases the hybrid op-class tests read (fixtures/corpus/: H200 traces and one
Nsight Compute step per case and regime): every kernel of a case analysed (no head threshold), and
the DRAM bytes ncu measured for a kernel, straight from ncu_rows.json.gz."""
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


@functools.lru_cache(maxsize=None)
def topn_path(case: str) -> str:
    """`roofline topn` of the case's trace, every kernel kept, with its workload and config.json."""
    m = meta(case)
    d, p = m["decode"], m["prefill"]
    out = Path(tempfile.mkdtemp(prefix=f"hyb_{case}_")) / "profile" / "round_1" / "profile_topN.json"
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(CORPUS / f"{case}.json.gz"), "-o", str(out),
                        "--force", "--top", "400", "--isl", str(p["tokens_per_seq"]), "--osl", str(max(d["steps"], 1)),
                        "--conc", str(d["batch"] if d["steps"] else p["batch"]),
                        "--config", str(CORPUS / "configs" / f"{case}.json")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-500:]
    return str(out)


def topn_entry(case: str, key: str) -> dict:
    doc = json.loads(Path(topn_path(case)).read_text())
    return next(e for e in doc["entries"] if key in e["name"])


# the classes these tests are about: the Top-N they analyse keeps only their entries (each entry is
# analysed on its own; the others' verdicts are other tests' business)
CLASSES = ("recurrent", "chunk_scan", "causal_conv", "scatter_add")


def _analyse(doc: dict, src: Path, name: str) -> dict:
    from roofline import api

    doc = dict(doc, entries=[e for e in doc["entries"] if e.get("op_class") in CLASSES])
    dst = src.with_name(name)
    dst.write_text(json.dumps(doc))
    return api.analyze(str(dst), head_threshold_pct=0.0, head_cap=400)


@functools.lru_cache(maxsize=None)
def artifact(case: str) -> dict:
    src = Path(topn_path(case))
    return _analyse(json.loads(src.read_text()), src, "profile_topN_hybrid.json")


def verdict(case: str, key: str, regime: str) -> dict:
    """The analysed verdict of the kernel whose name holds ``key``, in ``regime``."""
    e = next(x for x in artifact(case)["entries"] if key in x["name"])
    return next(v for v in [e, *(e.get("regime_verdicts") or [])] if v.get("regime") == regime) | {
        k: e[k] for k in ("name", "op_kind", "other_levers") if k in e}


@functools.lru_cache(maxsize=None)
def _rows() -> list:
    return json.load(gzip.open(CORPUS / "ncu_rows.json.gz"))["rows"]


def ncu_bytes(case: str, regime: str, key: str) -> float:
    """Mean DRAM bytes (read + write) per launch ncu measured for the kernel (name holding ``key``) in
    the case's step."""
    b = [r["dram__bytes_read.sum"] + r["dram__bytes_write.sum"] for r in _rows()
         if r["case"] == case and r["regime"] == regime and key in r["name"]]
    assert b, (case, regime, key)
    return sum(b) / len(b)


def verdict_without_shapes(case: str, key: str, regime: str) -> dict:
    """The verdict of the kernel when its Top-N entry has no shapes (stage A: config.json, the
    workload, the grid), every other entry as recorded."""
    src = Path(topn_path(case))
    doc = json.loads(src.read_text())
    for e in doc["entries"]:
        if key in e["name"]:
            for k in ("shapes", "shape_launches", "shape_base_latency_ms", "shape_regimes", "dtypes", "shape_dtypes"):
                e.pop(k, None)
    art = _analyse(doc, src, "profile_topN_noshapes.json")
    e = next(x for x in art["entries"] if key in x["name"])
    return next(v for v in [e, *(e.get("regime_verdicts") or [])] if v.get("regime") == regime)

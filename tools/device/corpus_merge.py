#!/usr/bin/env python3
"""Merge one device call's corpus output (tools/device/call_corpus2.sh: corpus2.tar, ncu2.tar) into
fixtures/corpus/: the traces (as recorded), each case's config (configs/<case>.json, from the
meta's config), the meta entries (corpus_meta.json "cases", "errors" kept per call), the ncu rows
(ncu_rows.json.gz: one row per launch, the metrics of tools/device/ncu_extract.py flattened) and
the raw page split per NVTX range (ncu/<case>__<regime>.csv.gz: the CSV's two header lines, then the
rows of that range). Cases already in the corpus are replaced, never merged launch by launch.

    python3 tools/device/corpus_merge.py --corpus-dir DIR/corpus --rows ROWS.json.gz --raw RAW.csv.gz
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fixtures" / "corpus"
KEEP = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
        "launch__grid_size", "launch__block_size")


def merge_meta(src: Path) -> list[str]:
    new = json.loads((src / "corpus_meta.json").read_text())
    path = CORPUS / "corpus_meta.json"
    old = json.loads(path.read_text())
    for k in ("device", "torch", "transformers", "liger_kernel"):
        if new.get(k) != old.get(k):
            old.setdefault("round2", {})[k] = new.get(k)
    old["cases"].update(new["cases"])
    if new.get("errors"):
        old.setdefault("errors_round2", {}).update(new["errors"])
    path.write_text(json.dumps(old, indent=1, default=str))
    for case, m in new["cases"].items():
        shutil.copyfile(src / m["trace"], CORPUS / m["trace"])
        (CORPUS / "configs" / f"{case}.json").write_text(json.dumps(m["config"], indent=1))
    return list(new["cases"])


def merge_rows(rows_path: Path, cases: set[str]) -> int:
    got = json.load(gzip.open(rows_path))["rows"]
    got = [r for r in got if r["case"] in cases]   # a case whose trace failed has no corpus entry
    flat = [{"case": r["case"], "regime": r["regime"], "name": r["name"], "mangled": r["mangled"],
             "function": r["function"], **{k: r["metrics"].get(k) for k in KEEP}} for r in got]
    seen = {r["case"] for r in flat}
    path = CORPUS / "ncu_rows.json.gz"
    old = json.load(gzip.open(path))
    old["rows"] = [r for r in old["rows"] if r["case"] not in seen] + flat
    with gzip.open(path, "wt") as f:
        json.dump(old, f)
    return len(flat)


def split_raw(raw_path: Path, cases: set[str]) -> list[str]:
    text = gzip.open(raw_path, "rt").read()
    lines = text.splitlines(keepends=True)
    head = lines[:2]
    rows = list(csv.reader(io.StringIO("".join(lines[2:]))))
    hdr = next(csv.reader(io.StringIO(lines[0])))
    col = next(i for i, h in enumerate(hdr) if h.startswith("thread Domain:Push/Pop_Range"))
    out: dict[str, list] = {}
    for r in rows:
        rng = r[col].split(":")[1] if ":" in r[col] else ""
        out.setdefault(rng, []).append(r)
    for rng, rs in out.items():
        if rng.rpartition("__")[0] not in cases:
            continue
        buf = io.StringIO()
        w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerows(rs)
        with gzip.open(CORPUS / "ncu" / f"{rng}.csv.gz", "wt") as f:
            f.write("".join(head) + buf.getvalue())
    return sorted(r for r in out if r.rpartition("__")[0] in cases)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True, type=Path)
    ap.add_argument("--rows", required=True, type=Path)
    ap.add_argument("--raw", required=True, type=Path)
    a = ap.parse_args(argv)
    cases = merge_meta(a.corpus_dir)
    n = merge_rows(a.rows, set(cases))
    print(f"cases {cases}; {n} ncu rows; raw split: {split_raw(a.raw, set(cases))}")


if __name__ == "__main__":
    main()

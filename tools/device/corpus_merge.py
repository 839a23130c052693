#!/usr/bin/env python3
"""Merge one device call's corpus output (tools/device/call_corpus2.sh: corpus2.tar, ncu2.tar) into
fixtures/corpus/: the traces (as recorded), each case's config (configs/<case>.json, from the
meta's config), the meta entries (corpus_meta.json "cases", "errors" kept per call), the ncu rows
(ncu_rows.json.gz: one row per launch, the metrics of tools/device/ncu_extract.py flattened) and
the raw page split per NVTX range (ncu/<case>__<regime>.csv.gz: the CSV's two header lines, then the
rows of that range). Cases already in the corpus are replaced, never merged launch by launch.

    python3 tools/device/corpus_merge.py --corpus-dir DIR/corpus --rows ROWS.json.gz --raw RAW.csv.gz

Round 4 (tools/device/call_corpus4.sh): several --rows/--raw files (one per ncu group), --round
round4 (the call's device/torch/transformers and errors kept under that key, and each new case
gets its own "device": the round ran on an H100 where the earlier ones ran on an H200), and the
compiled cases' inductor artefacts copied to compiled/<case>/ (kernels.tar.gz: the Triton sources
the trace's kernel_file names; kernel_information.json.gz and the debug dir where provenance
tracking was on).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import shutil
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fixtures" / "corpus"
KEEP = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
        "launch__grid_size", "launch__block_size")


def merge_meta(src: Path, rnd: str = "round2") -> list[str]:
    new = json.loads((src / "corpus_meta.json").read_text())
    path = CORPUS / "corpus_meta.json"
    old = json.loads(path.read_text())
    for k in ("device", "torch", "transformers", "liger_kernel"):
        if new.get(k) != old.get(k):
            old.setdefault(rnd, {})[k] = new.get(k)
    if rnd != "round2":
        for m in new["cases"].values():
            m["device"] = new.get("device")
            m["round"] = rnd
    old["cases"].update(new["cases"])
    if new.get("errors"):
        old.setdefault(f"errors_{rnd}", {}).update(new["errors"])
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


def gz_copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)


def merge_compiled(src: Path, cases: list[str]) -> list[str]:
    """The inductor artefacts of the compiled cases: compiled/<case>/kernels.tar.gz (the Triton
    sources the trace names), and where provenance tracking was on kernel_information.json.gz
    (make_corpus.Provenance), the debug dir's provenance node mappings and output code (.gz), and
    the rest of the debug dir as inductor_debug.tar.gz."""
    done = []
    for case in cases:
        dst = CORPUS / "compiled" / case
        kdir = src / "inductor_kernels" / case
        prov = src / "provenance" / f"{case}.kernel_information.json"
        dbg = src / "inductor_debug" / case
        if not (kdir.is_dir() or prov.exists() or dbg.is_dir()):
            continue
        if dst.exists():
            shutil.rmtree(dst)
        dst.mkdir(parents=True)
        if kdir.is_dir():
            with tarfile.open(dst / "kernels.tar.gz", "w:gz") as t:
                for f in sorted(kdir.iterdir()):
                    t.add(f, arcname=f.name)
        if prov.exists():
            gz_copy(prov, dst / "kernel_information.json.gz")
        if dbg.is_dir():
            for name in ("inductor_provenance_tracking_node_mappings.json", "output_code.py"):
                for f in dbg.rglob(name):
                    gz_copy(f, dst / f"{name}.gz")
            with tarfile.open(dst / "inductor_debug.tar.gz", "w:gz") as t:
                t.add(dbg, arcname="inductor_debug")
        done.append(case)
    meta_path = CORPUS / "corpus_meta.json"
    meta = json.loads(meta_path.read_text())
    for case in done:
        m = meta["cases"][case]
        m["compiled_artefacts"] = sorted(str(f.relative_to(CORPUS))
                                         for f in (CORPUS / "compiled" / case).iterdir())
        if "provenance" in m:
            m["provenance"]["kernel_information"] = f"compiled/{case}/kernel_information.json.gz"
            m["provenance"]["debug_dir"] = f"compiled/{case}/inductor_debug.tar.gz"
    meta_path.write_text(json.dumps(meta, indent=1, default=str))
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True, type=Path)
    ap.add_argument("--rows", required=True, type=Path, nargs="+")
    ap.add_argument("--raw", required=True, type=Path, nargs="+")
    ap.add_argument("--round", default="round2", help="the key the call's versions and errors go under")
    a = ap.parse_args(argv)
    cases = merge_meta(a.corpus_dir, a.round)
    n = sum(merge_rows(r, set(cases)) for r in a.rows)
    split = [x for r in a.raw for x in split_raw(r, set(cases))]
    comp = merge_compiled(a.corpus_dir, cases)
    print(f"cases {cases}; {n} ncu rows; raw split: {split}; compiled artefacts: {comp}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Time `roofline.counters.load` + `match` on a 1,000-kernel ncu raw-page CSV.

The CSV is synthesized (in a temporary folder) by repeating the REAL rows of
fixtures/ncu/known_raw.csv (H200, ncu 2025.3.1, 399 columns, thousands separators, units row),
each copy renamed so that every one of the N rows is a distinct kernel name; half of the Top-N
entries use the exact name and half a spelling that only the canonical-name pass matches (an
argument list and `at::native::` added), so both passes run at full size.

    python3 benchmarks/bench_counters.py [--kernels 1000] [--launches 1] [--repeat 3]

The bar: `roofline analyze --counters` on 1,000 kernels in under 10 s.
"""
from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofline.counters import load, match  # noqa: E402

FIXTURE = ROOT / "fixtures" / "ncu" / "known_raw.csv"


def synthesize(path: Path, n_kernels: int, launches: int) -> list[str]:
    rows = list(csv.reader(io.StringIO(FIXTURE.read_text())))
    header, units, body = rows[0], rows[1], rows[2:]
    ki, ii = header.index("Kernel Name"), header.index("ID")
    names, out = [], [header, units]
    rid = 0
    for i in range(n_kernels):
        src = body[i % len(body)]
        base = src[ki]
        # a distinct kernel per copy, keeping the real name's shape (templates, namespaces)
        if "<" in base:
            name = base.replace("<", f"_v{i}<", 1)
        else:
            name = f"{base}_v{i}"
        names.append(name)
        for _ in range(launches):
            r = list(src)
            r[ki], r[ii] = name, str(rid)
            rid += 1
            out.append(r)
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(out)
    path.write_text(buf.getvalue())
    return names


def entries_for(names: list[str]) -> list[dict]:
    ents = []
    for i, n in enumerate(names):
        if i % 2 == 0:
            ents.append({"name": n})
        else:
            spelled = n.replace("at::", "at::native::") + "(int, float*)"
            ents.append({"name": spelled})
    return ents


def analyze_end_to_end(csv_path: Path, tmp: Path) -> float:
    """The whole stage-C analysis (`roofline analyze --counters`) on the synthesized CSV, with a
    Top-N of the fixture's three bf16 GEMMs (their real kernel names are rows of the CSV)."""
    import json

    from roofline.api import analyze

    known = json.loads((ROOT / "fixtures" / "ncu" / "known.json").read_text())
    ents = []
    for o in known["ops"]:
        k = o["known"]
        if k["kind"] == "gemm" and k["dtype"] == "bf16":
            ents.append({"name": o["kernels"][0], "pct_gpu_time": 10.0, "classification": "gemm",
                         "regimes": {"decode": {"base_latency_ms": o["t_ms_cuda_event_mean20"], "launches_per_step": 1}},
                         "shapes": [{"M": k["M"], "N": k["N"], "K": k["K"]}],
                         "dtypes": {"act": "bf16", "weight": "bf16", "out": "bf16"}})
    (tmp / "profile_topN.json").write_text(json.dumps({"schema_version": 1, "round": 1, "entries": ents}))
    (tmp / "env_report.json").write_text(json.dumps({"gfx": "sm_90", "gpu_name": "NVIDIA H200",
                                                     "model_arch_class": "dense", "model_dtype": "bf16",
                                                     "workload": {"isl": 1024, "osl": 1024, "conc": 64}}))
    # the synthesized rows carry renamed kernels; add the three real GEMM rows under their names
    text = csv_path.read_text()
    real = FIXTURE.read_text().splitlines()[2:7]
    full = tmp / "synth_plus_real.csv"
    full.write_text(text + "\n".join(real) + "\n")
    t0 = time.perf_counter()
    art = analyze(tmp / "profile_topN.json", tmp / "env_report.json", counters=full)
    dt = time.perf_counter() - t0
    assert art["stage"] == "C", art["stage"]
    assert sum(1 for e in art["entries"] if e.get("confidence") == "high") == 3
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=int, default=1000)
    ap.add_argument("--launches", type=int, default=1, help="rows per kernel name (averaged)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-analyze", dest="analyze", action="store_false",
                    help="skip the end-to-end roofline.api.analyze timing")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_counters_") as d:
        p = Path(d) / f"synth_{a.kernels}.csv"
        names = synthesize(p, a.kernels, a.launches)
        entries = entries_for(names)
        size_mb = p.stat().st_size / 1e6
        t_load, t_match = [], []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            recs = load(p)
            t1 = time.perf_counter()
            got, unmatched = match(entries, recs)
            t2 = time.perf_counter()
            t_load.append(t1 - t0)
            t_match.append(t2 - t1)
        assert len(recs) == a.kernels, len(recs)
        assert len(got) == a.kernels and not unmatched, (len(got), len(unmatched))
        t_an = analyze_end_to_end(p, Path(d)) if a.analyze else None
    lm, mm = statistics.median(t_load), statistics.median(t_match)
    print(f"synthesized CSV: {a.kernels} kernels x {a.launches} launch(es) = {a.kernels * a.launches} rows, "
          f"{size_mb:.1f} MB, from {FIXTURE.relative_to(ROOT)}")
    print(f"load : median {lm:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in t_load)})")
    print(f"match: median {mm:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in t_match)}); "
          f"{len(got)} matched, {len(unmatched)} unmatched")
    print(f"total: {lm + mm:.3f} s  (bar: < 10 s)")
    if t_an is not None:
        print(f"roofline.api.analyze(topN of 3 GEMM entries, counters=<this CSV>): {t_an:.3f} s")
    return 0 if lm + mm < 10 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Build the evidence `roofline ladder advise` ships with (roofline/data/ladder_evidence_h200.json)
from the recorded H200 benches in fixtures/ladder/: each run's timed rows, cut to the fields the
evidence reads (ladder/evidence.py ROW_KEYS).

    python tools/build_ladder_evidence.py            # rewrite the package data
    python tools/build_ladder_evidence.py --check    # exit 1 when it is not what the sources give

Which recorded runs go in is decided here, not in the runtime code: SOURCES time the shipped code
of every level they name; LEFT_OUT says why each other bench result under fixtures/ladder/ stays
out (tests/test_ladder_evidence.py fails when a bench result is in neither).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LADDER = ROOT / "fixtures" / "ladder"

SOURCES = ("h200_bench.json", "h200_bench_run2.json", "h200_bench_square_llama.json",
           "h200_bench_square_llama_run2.json", "h200_l06_epilogue_variants.json", "h200_overlap_l5_l6.json",
           "h200_variants_v1_vs_v2.json", "levels7_10_h200/start6_levels1_10_bench/bench_all.json")
LEFT_OUT = {
    "h200_bench_v1_serial_copy.json": "levels 2-3 with the first (serial-copy) loads, replaced by v2 (ladder/notes/l03.md)",
    "levels7_10_h200_call1/": "the third round's first device call, before the final builds (ladder/README.md)",
    "levels7_10_h200_call2/": "the third round's second device call: level 9 still without a working cluster",
    "levels7_10_h200/start1_variants/": "level 7-10 alternatives, before the cluster fix (the folder's README)",
    "levels7_10_h200/start3_cluster_fix/": "the first bench after the cluster fix, before the shipped registry",
    "levels7_10_h200/start4_levels1_10_bench_sanitize/": "levels 1-10 timed before the timer's GPU spin; start 6 "
                                                         "repeats them with it (ladder/notes/l09.md)",
    "levels7_10_h200/start6_levels1_10_bench/gate": "square-8192 repeats of level 9 (the stopping gate's reps)",
    "levels7_10_h200/start7_square8192_l6_l9/": "square-8192 repeats of levels 6 and 9 (the stopping gate's reps)",
    "l9_run3/": "square-8192 repeats of levels 6 and 9 (the stopping gate's reps, ladder/notes/l09.md)",
    "grouped_fp8_h200/": "levels 11-14 (grouped, fp8): other contracts than the dense bf16 levels advise covers",
}


def build() -> dict:
    from roofline.ladder.evidence import bundle_rows, read_bench

    runs = []
    for rel in SOURCES:
        p = LADDER / rel
        runs.append({"run": p.name, "source": f"fixtures/ladder/{rel}", "rows": bundle_rows(read_bench(p))})
    return {"about": "timed rows of the recorded H200 ladder benches that `roofline ladder advise` uses by "
                     "default; built by tools/build_ladder_evidence.py from fixtures/ladder/ (do not edit)",
            "runs": runs}


def text(bundle: dict) -> str:
    return json.dumps(bundle, separators=(",", ":")) + "\n"


def main(argv: list[str]) -> int:
    from roofline.ladder.evidence import EVIDENCE_FILE

    out = ROOT / "roofline" / "data" / EVIDENCE_FILE
    new = text(build())
    if "--check" in argv:
        ok = out.is_file() and out.read_text(encoding="utf-8") == new
        print(f"{out.relative_to(ROOT)}: {'up to date' if ok else 'differs from its sources: rebuild it'}")
        return 0 if ok else 1
    out.write_text(new, encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)} ({len(new)} bytes, {len(SOURCES)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Public import path of stage C's re-run (kept for `from roofline import rerun` and for
`python -m roofline.rerun --build-dispatch ...`, the ladder's table builder). The code lives in
roofline/stagec/ (README "Layout"); this module only re-exports it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from roofline.ladder.dispatch import (  # noqa: F401
    DECODE_SKINNY_MAX_M, NOISE_BAND_ISOLATED, PREFILL_ALIGN, build_dispatch_table, choose_level,
    default_dispatch_table, dispatch_order, merge_benches, shape_class)
from roofline.opclasses import Problem, gemm_problems  # noqa: F401
from roofline.stagec.measurement import counters_record  # noqa: F401
from roofline.stagec.rerun import reanalyse, rerun_artifact  # noqa: F401
from roofline.stagec.writeback import write_back  # noqa: F401


if __name__ == "__main__":  # pragma: no cover - the table builder
    if len(sys.argv) >= 4 and sys.argv[1] in ("--build-dispatch", "--build-fp8-dispatch"):
        # BENCH ... [--class CLS BENCH ...] OUT: the benches after --class CLS inform that class only
        from roofline.ladder.dispatch import only_class
        benches, cls = [], None
        for a in sys.argv[2:-1]:
            if cls == "":
                cls = a
                continue
            if a == "--class":
                cls = ""
                continue
            b = json.loads(Path(a).read_text())
            benches.append(only_class(b, cls) if cls else b)
        tbl = build_dispatch_table(merge_benches(benches), dtype="fp8" if "fp8" in sys.argv[1] else "bf16")
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    elif len(sys.argv) >= 4 and sys.argv[1] in ("--build-grouped-dispatch", "--build-grouped-fp8-dispatch"):
        from roofline.ladder.dispatch import build_grouped_table
        benches = [json.loads(Path(p).read_text()) for p in sys.argv[2:-1]]
        tbl = build_grouped_table(merge_benches(benches), dtype="fp8" if "fp8" in sys.argv[1] else "bf16")
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    else:
        sys.exit("usage: python -m roofline.rerun --build-dispatch|--build-fp8-dispatch BENCH.json [BENCH.json ...] "
                 "[--class CLS BENCH.json ...] OUT.json\n"
                 "       python -m roofline.rerun --build-grouped-dispatch|--build-grouped-fp8-dispatch BENCH_MOE.json [...] OUT.json")

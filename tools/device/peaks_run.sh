#!/usr/bin/env bash
# One `roofline peaks measure` run on this machine start (the compute-roof envelopes, fixtures/peaks/README.md), then a short table.
#   usage (device machine, repo root):  bash tools/device/peaks_run.sh h200_run2
# Writes $OUT/<label>.yaml (the one-run envelope) and $OUT/<label>.raw.json (every shape's samples).
# Back here: copy <label>.raw.json to fixtures/peaks/runs/ and run the rebuild command of
# fixtures/peaks/README.md. Needs torch, PyYAML and click (the module runs from the tree).
set -u
label=${1:?usage: peaks_run.sh LABEL (e.g. h200_run2)}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
t0=$(date +%s)
python3 -m roofline.commands.peaks_measure --out "$OUT/$label.yaml" 2>&1 | grep -v "^gemm " ; rc=${PIPESTATUS[0]}
echo "rc $rc, wall $(( $(date +%s) - t0 )) s"
python3 - "$OUT/$label.raw.json" <<'PY'
import json, statistics, sys
raw = json.load(open(sys.argv[1]))
print(f"{'shape/layout':28s} " + " ".join(f"{d:>8s}" for d in ("bf16", "fp16", "fp8", "tf32", "fp32")) + "   TFLOP/s medians")
for key, per in raw["gemms_by_shape"].items():
    cells = []
    for d in ("bf16", "fp16", "fp8", "tf32", "fp32"):
        r = per.get(d)
        if r is None:
            cells.append(f"{'-':>8s}")
            continue
        m, n, k = r["shape"]
        cells.append(f"{statistics.median(2.0 * m * n * k / (t * 1e-3) for t in r['ms']) / 1e12:8.1f}")
    print(f"{key:28s} " + " ".join(cells))
PY

#!/usr/bin/env bash
# Stage C on the device: re-run every GEMM head of a Top-N built from a real profiled prefill
# (fixtures/rerun, made from fixtures/traces/prefill.json.gz) through the ladder, with counters.
# Usage (repo root, device image python3): bash tools/device/rerun_demo.sh  -> results in $OUT
set -u
export PYTHONPATH=${SNAP:-$PWD} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rerun_out}; mkdir -p "$OUT"
FIX=${FIX:-fixtures/rerun}; NAME=$(basename "$FIX")
work=$(mktemp -d); cp -r "$FIX"/. "$work/"; rm -rf "$work/rerun_h200"
echo "== ncu: $(ncu --version | tail -1)"
echo "== first compile of every level (not part of the timed re-run)"
python3 -c "
from roofline.ladder.build import get_kernel
from roofline.ladder.registry import LEVELS
for lv in LEVELS: get_kernel(lv); print('built', lv.file)
" 2>&1 | tail -12
echo "== GPU tests of the re-run"
python3 -m pytest -q -m gpu tests/test_rerun_gpu.py 2>&1 | tail -5
echo "== roofline rerun --counters (timed)"
t0=$(date +%s.%N)
python3 -m roofline.cli rerun "$work/profile/round_1/profile_roofline.json" --counters \
    --playbook-dir "$work/knowledge" 2>&1 | tail -20
t1=$(date +%s.%N)
python3 -c "print(f'== wall of the re-run with counters: {$t1 - $t0:.1f} s')"
mkdir -p "$OUT/$NAME"
cp "$work/profile/round_1/profile_roofline.json" "$work/profile/round_1/profile_roofline.md" "$OUT/$NAME/"
cp "$work/knowledge/backend_playbook.md" "$work/knowledge/backend_playbook.jsonl" "$OUT/$NAME/" 2>/dev/null
python3 - "$OUT/$NAME/profile_roofline.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
print(f"stage {a['stage']}")
print(f"{'kernel':44s} {'pred x':>7s} {'lvl':>3s} {'ladder ms':>10s} {'cuBLAS ms':>10s} {'in-run ms':>9s} {'meas x':>7s}  verdict")
for e in a["entries"]:
    m = e.get("measured")
    if not m:
        continue
    f = lambda v: "-" if v is None else f"{v:.4g}"
    print(f"{e['short_name'][:44]:44s} {f(e.get('attainable_speedup')):>7s} {m['ladder_level']:>3} "
          f"{f(m['ladder_t_ms']):>10s} {f(m['cublas_t_ms']):>10s} {f(m['current_t_ms']):>9s} "
          f"{f(m['measured_attainable_speedup']):>7s}  {m['verdict']}"
          + (f"  ctr dram={m['counters'].get('dram_bytes')}" if m.get('counters') else ""))
PY

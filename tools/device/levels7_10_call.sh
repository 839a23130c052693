#!/usr/bin/env bash
# The third ladder round's device call (repo root on the H200): install the project as a user would, then
#   STEP=check  the full check suite (200 random shapes + tails, K=1, NaN/Inf, poisoned output) on
#               $CHECK (default: every level and variant of the registry); then the serving bench
#               (prefill gate set, decode gate set, ragged) of the levels and variants beside cuBLAS
#   STEP=rep    square-8192: level 9 builds and cuBLAS, one fresh process per rep (machine-start reps)
#   STEP=san    compute-sanitizer memcheck/racecheck/synccheck on the builds in $SAN
# nvidia-smi dmon (SM clock, power) runs beside it; a short table is printed last.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
OUT=${OUT:-/tmp/levels7_10}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee $OUT/gpu.txt
nvidia-smi dmon -s pc -d 1 > $OUT/dmon.txt 2>&1 & DMON=$!
S="python3 -m roofline.ladder.device_suite"
case ${STEP:-check} in
check)
  $S check-isolated --targets ${CHECK:-$($S levels --contract gemm-bf16 --variants)} --limit-s 75 --out $OUT 2>&1 | tee $OUT/check.log | grep -E "^check|FAIL"
  $S bench --targets ${BENCH:-$($S levels --contract gemm-bf16)} --shapes ${SET:-serving} --tag all --out $OUT > $OUT/bench.log 2>&1; echo "bench rc=$?"
  ;;
rep)
  for i in $(seq 1 ${REPS:-2}); do
    $S bench --targets ${BENCH:-$($S levels --contract gemm-bf16)} --shapes square-8192 --tag rep$i --out $OUT > $OUT/rep$i.log 2>&1; echo "rep$i rc=$?"
    grep -E "^\| 8192x8192x8192" $OUT/rep$i.log
  done
  ;;
san)
  for tool in memcheck racecheck synccheck; do
    LADDER_LEVELS=${SANL:-} LADDER_SAN_VARIANTS=${SAN:-} timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize --contract gemm-bf16 > $OUT/$tool.log 2>&1
    echo "$tool rc=$?: $(grep -cE 'sanitize-mode.*: ok' $OUT/$tool.log) ok, $(grep -cE 'FAIL' $OUT/$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
  done
  ;;
esac
kill $DMON 2>/dev/null
python3 - "$OUT/dmon.txt" <<'PY'
import sys, statistics as st
# nvidia-smi dmon -s pc columns: gpu pwr gtemp mtemp mclk pclk
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
busy = [(float(r[1]), float(r[5])) for r in rows if len(r) == 6 and r[1].isdigit() and r[5].isdigit() and float(r[1]) > 200]
if busy:
    print(f"dmon: {len(busy)} busy seconds, power median {st.median(p for p, _ in busy):.0f} W (max {max(p for p, _ in busy):.0f}), "
          f"SM clock median {st.median(c for _, c in busy):.0f} MHz (min {min(c for _, c in busy):.0f})")
PY
[ -f $OUT/bench.log ] && sed -n '/^| level | geomean/,$p' $OUT/bench.log
exit 0

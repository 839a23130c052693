#!/bin/bash
# One device call for levels 11-15 (grouped MoE GEMMs, fp8), repo root on the H200, with
# PYTHONPATH=$PWD (the source tree finder maps roofline.ladder) or the project installed:
#   python3 -m roofline.ladder.prebuild .cubins       # on the CPU machine first: no NVRTC time here
#   bash tools/device/moe_fp8.sh                       # -> $OUT/x.tgz, summary printed last
# Stages (STAGES, in order): dense (levels 9-10 still pass: ws.cuh is theirs too), check (levels
# 11-14 and variants, forked children with time limits), san (compute-sanitizer memcheck,
# racecheck, synccheck on what passed), moe (bench-moe), fp8 (bench-fp8). BUDGET_S bounds it all.
export PYTHONUNBUFFERED=1
export LADDER_CUBIN_DIR=${LADDER_CUBIN_DIR:-$PWD/.cubins}
S="python3 -m roofline.ladder.device_suite"   # the one driver, for every contract
OUT=${OUT:-/tmp/x_out}; R=$OUT/r; mkdir -p $R
STAGES=${STAGES:-"dense check san moe fp8"}
TARGETS=${TARGETS:-$($S levels --contract gemm-fp8,grouped-bf16,grouped-fp8 --variants)}   # the registry's grouped and fp8 levels and variants
BUDGET_S=${BUDGET_S:-280}; T0=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
ls $LADDER_CUBIN_DIR 2>/dev/null | wc -l | sed 's/^/prebuilt cubins: /'
if has dense; then
  timeout ${DENSE_S:-60} $S check-isolated --targets ${DENSE:-9,10} --n-random 20 --limit-s 40 --out $R/dense > $R/dense.log 2>&1
  echo "dense rc=$?"; grep -E "^check" $R/dense.log
fi
if has diag; then   # where a build faults: one small case under memcheck (the faulting SASS offset)
  timeout 40 compute-sanitizer --tool memcheck --show-backtrace device $S sanitize --targets ${DIAG:-11} > $R/diag.log 2>&1
  echo "diag rc=$?"; grep -E "Illegal|illegal|at 0x|by thread|Address|ERROR SUMMARY|sanitize-mode" $R/diag.log | head -12
fi
PASS=$TARGETS
if has check; then
  CT=$(( $(left) - ${RESERVE_S:-110} )); [ $CT -gt ${CHECK_S:-90} ] && CT=${CHECK_S:-90}
  timeout $CT $S check-isolated --targets $TARGETS --n-random ${N_RANDOM:-24} --limit-s 60 --out $R > $R/check.log 2>&1
  echo "check rc=$?"; grep -E "^check|FAIL" $R/check.log | head -40
  PASS=$(cat $R/pass.txt 2>/dev/null)
fi
echo "passing: $PASS"
if has san && [ -n "$PASS" ]; then
  for tool in memcheck racecheck synccheck; do
    L=$(left); [ $L -lt ${SAN_MIN_LEFT:-60} ] && { echo "$tool: skipped (time)"; continue; }
    timeout ${SAN_S:-40} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize --targets $PASS > $R/$tool.log 2>&1
    echo "$tool rc=$?: $(grep -c ': ok' $R/$tool.log) ok, $(grep -c FAIL $R/$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tail -1)"
  done
fi
if has moe && [ -n "$PASS" ]; then
  timeout $(( $(left) - ${FP8_RESERVE_S:-50} )) $S bench-moe --targets $PASS --cases ${CASES:-all} --out $R > $R/moe.log 2>&1; echo "moe rc=$?"
  grep -E "^\|" $R/moe.log | cut -c1-200
fi
if has fp8 && [ -n "$PASS" ] && [ $(left) -gt 20 ]; then
  timeout $(( $(left) - 5 )) $S bench-fp8 --targets $PASS --shapes ${FP8_SHAPES:-all} --out $R > $R/fp8.log 2>&1; echo "fp8 rc=$?"
  grep -E "^\| 8192|geomean" $R/fp8.log
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"
tar -czf $OUT/x.tgz -C $OUT r

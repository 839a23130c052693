#!/usr/bin/env bash
# Round 7, one device call (notes/l13.md, notes/l15.md): where the time goes (ncu) in level 13 and l15_pp_m128
# beside their round-6 per-warp twins, their round-7 staged-scale twins and the torch op; the staged-scale
# builds (the unit's column scales in shared memory, ws.cuh SSC = 1) checked, timed and sanitized. The project
# installed as a user installs it (carried wheels, pip install -e of the checkout); cubins prebuilt on the CPU
# machine (LADDER_CUBIN_DIR). Stages in this order under one time budget (BUDGET_S):
#   check   the contract's check of the new builds (random + edge shapes / routings, NaN/Inf, float64 of the
#           dequantised inputs, poisoned output, beside torch) and the 512-expert cases (round6_extra check-e512)
#   ncu     ncu_where.py --round7: one launch each, caches flushed, stall reasons, tensor pipe, L2 / DRAM bytes,
#           SourceCounters (per-SASS stall samples; the source page exported as CSV)
#   square  fp8 8192^3 beside torch._scaled_mm (100 launches, L2 flushed), the passing builds
#   prefill fp8 grouped prefill, E 128, 2048-8192 tokens, beside torch._scaled_grouped_mm
#   memcheck, racecheck  compute-sanitizer on the new builds (sanitize-mode cases)
#   mini    the fp8 "mini" serving shapes (bench_moe_fp8.FP8_SHAPE_SETS) beside torch._scaled_mm (not in the default)
# STAGES picks stages (default: all but mini); CHECK_TARGETS the builds checked (default: the new ones; a build
# checked and failing is left out of the benches), FP8_T / MOE_T the timed sets, SQ_REPS the 8192^3 processes.
# NCU_PLAN the ncu_where.py plan (default --round7). The next call (not made yet) is meant as: NEW_SET=x-round7-next
# MOE_SET=x-round7-next-moe NCU_PLAN=--round7-next STAGES="check ncu prefill memcheck racecheck" CHECK_S=90.
# Call 1 (start11_round7/call1) ran the default; call 2 (call2) STAGES="check prefill square mini",
# CHECK_TARGETS=l15_pp_m128_ssc (call 1's check ended at its cap before it), SQ_REPS=2. -> $OUT/x.tgz (everything under $OUT/r), re-packed after each stage.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-250} - ($(date +%s) - T0) )); }
cap() { local l=$(( $(left) - ${2:-5} )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
S="python3 -m roofline.ladder.device_suite"; E="python3 tools/device/round6_extra.py"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader | tee $R/gpu.txt
NEW=$($S levels --set ${NEW_SET:-x-round7-new}); F=${FP8_T:-$($S levels --set x-round7-fp8)}; M=${MOE_T:-$($S levels --set ${MOE_SET:-x-round7-moe})}
CK=${CHECK_TARGETS:-$NEW}
has() { [[ " ${STAGES:-check ncu square prefill memcheck racecheck} " == *" $1 "* ]]; }
drop() { local ok; ok=$(sed -n 's/^check \([^:]*\): OK .*/\1/p' $R/check.log 2>/dev/null); echo "$1" | tr ',' '\n' | grep -vxF -f <(echo "$CK" | tr ',' '\n' | grep -vxF -f <(echo "$ok")) | paste -sd,; }
if has check; then
  timeout $(cap ${CHECK_S:-50} 200) $S check-isolated --targets $CK --n-random 5 --limit-s ${CHECK_S:-40} --out $R > $R/check.log 2>&1; echo "check rc=$?"
  grep -E "^check" $R/check.log | cut -c1-160; grep -E "FAIL" $R/check.log | head -5 | cut -c1-200
  if [ -z "${CHECK_TARGETS:-}" ]; then
    timeout $(cap 20 190) $E check-e512 --targets $(echo $NEW | tr ',' '\n' | grep l15 | paste -sd,) --out $R > $R/check_e512.log 2>&1
    echo "check-e512 rc=$?: $(grep -cE ': ok' $R/check_e512.log) ok"; grep -E "FAIL" $R/check_e512.log | head -3 | cut -c1-200
  fi
  F=$(drop "$F"); M=$(drop "$M"); pack
fi
echo "fp8: $F; moe: $M; == left $(left) s"
if has ncu; then
  timeout $(cap 75 120) ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__ops_path_tensor_src_fp8.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    --cache-control all --clock-control none -f -o $R/where python3 tools/device/ncu_where.py ${NCU_PLAN:---round7} > $R/ncu.log 2>&1
  echo "ncu rc=$?"; grep -E "WHERE_PLAN|ERR" $R/ncu.log | head -20
  ncu --import $R/where.ncu-rep --csv --page raw --print-units base > $R/where_raw.csv 2>$R/ncu_import.err
  timeout 20 ncu --import $R/where.ncu-rep --csv --page source --print-source sass 2>>$R/ncu_import.err | gzip > $R/where_src.csv.gz
  python3 tools/device/ncu_where.py --summarize $R/where_raw.csv $R/ncu.log $R/where.json | cut -c1-260
  pack; echo "== left $(left) s"
fi
has prefill && { timeout $(cap 60 45) $E bench-prefill --targets $M --min-reps 50 --out $R > $R/prefill.log 2>&1; echo "prefill rc=$?"; pack; }
if has square; then for rep in $(seq 1 ${SQ_REPS:-1}); do
  mkdir -p $R/sq$rep; timeout $(cap 30 40) $S bench-fp8 --targets $F --shapes square-8192 --tag fp8_square-8192 --min-reps 100 --out $R/sq$rep > $R/sq$rep.log 2>&1
  echo "square rep$rep rc=$?"; pack
done; fi
has mini && { timeout $(cap 45 10) $S bench-fp8 --targets $F --shapes mini --tag fp8_mini --min-reps 50 --out $R > $R/mini.log 2>&1; echo "mini rc=$?"; pack; }
if has memcheck; then
  timeout $(cap 25 20) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $S sanitize --targets $NEW > $R/x_memcheck.log 2>&1
  echo "memcheck rc=$?: $(grep -c ': ok' $R/x_memcheck.log) ok, $(grep -c FAIL $R/x_memcheck.log) FAIL; $(grep -E 'ERROR SUMMARY' $R/x_memcheck.log | tail -1)"; pack
fi
if has racecheck; then
  T=$(cap 40 2); timeout $T compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $S sanitize --targets $NEW > $R/x_racecheck.log 2>&1
  echo "racecheck rc=$? in ${T}s: $(grep -c ': ok' $R/x_racecheck.log) ok, $(grep -c FAIL $R/x_racecheck.log) FAIL; $(grep -E 'RACECHECK SUMMARY' $R/x_racecheck.log | tail -1)"; pack
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"
echo "--- 8192^3 (x torch._scaled_mm, p20-p80)"; grep -h "8192x8192x8192" $R/sq*.log | grep -v "baseline" | cut -d'|' -f3,5 | sed 's/^/ /'
echo "--- mini"; grep -E "geomean|best level" $R/mini.log 2>/dev/null; grep -E "^\| [0-9]+x" $R/mini.log 2>/dev/null | grep -v baseline | cut -d'|' -f2,3,5 | cut -c1-110
echo "--- prefill E128"; grep -E "^\| .*prefill" $R/prefill.log | grep -v baseline | cut -d'|' -f2,3,5 | cut -c1-120

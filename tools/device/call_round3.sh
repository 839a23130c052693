#!/usr/bin/env bash
# One device call of the third round (a third machine start), as a user installs it:
#   fp8 8192^3 beside torch._scaled_mm (this start's row of the three-start target);
#   the new grouped / fp8 builds (registry set x-round3): check, compute-sanitizer, bench-moe decode;
#   racecheck of the round-2 builds it did not finish (set racecheck-round3);
#   the new mid-shape builds (set mid-round3): check, compute-sanitizer, bench beside cuBLAS;
#   ncu of the builds the tables name where a target is still missed (ncu_where.py --round3).
# -> $OUT/x.tgz (everything under $OUT/r), the last stage's table printed.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )); }
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
X="python3 -m roofline.ladder.device_x"; S="python3 -m roofline.ladder.device_suite"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
timeout 45 $X bench-fp8 --shapes square-8192 --targets 13 --out $R > $R/fp8.log 2>&1; echo "fp8 rc=$?"; grep -E "^\| 8192" $R/fp8.log
X3=$($X levels --set x-round3); M3=$($S levels --set mid-round3); RC=$($X levels --set racecheck-round3)
timeout 70 $X check --targets $X3 --n-random 18 --limit-s 40 --out $R > $R/check.log 2>&1; echo "check rc=$?"; grep -E "^check|FAIL" $R/check.log | cut -c1-160
timeout 80 $S check-isolated --targets $M3 --n-random 20 --limit-s 40 --out $R/dense > $R/dense.log 2>&1; echo "dense rc=$?"; grep -E "^check" $R/dense.log | cut -c1-120
pack
for tool in memcheck racecheck synccheck; do
  T=${SAN_S:-30}; [ $tool = racecheck ] && T=${RACE_S:-70}
  timeout $T compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $X sanitize \
    --targets $X3$([ $tool = racecheck ] && echo ",$RC") > $R/x_$tool.log 2>&1
  echo "x $tool rc=$?: $(grep -c ': ok' $R/x_$tool.log) ok, $(grep -c FAIL $R/x_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/x_$tool.log | tail -1)"
  LADDER_LEVELS=9 LADDER_SAN_VARIANTS=$(echo $M3 | tr ',' '\n' | grep -v '^[0-9]*$' | paste -sd,) timeout $T \
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize > $R/d_$tool.log 2>&1
  echo "dense $tool rc=$?: $(grep -cE 'sanitize-mode.*: ok' $R/d_$tool.log) ok, $(grep -c FAIL $R/d_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/d_$tool.log | tail -1)"
done
pack; echo "== left $(left) s"
timeout 75 $X bench-moe --targets $X3 --cases decode --out $R > $R/moe.log 2>&1; echo "moe rc=$?"; grep -E "^\|" $R/moe.log | cut -c1-150
pack; echo "== left $(left) s"
L=$(( $(left) - 100 )); [ $L -gt 90 ] && L=90
timeout $L $S bench --shapes mid --min-reps 30 --tag mid --out $R --targets $M3 > $R/mid.log 2>&1; echo "mid rc=$?"
pack; echo "== left $(left) s"
L=$(( $(left) - 15 )); [ $L -gt 110 ] && L=110
timeout $L ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum \
  --cache-control all --clock-control none -f -o $R/where python3 tools/device/ncu_where.py --round3 > $R/ncu.log 2>&1
echo "ncu rc=$?"
ncu --import $R/where.ncu-rep --csv --page raw --print-units base > $R/where_raw.csv 2>$R/ncu_import.err
python3 tools/device/ncu_where.py --summarize $R/where_raw.csv $R/ncu.log $R/where.json | cut -c1-200
rm -f $R/where.ncu-rep; pack
python3 -m roofline.ladder.targets $R/bench_mid.json $R/bench_moe.json 2>&1 | cut -c1-170
echo "== elapsed $(( $(date +%s) - T0 )) s"

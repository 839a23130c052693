#!/usr/bin/env bash
# One device call of the third round (a third machine start), as a user installs it, in priority
# order under one time budget (BUDGET_S):
#   fp8 8192^3 beside torch._scaled_mm (this start's row of the three-start target);
#   the new grouped / fp8 builds (registry set x-round3) and mid-shape builds (set mid-round3): check;
#   bench-moe decode (x-round3) and the mid shapes beside cuBLAS (mid-round3);
#   compute-sanitizer memcheck, synccheck, racecheck of both sets (racecheck also of the round-2
#   builds it did not finish: set racecheck-round3), each tool inside what is left;
#   ncu of the builds the tables name where a target is still missed, if time is left.
# -> $OUT/x.tgz (everything under $OUT/r), re-packed after each stage.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-530} - ($(date +%s) - T0) )); }
cap() { local l=$(( $(left) - ${2:-5} )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
S="python3 -m roofline.ladder.device_suite"   # the one driver, for every contract
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
timeout 45 $S bench-fp8 --shapes square-8192 --targets 13 --out $R > $R/fp8.log 2>&1; echo "fp8 rc=$?"; grep -E "^\| 8192" $R/fp8.log
X3=$($S levels --set x-round3); M3=$($S levels --set mid-round3); RC=$($S levels --set racecheck-round3)
MV=$(echo $M3 | tr ',' '\n' | grep -v '^[0-9]*$' | paste -sd,)
timeout 55 $S check-isolated --targets $X3 --n-random 12 --limit-s 30 --out $R > $R/check.log 2>&1; echo "check rc=$?"; grep -E "^check|FAIL" $R/check.log | cut -c1-160
timeout 60 $S check-isolated --targets $M3 --n-random 12 --limit-s 25 --out $R/dense > $R/dense.log 2>&1; echo "dense rc=$?"; grep -E "^check" $R/dense.log | cut -c1-120
pack; echo "== left $(left) s"
timeout $(cap 70 250) $S bench-moe --targets $(cat $R/pass.txt) --cases decode --out $R > $R/moe.log 2>&1; echo "moe rc=$?"
python3 -m roofline.ladder.targets $R/bench_moe.json 2>&1 | cut -c1-170
pack; echo "== left $(left) s"
timeout $(cap 75 180) $S bench --shapes mid --min-reps 20 --tag mid --out $R --targets $(cat $R/dense/pass.txt) > $R/mid.log 2>&1; echo "mid rc=$?"
python3 -m roofline.ladder.targets $R/bench_mid.json 2>&1 | cut -c1-170
pack; echo "== left $(left) s"
for tool in memcheck synccheck racecheck; do
  T=$(cap $([ $tool = racecheck ] && echo 60 || echo 25) 10)
  timeout $T compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize \
    --targets $X3$([ $tool = racecheck ] && echo ",$RC") > $R/x_$tool.log 2>&1
  echo "x $tool rc=$? in ${T}s: $(grep -c ': ok' $R/x_$tool.log) ok, $(grep -c FAIL $R/x_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/x_$tool.log | tail -1)"
  T=$(cap $([ $tool = racecheck ] && echo 60 || echo 25) 10)
  LADDER_LEVELS=9 LADDER_SAN_VARIANTS=$MV timeout $T \
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize > $R/d_$tool.log 2>&1
  echo "dense $tool rc=$? in ${T}s: $(grep -cE 'sanitize-mode.*: ok' $R/d_$tool.log) ok, $(grep -c FAIL $R/d_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/d_$tool.log | tail -1)"
  pack
done
echo "== left $(left) s"
if [ $(left) -gt 60 ]; then
  timeout $(cap 100 8) ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum \
    --cache-control all --clock-control none -f -o $R/where python3 tools/device/ncu_where.py --round3 > $R/ncu.log 2>&1
  echo "ncu rc=$?"
  ncu --import $R/where.ncu-rep --csv --page raw --print-units base > $R/where_raw.csv 2>$R/ncu_import.err
  python3 tools/device/ncu_where.py --summarize $R/where_raw.csv $R/ncu.log $R/where.json | cut -c1-200
  rm -f $R/where.ncu-rep; pack
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Round 5, first device call (item 1: the fp8 grouped prefill level 15), as a user installs
# the project (pip install of the checkout; the image has numpy, cupy, torch, click, pyyaml), in
# priority order under one time budget (BUDGET_S):
#   check of level 15 and its builds (random + edge routings, NaN/Inf, float64 of the dequantised
#   inputs, poisoned output, beside torch._scaled_grouped_mm); compute-sanitizer memcheck, racecheck,
#   synccheck on their sanitize-mode cases; bench-moe prefill (2048/4096/8192 tokens, E 128, top-8)
#   of the passing fp8 builds beside torch._scaled_grouped_mm (STAGES check); then, as STAGES names them,
#   the coverage cases (cover), ncu of level 15 beside torch (ncu), the grouped/fp8 GPU tests (gpu).
# -> $OUT/x.tgz (everything under $OUT/r), re-packed after each stage.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
export LADDER_CUBIN_DIR=$PWD/.cubins
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-400} - ($(date +%s) - T0) )); }
cap() { local l=$(( $(left) - ${2:-5} )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
S="python3 -m roofline.ladder.device_suite"   # the one driver, for every contract
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used --format=csv,noheader | tee $R/gpu.txt
T5=$($S levels --set x-round5)
if [[ " ${STAGES:-check bench sanitize} " == *" check "* ]]; then
timeout $(cap 90) $S check-isolated --targets $T5 --n-random 12 --limit-s 40 --out $R > $R/check.log 2>&1; echo "check rc=$?"; grep -E "^check|FAIL" $R/check.log | cut -c1-220
pack; echo "== left $(left) s"
timeout $(cap 150 60) $S bench-moe --targets $(cat $R/pass.txt) --cases prefill --min-reps 50 --out $R > $R/moe.log 2>&1; echo "moe rc=$?"
grep -E "prefill" $R/moe.log | grep -v "^moe" | cut -c1-200
pack; echo "== left $(left) s"
for tool in memcheck synccheck racecheck; do
  T=$(cap $([ $tool = racecheck ] && echo 80 || echo 30) 10)
  timeout $T compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize --targets $T5 > $R/x_$tool.log 2>&1
  echo "x $tool rc=$? in ${T}s: $(grep -c ': ok' $R/x_$tool.log) ok, $(grep -c FAIL $R/x_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/x_$tool.log | tail -1)"
  pack
done
fi
echo "== left $(left) s"
if [[ " ${STAGES:-} " == *" rerun "* ]]; then   # roofline rerun --counters of the fp8 MoE trace's grouped head
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  W=$R/fp8run; mkdir -p $W; cp -r fp8run/profile $W/
  timeout $(cap 110 10) roofline rerun $W/profile/round_1/profile_roofline.json --entry device_kernel --counters > $R/rerun.log 2>&1
  echo "rerun rc=$?"; grep -v "it/s\|s/it" $R/rerun.log | tail -8 | cut -c1-220; pack
fi
if [[ " ${STAGES:-} " == *" cover "* ]] && [ $(left) -gt 60 ]; then
  timeout $(cap 120 10) $S bench-moe --targets $($S levels --set cover-round5) --cases cover --min-reps 30 --out $R > $R/cover.log 2>&1
  echo "cover rc=$?"; grep -E "^moe" $R/cover.log | cut -c1-160; grep -cE "refused" $R/cover.log; pack
fi
if [[ " ${STAGES:-} " == *" ncu "* ]] && [ $(left) -gt 40 ]; then
  timeout $(cap 75 5) ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_fp8.sum \
    --cache-control all --clock-control none -f -o $R/where python3 tools/device/ncu_where.py --round5 > $R/ncu.log 2>&1
  echo "ncu rc=$?"
  ncu --import $R/where.ncu-rep --csv --page raw --print-units base > $R/where_raw.csv 2>$R/ncu_import.err
  python3 tools/device/ncu_where.py --summarize $R/where_raw.csv $R/ncu.log $R/where.json | cut -c1-260
  gzip -f $R/where_raw.csv; rm -f $R/where.ncu-rep; pack
fi
if [[ " ${STAGES:-} " == *" gpu "* ]] && [ $(left) -gt 30 ]; then
  timeout $(cap 90 3) python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_ladder_moe_fp8_gpu.py > $R/gpu_tests.log 2>&1
  echo "gpu tests rc=$?: $(tail -1 $R/gpu_tests.log)"; pack
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"

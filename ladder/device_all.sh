#!/bin/bash
# The whole device call for the ladder (run from the repo root on the H200):
#   bash ladder/device_all.sh      -> logs + JSON under $OUT, bench table printed last
# Order: SASS summary, smoke per new level (a hung or broken level is dropped from the rest),
# check (all levels, 200+ random shapes), bench (issue6 shape set, all levels + cuBLAS),
# overlap (level 5 depth 1/2/4, level 6 grouped vs row-major), compute-sanitizer
# memcheck/racecheck/synccheck on small shapes (levels given by SAN_LEVELS, default the new ones),
# GPU pytest. Stages have their own time limits.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/ladder_out}; mkdir -p "$OUT"
NEW_LEVELS=${NEW_LEVELS:-4 5 6}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python3 -c "import cupy, torch, numpy; print('cupy', cupy.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
K=ladder/kernels/sm90
for f in l04_tma l05_pipeline l06_persistent; do
  nvcc -gencode arch=compute_90a,code=sm_90a -std=c++17 -cubin -I $K $K/$f.cu -o /tmp/$f.cubin \
    && cuobjdump -sass /tmp/$f.cubin > $OUT/sass_$f.txt \
    && echo "SASS $f: HGMMA $(grep -c HGMMA $OUT/sass_$f.txt), UTMALDG $(grep -c UTMALDG $OUT/sass_$f.txt), UTMASTG $(grep -c UTMASTG $OUT/sass_$f.txt), LDL/STL $(grep -cE 'LDL|STL' $OUT/sass_$f.txt)"
done
PASS="1,2,3"
for l in $NEW_LEVELS; do
  timeout ${SMOKE_S:-90} python3 -m roofline.ladder.device_suite smoke --level $l > "$OUT/smoke_l$l.log" 2>&1; rc=$?
  echo "smoke L$l rc=$rc"; grep -E "smoke|diag|out\[|ref\[|Error|error" "$OUT/smoke_l$l.log" | head -12
  [ $rc -eq 0 ] && PASS="$PASS,$l"
done
export LADDER_LEVELS=$PASS; echo "levels passing smoke: $LADDER_LEVELS"
echo "== check"; timeout ${CHECK_S:-200} python3 -m roofline.ladder.device_suite check --n-random 200 --out "$OUT" > "$OUT/check.log" 2>&1; echo "check rc=$?"
grep -E "check:|wrong kernel|FAIL|SUITE|Error|error" "$OUT/check.log" | head -30
echo "== bench (issue6)"; timeout ${BENCH_S:-200} python3 -m roofline.ladder.device_suite bench --shapes issue6 --out "$OUT" > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
echo "== overlap"; timeout ${OVERLAP_S:-120} python3 -m roofline.ladder.device_suite overlap --out "$OUT" > "$OUT/overlap.log" 2>&1; echo "overlap rc=$?"
grep -E "variant|FAIL|^\| [48]" "$OUT/overlap.log" | head -30
SAN=$(echo "$PASS" | tr ',' '\n' | grep -E "^(${SAN_LEVELS:-4|5|6})$" | paste -sd,)
for tool in memcheck racecheck synccheck; do
  echo "== $tool (levels $SAN)"; LADDER_LEVELS=$SAN timeout ${SAN_S:-100} compute-sanitizer --tool $tool --error-exitcode 9 python3 -m roofline.ladder.device_suite sanitize > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK|SUITE|sanitize-mode|Error" "$OUT/$tool.log" | tail -14
done
if [ -n "$PYTEST" ]; then
  echo "== pytest"; timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_ladder_build.py tests/test_ladder_registry.py tests/test_ladder_gpu.py > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -4 "$OUT/pytest.log"
fi
echo "== bench table (issue6)"; grep -E "^\|" "$OUT/bench.log"; grep -E "ceiling|SUITE" "$OUT/bench.log"

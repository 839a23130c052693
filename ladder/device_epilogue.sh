#!/bin/bash
# Second device call of issue 6 (repo root, H200): level 6's epilogue variants (check 200+ shapes,
# bench beside levels 5-6), compute-sanitizer on levels 4-6 + the TMA-store variant with host
# API error reports off (cuda.bindings' cuGetProcAddress probing is not a kernel error), the GPU
# pytest, and a second issue6 bench run (reproducibility).
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/ladder_out}; mkdir -p "$OUT"
timeout 60 python3 -c "
from roofline.ladder import check; from roofline.ladder.registry import VARIANTS
for s in [(128,128,64),(300,200,72),(1500,2900,77),(4096,4096,320),(129,257,33)]:
    r = check.check_shape(VARIANTS['l06_tma_store'], *s, seed=4); print('smoke tma_store', s, 'ok' if r.ok else 'FAIL ' + r.reason)
" 2>&1 | tail -6; echo "smoke rc=${PIPESTATUS[0]}"
echo "== epilogue"; timeout ${EPI_S:-150} python3 -m roofline.ladder.device_suite epilogue --n-random 200 --out "$OUT" > "$OUT/epilogue.log" 2>&1; echo "epilogue rc=$?"
grep -E "variant|FAIL|^\| " "$OUT/epilogue.log" | grep -v "^|---" | head -40
for tool in memcheck racecheck synccheck; do
  echo "== $tool"; LADDER_LEVELS=4,5,6 LADDER_SAN_VARIANTS=l06_tma_store timeout ${SAN_S:-75} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 -m roofline.ladder.device_suite sanitize > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SUITE|FAIL|Invalid|Race|Error" "$OUT/$tool.log" | tail -5; grep -c "sanitize-mode.*: ok" "$OUT/$tool.log"
done
echo "== pytest gpu"; timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_ladder_gpu.py > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -3 "$OUT/pytest.log"
echo "== bench run 2 (issue6)"; mkdir -p "$OUT/run2"; timeout ${BENCH_S:-120} python3 -m roofline.ladder.device_suite bench --shapes issue6 --out "$OUT/run2" > "$OUT/bench_run2.log" 2>&1; echo "bench rc=$?"
grep -E "^\| (4096x4096x4096|8192x8192x8192|8192x28672x4096) \| [0356]" "$OUT/bench_run2.log"

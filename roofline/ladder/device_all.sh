#!/bin/bash
# The whole device call for the ladder (run from the repo root on the H200):
#   bash roofline/ladder/device_all.sh      -> logs + JSON under $OUT, bench table printed last
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/ladder_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python3 -c "import cupy, torch, numpy; print('cupy', cupy.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
K=roofline/ladder/kernels/sm90
nvcc -gencode arch=compute_90a,code=sm_90a -std=c++17 -cubin -I $K $K/l03_grid.cu -o /tmp/l03.cubin \
  && cuobjdump -sass /tmp/l03.cubin > /tmp/sass_l03.txt \
  && echo "SASS l03: HGMMA $(grep -c HGMMA /tmp/sass_l03.txt), LDL/STL $(grep -cE 'LDL|STL' /tmp/sass_l03.txt), LDG.128 $(grep -c 'LDG.E.128' /tmp/sass_l03.txt)"
echo "== check"; timeout 240 python3 -m roofline.ladder.device_suite check --n-random 200 --out "$OUT" > "$OUT/check.log" 2>&1; echo "check rc=$?"
grep -E "check:|wrong kernel|FAIL|SUITE|Error|error" "$OUT/check.log" | head -40
for tool in memcheck racecheck; do
  echo "== $tool"; timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m roofline.ladder.device_suite sanitize > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SUITE|sanitize-mode" "$OUT/$tool.log" | tail -12
done
echo "== pytest"; timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_ladder_build.py tests/test_ladder_registry.py tests/test_ladder_gpu.py > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -4 "$OUT/pytest.log"
echo "== variants (v1 serial copy vs current)"; timeout 200 python3 -m roofline.ladder.device_suite variants --out "$OUT" 2>&1 | grep -vE "^device|^SUITE OK"; echo "variants rc=${PIPESTATUS[0]}"
echo "== bench"; timeout 240 python3 -m roofline.cli ladder bench --out "$OUT/bench.json" 2> "$OUT/bench_stderr.log"; echo "bench rc=$?"

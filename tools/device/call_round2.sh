#!/usr/bin/env bash
# One device call of the second round (as a user installs it): the dense builds re-checked (ws.cuh
# and the K-padding kernel changed; the mid-shape builds are new), the new and changed grouped /
# fp8 builds checked, under compute-sanitizer, then timed beside the library op (every MoE case,
# fp8 8192^3 on this machine start), then the mid shapes beside cuBLAS. -> $OUT/x.tgz, $OUT/mid.tgz
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
T0=$(date +%s)
STAGES=${STAGES:-"dense check san moe fp8"} DENSE=${DENSE:-$(python3 -m roofline.ladder.device_suite levels --set mid)} DENSE_S=${DENSE_S:-90} \
  CHECK_S=${CHECK_S:-120} SAN_S=${SAN_S:-33} SAN_MIN_LEFT=${SAN_MIN_LEFT:-150} RESERVE_S=${RESERVE_S:-230} \
  N_RANDOM=${N_RANDOM:-18} CASES=${CASES:-all} FP8_SHAPES=${FP8_SHAPES:-square-8192} BUDGET_S=${BUDGET_S:-440} FP8_RESERVE_S=${FP8_RESERVE_S:-30} \
  TARGETS=${TARGETS:-$(python3 -m roofline.ladder.device_suite levels --set x-round2)} \
  bash tools/device/moe_fp8.sh
M=$OUT/m; mkdir -p $M
L=$(( ${TOTAL_S:-545} - ($(date +%s) - T0) )); [ $L -gt 100 ] && L=100
timeout $L python3 -m roofline.ladder.device_suite bench --shapes mid --min-reps 30 --tag mid --out $M \
  --targets ${MID_TARGETS:-$(python3 -m roofline.ladder.device_suite levels --set mid)} > $M/mid.log 2>&1
echo "mid rc=$? in ${L}s"; grep -E "^\|" $M/mid.log | cut -c1-140 | head -120
tar -czf $OUT/mid.tgz -C $OUT m

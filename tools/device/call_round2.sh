#!/usr/bin/env bash
# One device call of the second round on levels 11-14 (as a user installs it): the new and changed
# grouped / fp8 builds checked, under compute-sanitizer, then timed beside the library op (every
# MoE case; fp8 8192^3 and the serving shapes). -> $OUT/x.tgz (tools/device/moe_fp8.sh's r/).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
STAGES=${STAGES:-"check san moe fp8"} CHECK_S=${CHECK_S:-140} SAN_S=${SAN_S:-35} SAN_MIN_LEFT=${SAN_MIN_LEFT:-150} RESERVE_S=${RESERVE_S:-330} \
  N_RANDOM=${N_RANDOM:-18} CASES=${CASES:-all} FP8_SHAPES=${FP8_SHAPES:-all} BUDGET_S=${BUDGET_S:-530} FP8_RESERVE_S=${FP8_RESERVE_S:-125} \
  TARGETS=${TARGETS:-$(python3 -m roofline.ladder.device_x levels --set x-round2)} \
  bash tools/device/moe_fp8.sh

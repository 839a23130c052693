#!/usr/bin/env bash
# One device call (the first of a round on levels 11-14): level 11's bf16 builds checked, sanitized
# and timed now that each gets its own weight layout; fp8 8192^3 on this machine start; the mid
# shapes over the dense levels and their variants beside cuBLAS; ncu of the cases whose targets
# were missed (tools/device/ncu_where.py). Everything lands in $OUT/x.tgz (re-packed after each stage).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
if [[ " ${STAGES:-l11 fp8 mid ncu} " == *" l11 "* ]]; then
  OUT=$R/l11 STAGES="check san moe" TARGETS=${L11_TARGETS:-$(python3 -m roofline.ladder.device_suite levels --contract gemm-fp8,grouped-bf16,grouped-fp8 --variants)} CASES=decode \
    BUDGET_S=${L11_S:-200} RESERVE_S=100 SAN_S=30 SAN_MIN_LEFT=70 N_RANDOM=18 bash tools/device/moe_fp8.sh 2>&1 | tail -40
  pack; echo "== left $(left) s"
fi
if [[ " ${STAGES:-l11 fp8 mid ncu} " == *" fp8 "* ]]; then
  timeout 45 python3 -m roofline.ladder.device_suite bench-fp8 --shapes square-8192 --targets ${FP8_TARGETS:-13} --out $R > $R/fp8.log 2>&1
  echo "fp8 rc=$?"; grep -E "^\| 8192" $R/fp8.log; pack; echo "== left $(left) s"
fi
if [[ " ${STAGES:-l11 fp8 mid ncu} " == *" mid "* ]]; then
  timeout ${MID_S:-90} python3 -m roofline.ladder.device_suite bench --shapes mid --min-reps 20 --tag mid --out $R \
    --targets ${MID_TARGETS:-$(python3 -m roofline.ladder.device_suite levels --set mid)} > $R/mid.log 2>&1
  echo "mid rc=$?"; grep -E "^\|" $R/mid.log | head -60 | cut -c1-150; pack; echo "== left $(left) s"
fi
if [[ " ${STAGES:-l11 fp8 mid ncu} " == *" ncu "* ]]; then
  L=$(( $(left) - 25 )); [ $L -gt 200 ] && L=200
  timeout $L ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum \
    --cache-control all --clock-control none -f -o $R/where python3 tools/device/ncu_where.py ${NCU_CASES:-} > $R/ncu.log 2>&1
  echo "ncu rc=$?"; grep -E "WHERE_PLAN|ERR" $R/ncu.log | head -50
  ncu --import $R/where.ncu-rep --csv --page raw --print-units base > $R/where_raw.csv 2>$R/ncu_import.err
  python3 tools/device/ncu_where.py --summarize $R/where_raw.csv $R/ncu.log $R/where.json | cut -c1-220
  pack
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"

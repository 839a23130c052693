#!/usr/bin/env bash
# Round 8 (round 8), one device call: the held-out-like MoE and fp8 dense shapes (bench_moe_fp8 CASE_SETS
# heldout-decode / heldout-prefill, FP8_SHAPE_SETS heldout) beside the torch ops in the same process, every build
# checked on each case before it is timed (poisoned output, random e4m3 / bf16 inputs, float64 reference, beside
# torch), then ncu on the decode cases whose HBM targets need a where-the-time-goes note. The kernels are round 7's
# (the restructure of ws.cuh into policies left the SASS of all 69 builds identical: fixtures/ladder/sass_identity),
# so no new build needs the sanitizers. Source checkout on PYTHONPATH, cubins prebuilt on the CPU machine
# (LADDER_CUBIN_DIR=.cubins: python3 -m roofline.ladder.prebuild .cubins TARGETS). STAGES picks stages (default
# "decode fp8 prefill ncu"), BUDGET_S the total, NCU_SPECS the ncu_where.py cases or plan (call 1: the
# default, --round8; call 3: --round8-prefill-dense with STAGES=ncu: the prefill and fp8 dense cases). -> $OUT/x.tgz (everything under $OUT/r), re-packed after each stage.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )); }
cap() { local l=$(( $(left) - ${2:-5} )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
export PYTHONPATH=$PWD LADDER_CUBIN_DIR=$PWD/.cubins
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
S="python3 -m roofline.ladder.device_suite"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader | tee $R/gpu.txt
has() { [[ " ${STAGES:-decode fp8 prefill ncu} " == *" $1 "* ]]; }
MD=${MOE_DECODE_T:-$($S levels --set x-round8-decode)}; MP=${MOE_PREFILL_T:-$($S levels --set x-round8-prefill)}
F=${FP8_T:-$($S levels --set x-round8-fp8)}
if has decode; then
  timeout $(cap 230 230) $S bench-moe --targets $MD --cases heldout-decode --tag heldout_decode --min-reps 50 --out $R > $R/decode.log 2>&1
  echo "decode rc=$? left $(left)"; pack
fi
if has fp8; then
  timeout $(cap 110 110) $S bench-fp8 --targets $F --shapes heldout --tag fp8_heldout --min-reps 50 --out $R > $R/fp8.log 2>&1
  echo "fp8 rc=$? left $(left)"; pack
fi
if has prefill; then
  timeout $(cap 110 60) $S bench-moe --targets $MP --cases heldout-prefill --tag heldout_prefill --min-reps 30 --out $R > $R/prefill.log 2>&1
  echo "prefill rc=$? left $(left)"; pack
fi
if has ncu; then
  timeout $(cap 70 3) ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
    --section Occupancy --section WarpStateStats --section SchedulerStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    --cache-control all --clock-control none -f -o $R/where python3 tools/device/ncu_where.py \
    ${NCU_SPECS:---round8} > $R/ncu.log 2>&1
  echo "ncu rc=$?"; grep -E "WHERE_PLAN|ERR|rror" $R/ncu.log | head -20 | cut -c1-200
  ncu --import $R/where.ncu-rep --csv --page raw --print-units base > $R/where_raw.csv 2>$R/ncu_import.err
  python3 tools/device/ncu_where.py --summarize $R/where_raw.csv $R/ncu.log $R/where.json | cut -c1-240
  rm -f $R/where.ncu-rep; gzip -f $R/where_raw.csv; pack
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"
for f in decode prefill; do echo "--- $f (x torch, %HBM peak)"; grep -E "^\| [a-z0-9]+-(decode|prefill)" $R/$f.log 2>/dev/null | grep -v baseline | awk -F'|' '{printf "%s|%s|%s|%s\n",$2,$3,$5,$7}' | cut -c1-120; done
echo "--- fp8 dense"; grep -E "geomean|best level" $R/fp8.log 2>/dev/null; grep -E "^\| [0-9]+x" $R/fp8.log 2>/dev/null | grep -v baseline | cut -d'|' -f2,3,5 | cut -c1-110

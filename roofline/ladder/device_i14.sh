#!/bin/bash
# Issue 14's device call (repo root on the H200): bash roofline/ladder/device_i14.sh
# SASS summary of the new files; full check suite of levels 7-10 and their variants (each in a
# forked child with a time limit); bench of levels 6-10 + cuBLAS on the issue-14 shape set
# (>= 50 timed launches, L2 flushed, same process); variants of levels 9-10 beside them;
# compute-sanitizer memcheck/racecheck/synccheck on the passing new levels; the summary table
# last. STAGES (default "sass check bench variants san") picks stages; BUDGET_S the wall budget.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/ladder_out}; mkdir -p "$OUT"
STAGES=${STAGES:-"sass check bench variants san"}
BUDGET_S=${BUDGET_S:-400}; T0=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
K=roofline/ladder/kernels/sm90
if has sass; then
  for f in l07_warp_specialized l08_cluster l09_multi_consumer l10_splitk; do
    nvcc -gencode arch=compute_90a,code=sm_90a -std=c++17 -cubin -I $K $K/$f.cu -o /tmp/$f.cubin \
      && cuobjdump -sass /tmp/$f.cubin > $OUT/sass_$f.txt \
      && echo "SASS $f: HGMMA $(grep -c HGMMA $OUT/sass_$f.txt), UTMALDG $(grep -c UTMALDG $OUT/sass_$f.txt), MULTICAST $(grep -c 'UTMALDG.*MULTICAST' $OUT/sass_$f.txt), SETMAXREG $(grep -c SETMAXREG $OUT/sass_$f.txt), LDL/STL $(grep -cE 'LDL|STL' $OUT/sass_$f.txt)"
  done
fi
TARGETS=${TARGETS:-7,8,9,10,l09_coop_nocluster,l09_pingpong,l09_pingpong_nocluster,l09_pingpong_wide,l09_coop_regstore,l07_regstore,l10_m128,l10_nosplit}
PASS=$TARGETS
if has check; then
  echo "== check (left $(left) s)"
  timeout $(( $(left) - 30 )) python3 -m roofline.ladder.device_i14 check --targets $TARGETS --limit-s ${CHECK_LIMIT_S:-60} > "$OUT/check.log" 2>&1; echo "check rc=$?"
  grep -E "^check|FAIL" "$OUT/check.log" | head -40
  PASS=$(cat "$OUT/pass.txt" 2>/dev/null)
fi
LEVELS_OK=$(echo "$PASS" | tr ',' '\n' | grep -E '^[0-9]+$' | paste -sd,)
echo "passing: $PASS (levels $LEVELS_OK)"
if has bench && [ $(left) -gt 60 ]; then
  echo "== bench ${SET:-issue14} (left $(left) s)"
  timeout $(( $(left) - 20 )) python3 -m roofline.ladder.device_i14 bench --targets ${BENCH_BASE:-6},$LEVELS_OK --set ${SET:-issue14} > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
fi
if has variants && [ $(left) -gt 50 ]; then
  echo "== variants (left $(left) s)"
  timeout $(( $(left) - 15 )) python3 -m roofline.ladder.device_i14 variants --targets $PASS > "$OUT/variants.log" 2>&1; echo "variants rc=$?"
  grep -E "^\| (8192x8192x8192|64x4096x4096|16x4096x4096|256x28672x8192|4096x28672)" "$OUT/variants.log" | head -30
fi
if has san; then
  SANV=$(echo "$PASS" | tr ',' '\n' | grep -vE '^[0-9]+$' | paste -sd,)
  for tool in memcheck racecheck synccheck; do
    L=$(left); [ $L -lt 25 ] && { echo "$tool: skipped (no time left)"; continue; }
    echo "== $tool (levels $LEVELS_OK, variants $SANV; left $L s)"
    LADDER_LEVELS=$LEVELS_OK LADDER_SAN_VARIANTS=${SAN_VARIANTS-$SANV} timeout $(( L < 150 ? L - 10 : 140 )) compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 -m roofline.ladder.device_suite sanitize > "$OUT/$tool.log" 2>&1
    echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK|SUITE|FAIL|Error" "$OUT/$tool.log" | tail -6
  done
fi
echo "== summary (elapsed $(( $(date +%s) - T0 )) s)"
grep -E "^\| (16|64|128|256)x" "$OUT/bench.log" | grep -E "cublas|10 splitk|9 multi" | head -0
sed -n '/^| level | geomean/,$p' "$OUT/bench.log"

#!/usr/bin/env bash
# Round 6, one device call (notes/l13.md, notes/l15.md): level 13's per-warp epilogue and cluster stream-K
# builds, level 15's per-warp-epilogue builds, the grouped plan of 512 experts. The project installed as a
# user installs it (the carried wheels, then pip install -e of the checkout); cubins prebuilt on the CPU
# machine (LADDER_CUBIN_DIR). In priority order under one time budget (BUDGET_S):
#   check (the contract's check of every new or changed build: random + edge shapes / routings, NaN/Inf,
#   float64 of the dequantised inputs, poisoned output, beside torch), the stream-K shapes with whole waves
#   + a tail, 512 experts; compute-sanitizer memcheck of the new builds; fp8 8192^3 beside torch._scaled_mm
#   in two fresh processes; fp8 grouped prefill (2048-8192 tokens, E 128) beside torch._scaled_grouped_mm;
#   Qwen3-Next prefill (E 512); racecheck of the new builds; the fp8 "mini" serving shapes.
# -> $OUT/x.tgz (everything under $OUT/r), re-packed after each stage; a short table last.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
export LADDER_CUBIN_DIR=$PWD/.cubins
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-330} - ($(date +%s) - T0) )); }
cap() { local l=$(( $(left) - ${2:-5} )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
R=$OUT/r; mkdir -p $R; pack() { tar -czf $OUT/x.tgz -C $OUT r; }
X="python3 -m roofline.ladder.device_moe_fp8"; E="python3 tools/device/round6_extra.py"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit,memory.used --format=csv,noheader | tee $R/gpu.txt
F=$($X levels --set x-round6-fp8); M=$($X levels --set x-round6-moe); P=$($X levels --set x-round6-plan); Q=$($X levels --set x-round6-e512); QC=$($X levels --set x-round6-e512-check)
pick() { echo "$1" | tr ',' '\n' | grep -E "$2" | paste -sd,; }
passed() { tr ',' '\n' < $R/pass_x.txt | grep -xF -f <(echo "$1" | tr ',' '\n') | paste -sd,; }
timeout $(cap 110 220) $X check --targets $F,$M,$P --n-random 5 --limit-s 40 --out $R > $R/check.log 2>&1; echo "check rc=$?"
grep -E "^check" $R/check.log | cut -c1-150; grep -E "FAIL" $R/check.log | head -5 | cut -c1-200
FP=$(passed $F); MP=$(passed $M); NEW=$(pick "$FP,$MP" "wepi|_sk"); echo "passed fp8: $FP; moe: $MP"
timeout $(cap 40 200) $E check-sk --targets $(pick "$FP" _sk) --out $R > $R/check_sk.log 2>&1; echo "check-sk rc=$?: $(grep -cE ': ok' $R/check_sk.log) ok"; grep -E "FAIL" $R/check_sk.log | head -3 | cut -c1-200
timeout $(cap 40 190) $E check-e512 --targets $QC --out $R > $R/check_e512.log 2>&1; echo "check-e512 rc=$?: $(grep -cE ': ok' $R/check_e512.log) ok"; grep -E "FAIL" $R/check_e512.log | head -3 | cut -c1-200
pack; echo "== left $(left) s"
timeout $(cap 35 160) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $X sanitize --targets $NEW > $R/x_memcheck.log 2>&1
echo "memcheck rc=$?: $(grep -c ': ok' $R/x_memcheck.log) ok, $(grep -c FAIL $R/x_memcheck.log) FAIL; $(grep -E 'ERROR SUMMARY' $R/x_memcheck.log | tail -1)"; pack
for rep in 1 2; do
  mkdir -p $R/sq$rep; timeout $(cap 45 110) $X bench-fp8 --targets $FP --shapes square-8192 --min-reps 100 --out $R/sq$rep > $R/sq$rep/log 2>&1; echo "square-8192 rep$rep rc=$?"; pack
done
timeout $(cap 110 60) $X bench-moe --targets $MP --cases prefill --min-reps 50 --out $R > $R/moe.log 2>&1; echo "moe rc=$?"; pack
timeout $(cap 55 5) $E bench-e512 --targets $Q --min-reps 50 --out $R > $R/e512.log 2>&1; echo "e512 rc=$?"; pack
T=$(cap 60 10); timeout $T compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $X sanitize --targets $NEW > $R/x_racecheck.log 2>&1
echo "racecheck rc=$? in ${T}s: $(grep -c ': ok' $R/x_racecheck.log) ok, $(grep -c FAIL $R/x_racecheck.log) FAIL; $(grep -E 'RACECHECK SUMMARY' $R/x_racecheck.log | tail -1)"; pack
[ $(left) -gt 40 ] && { timeout $(cap 80 3) $X bench-fp8 --targets $FP --shapes mini --min-reps 50 --out $R > $R/mini.log 2>&1; echo "mini rc=$?"; pack; }
echo "== elapsed $(( $(date +%s) - T0 )) s"
echo "--- 8192^3 (x torch._scaled_mm, p20-p80)"; grep -h "8192x8192x8192" $R/sq*/log | grep -v "baseline" | cut -d'|' -f3,5 | sed 's/^/ /'
echo "--- prefill E128"; grep -E "^\| .*prefill" $R/moe.log | grep -v baseline | cut -d'|' -f2,3,5 | cut -c1-120
echo "--- E512"; grep -E "^\| qwen3next" $R/e512.log | cut -d'|' -f2,3,5 | cut -c1-120
echo "--- mini"; grep -E "geomean|best level" $R/mini.log

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
# STAGES picks the stages (default: all, in this order). The first call (start9_round6/call1) ran the
# default with one check over all 15 builds; its 110 s cap ended the check before it wrote pass_x.txt, so
# every later stage got no targets (the bug is fixed: passing builds are read from check.log line by line).
# The second call (call2) ran STAGES="recheck sk memcheck square mini prefill racecheck": the two plan
# builds call 1 had not reached, then the rest on the builds call 1 had checked.
# The two calls ran this script at commit 3b05dbb, with the driver of that time (device_moe_fp8 check /
# sanitize / bench-fp8); since the merge of main it calls the one driver, device_suite (check-isolated).
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
S="python3 -m roofline.ladder.device_suite"; E="python3 tools/device/round6_extra.py"   # the one driver, for every contract
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit,memory.used --format=csv,noheader | tee $R/gpu.txt
F=$($S levels --set x-round6-fp8); M=$($S levels --set x-round6-moe); P=$($S levels --set x-round6-plan)
Q=$($S levels --set x-round6-e512); QC=$($S levels --set x-round6-e512-check); RC=$($S levels --set x-round6-recheck)
has() { [[ " ${STAGES:-check sk e512check memcheck square mini prefill e512 racecheck} " == *" $1 "* ]]; }
pick() { echo "$1" | tr ',' '\n' | grep -E "$2" | paste -sd,; }
passed() { sed -n 's/^check \([^:]*\): OK .*/\1/p' $R/check*.log 2>/dev/null | grep -xF -f <(echo "$1" | tr ',' '\n') | paste -sd,; }
if has check; then
  timeout $(cap 110 150) $S check-isolated --targets $F,$M,$P --n-random 5 --limit-s 40 --out $R > $R/check.log 2>&1; echo "check rc=$?"
  grep -E "^check" $R/check.log | cut -c1-150; grep -E "FAIL" $R/check.log | head -5 | cut -c1-200
  F=$(passed $F); M=$(passed $M)
fi
if has recheck; then
  timeout $(cap 25 190) $S check-isolated --targets $RC --n-random 5 --limit-s 25 > $R/check_recheck.log 2>&1; echo "recheck rc=$?"; grep -E "^check" $R/check_recheck.log | cut -c1-150
fi
NEW=$(pick "$F,$M" "wepi|_sk"); echo "fp8: $F; moe: $M; new: $NEW"
has sk && { timeout $(cap 25 165) $E check-sk --targets $(pick "$F" _sk) --out $R > $R/check_sk.log 2>&1; echo "check-sk rc=$?: $(grep -cE ': ok' $R/check_sk.log) ok"; grep -E "FAIL" $R/check_sk.log | head -3 | cut -c1-200; }
has e512check && { timeout $(cap 40 150) $E check-e512 --targets $QC --out $R > $R/check_e512.log 2>&1; echo "check-e512 rc=$?: $(grep -cE ': ok' $R/check_e512.log) ok"; grep -E "FAIL" $R/check_e512.log | head -3 | cut -c1-200; }
pack; echo "== left $(left) s"
if has memcheck; then
  timeout $(cap 30 135) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $S sanitize --targets $NEW > $R/x_memcheck.log 2>&1
  echo "memcheck rc=$?: $(grep -c ': ok' $R/x_memcheck.log) ok, $(grep -c FAIL $R/x_memcheck.log) FAIL; $(grep -E 'ERROR SUMMARY' $R/x_memcheck.log | tail -1)"; pack
fi
if has square; then for rep in 1 2; do
  mkdir -p $R/sq$rep; timeout $(cap 28 80) $S bench-fp8 --targets $F --shapes square-8192 --tag fp8_square-8192 --min-reps 100 --out $R/sq$rep > $R/sq$rep.log 2>&1; echo "square-8192 rep$rep rc=$?"; pack
done; fi
has mini && { timeout $(cap 45 40) $S bench-fp8 --targets $F --shapes mini --tag fp8_mini --min-reps 50 --out $R > $R/mini.log 2>&1; echo "mini rc=$?"; pack; }
has prefill && { timeout $(cap 80 15) $E bench-prefill --targets $M --min-reps 40 --out $R > $R/prefill.log 2>&1; echo "prefill rc=$?"; pack; }
has e512 && { timeout $(cap 55 35) $E bench-e512 --targets $Q --min-reps 50 --out $R > $R/e512.log 2>&1; echo "e512 rc=$?"; pack; }
if has racecheck; then
  T=$(cap 50 2); timeout $T compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $S sanitize --targets $NEW > $R/x_racecheck.log 2>&1
  echo "racecheck rc=$? in ${T}s: $(grep -c ': ok' $R/x_racecheck.log) ok, $(grep -c FAIL $R/x_racecheck.log) FAIL; $(grep -E 'RACECHECK SUMMARY' $R/x_racecheck.log | tail -1)"; pack
fi
echo "== elapsed $(( $(date +%s) - T0 )) s"
echo "--- 8192^3 (x torch._scaled_mm, p20-p80)"; grep -h "8192x8192x8192" $R/sq*.log | grep -v "baseline" | cut -d'|' -f3,5 | sed 's/^/ /'
echo "--- mini"; grep -E "geomean|best level" $R/mini.log
echo "--- prefill E128"; grep -E "^\| .*prefill" $R/prefill.log | grep -v baseline | cut -d'|' -f2,3,5 | cut -c1-120
echo "--- E512"; grep -E "^\| qwen3next" $R/e512.log | grep -v baseline | cut -d'|' -f2,3,5 | cut -c1-120

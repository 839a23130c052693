#!/bin/bash
# The ladder's one device call (repo root on the H200, the project installed; ladder/README.md):
#   pip install --no-index --no-deps --no-build-isolation -e .    # once per machine start (no network needed)
#   bash ladder/device.sh                              # -> $OUT/ladder.tgz, summary printed last
# Levels, variants and kernel files come from the registry (python3 -m roofline.ladder.device_suite
# levels --contract gemm-bf16); shape sets from bench.SHAPE_SETS. Stages (STAGES, default all, in this order):
#   sass      SASS instruction counts of every level's kernel file
#   check     every level and variant, each in a forked child with a time limit (a hung or faulting
#             build costs only itself); the rest runs only what passed
#   bench     the passing levels + cuBLAS on $BENCH_SET (default serving-all-levels: the README table)
#   rep       square-8192 again in two fresh processes ($REP_TARGETS, default the passing levels)
#   variants  each level's registry variants beside it, same process
#   san       compute-sanitizer memcheck/racecheck/synccheck on the passing levels and variants
#   rerun     a dispatch table built from this run's bench; the recorded heads (fixtures/rerun,
#             fixtures/rerun_mixed) re-run through it, cuBLAS beside
# BUDGET_S (default 400) bounds the whole call; each stage gets what is left.
export PYTHONUNBUFFERED=1
if ! python3 -c "import roofline.ladder.registry" 2>/dev/null; then
  echo "roofline is not installed here: pip install --no-index --no-deps --no-build-isolation -e . (from the repo root)" >&2
  exit 2
fi
SUITE="python3 -m roofline.ladder.device_suite"
OUT=${OUT:-/tmp/ladder_out}; mkdir -p "$OUT"; R=$OUT/r; mkdir -p $R
STAGES=${STAGES:-"sass check bench rep variants san rerun"}
BENCH_SET=${BENCH_SET:-serving-all-levels}
BUDGET_S=${BUDGET_S:-400}; T0=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
K=$(python3 -c "from roofline.ladder.registry import KERNEL_DIR; print(KERNEL_DIR)")
if has sass; then
  for f in $($SUITE levels --contract gemm-bf16 --files); do
    b=${f%.cu}
    nvcc -gencode arch=compute_90a,code=sm_90a -std=c++17 -cubin -I $K $K/$f -o /tmp/$b.cubin \
      && cuobjdump -sass /tmp/$b.cubin > /tmp/sass_$b.txt \
      && echo "SASS $b: HGMMA $(grep -c HGMMA /tmp/sass_$b.txt), UTMALDG $(grep -c UTMALDG /tmp/sass_$b.txt), MULTICAST $(grep -c 'UTMALDG.*MULTICAST' /tmp/sass_$b.txt), UTMASTG $(grep -c UTMASTG /tmp/sass_$b.txt), SETMAXREG $(grep -c SETMAXREG /tmp/sass_$b.txt), LDL/STL $(grep -cE 'LDL|STL' /tmp/sass_$b.txt)" | tee -a $R/sass.txt
  done
fi
TARGETS=${TARGETS:-$($SUITE levels --contract gemm-bf16 --variants)}
PASS=$TARGETS
if has check; then
  echo "== check (left $(left) s)"
  timeout $(( $(left) - 30 )) $SUITE check-isolated --targets $TARGETS --limit-s ${CHECK_LIMIT_S:-60} --out $R > "$R/check.log" 2>&1; echo "check rc=$?"
  grep -E "^check|FAIL" "$R/check.log" | head -40
  PASS=$(cat "$R/pass.txt" 2>/dev/null)
fi
LEVELS_OK=$(echo "$PASS" | tr ',' '\n' | grep -E '^[0-9]+$' | paste -sd,)
echo "passing: $PASS (levels $LEVELS_OK)"
if has bench && [ $(left) -gt 80 ]; then
  echo "== bench $BENCH_SET, levels $LEVELS_OK (left $(left) s)"
  timeout $(( $(left) - 20 )) $SUITE bench --targets $LEVELS_OK --shapes $BENCH_SET --tag all --out $R > "$R/bench.log" 2>&1; echo "bench rc=$?"
fi
if has rep; then
  for i in 2 3; do
    [ $(left) -lt 40 ] && break
    timeout 60 $SUITE bench --targets ${REP_TARGETS:-$LEVELS_OK} --shapes square-8192 --tag rep$i --out $R > "$R/rep$i.log" 2>&1
    echo "rep$i rc=$?: $(grep -E '^\| 8192x8192x8192' $R/rep$i.log | cut -d'|' -f3-6 | tr '\n' ';')"
  done
fi
if has variants && [ $(left) -gt 60 ]; then
  echo "== variants (left $(left) s)"
  timeout $(( $(left) - 15 )) $SUITE variants --targets $PASS --out $R > "$R/variants.log" 2>&1; echo "variants rc=$?"
  grep -E "^\| [0-9]" "$R/variants.log" | cut -d'|' -f2-5 | head -40
  grep "cluster residency" "$R/variants.log" | head -2
fi
if has san; then
  SANV=$(echo "$PASS" | tr ',' '\n' | grep -vE '^[0-9]+$' | paste -sd,)
  for tool in memcheck racecheck synccheck; do
    L=$(left); [ $L -lt 25 ] && { echo "$tool: skipped (no time left)"; continue; }
    echo "== $tool (levels $LEVELS_OK, variants $SANV; left $L s)"
    LADDER_LEVELS=$LEVELS_OK LADDER_SAN_VARIANTS=${SAN_VARIANTS-$SANV} timeout $(( L < 100 ? L - 10 : 90 )) compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $SUITE sanitize --contract gemm-bf16 > "$R/$tool.log" 2>&1
    echo "$tool rc=$?: $(grep -cE 'sanitize-mode.*: ok' $R/$tool.log) shapes ok, $(grep -cE 'FAIL' $R/$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tail -1)"
  done
fi
if has rerun && [ -f $R/bench_all.json ] && [ $(left) -gt 30 ]; then
  echo "== rerun (left $(left) s)"
  python3 -m roofline.rerun --build-dispatch $R/bench_all.json $R/dispatch.json
  for FIX in fixtures/rerun fixtures/rerun_mixed; do
    [ $(left) -lt 20 ] && break
    NAME=$(basename $FIX); work=$(mktemp -d); cp -r $FIX/. $work/; rm -rf $work/rerun_h200
    timeout $(( $(left) - 10 )) python3 -m roofline.cli rerun $work/profile/round_1/profile_roofline.json --dispatch $R/dispatch.json --playbook-dir $work/knowledge > $R/rerun_$NAME.log 2>&1; echo "rerun $NAME rc=$?"
    mkdir -p $R/rerun_$NAME; cp $work/profile/round_1/profile_roofline.json $work/profile/round_1/profile_roofline.md $R/rerun_$NAME/ 2>/dev/null
    cp $work/knowledge/backend_playbook.md $work/knowledge/backend_playbook.jsonl $R/rerun_$NAME/ 2>/dev/null
    python3 - "$R/rerun_$NAME/profile_roofline.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
for e in a["entries"]:
    m = e.get("measured")
    if not m:
        continue
    f = lambda v: "-" if v is None else f"{v:.4g}"
    lt, ct = m.get("ladder_t_ms"), m.get("cublas_t_ms")
    print(f"  {e['short_name'][:38]:38s} L{m.get('ladder_level')} {f(lt)} ms, cuBLAS {f(ct)} ms, "
          f"ladder/cuBLAS {f(ct / lt if lt and ct else None)}x; {m.get('verdict')}")
PY
  done
fi
echo "== summary (elapsed $(( $(date +%s) - T0 )) s)"
sed -n '/^| level | geomean/,$p' "$R/bench.log"
tar -czf $OUT/ladder.tgz -C $OUT r && rm -rf $R

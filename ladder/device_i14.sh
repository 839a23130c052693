#!/bin/bash
# Issue 14's device call (repo root on the H200): bash ladder/device_i14.sh
# Stages (STAGES, default all, in this order): sass (SASS counts of the new files), check (full
# check suite of levels 7-10 and their variants, each target in a forked child with a time
# limit), bench (levels 1-10 + cuBLAS on the issue-14 shape set plus the two single-tile shapes:
# the README table; >= 50 timed launches, L2 flushed, same process), rep (8192^3: levels 6, 9 and
# cuBLAS again in two fresh processes), variants (levels 9-10's alternatives), san
# (compute-sanitizer memcheck/racecheck/synccheck on the passing new levels and variants),
# rerun (dispatch table built from this run's bench; the recorded prefill and decode+prefill
# heads re-run through it, cuBLAS beside). Everything lands in $OUT/i14.tgz; summary printed last.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/ladder_out}; mkdir -p "$OUT"; R=$OUT/r; mkdir -p $R
STAGES=${STAGES:-"sass check bench rep variants san rerun"}
BUDGET_S=${BUDGET_S:-400}; T0=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
K=ladder/kernels/sm90
if has sass; then
  for f in l07_warp_specialized l08_cluster l09_multi_consumer l10_splitk; do
    nvcc -gencode arch=compute_90a,code=sm_90a -std=c++17 -cubin -I $K $K/$f.cu -o /tmp/$f.cubin \
      && cuobjdump -sass /tmp/$f.cubin > /tmp/sass_$f.txt \
      && echo "SASS $f: HGMMA $(grep -c HGMMA /tmp/sass_$f.txt), UTMALDG $(grep -c UTMALDG /tmp/sass_$f.txt), MULTICAST $(grep -c 'UTMALDG.*MULTICAST' /tmp/sass_$f.txt), UTMASTG $(grep -c UTMASTG /tmp/sass_$f.txt), SETMAXREG $(grep -c SETMAXREG /tmp/sass_$f.txt), LDL/STL $(grep -cE 'LDL|STL' /tmp/sass_$f.txt)" | tee -a $R/sass.txt
  done
fi
TARGETS=${TARGETS:-7,8,9,10,l09_coop_cluster,l09_pingpong_nocluster,l09_pingpong_wide_nocluster,l09_coop_regstore,l07_regstore,l10_m128,l10_nosplit,l10_n256}
PASS=$TARGETS
if has check; then
  echo "== check (left $(left) s)"
  timeout $(( $(left) - 30 )) python3 -m roofline.ladder.device_i14 check --targets $TARGETS --limit-s ${CHECK_LIMIT_S:-60} --out $R > "$R/check.log" 2>&1; echo "check rc=$?"
  grep -E "^check|FAIL" "$R/check.log" | head -40
  PASS=$(cat "$R/pass.txt" 2>/dev/null)
fi
LEVELS_OK=$(echo "$PASS" | tr ',' '\n' | grep -E '^[0-9]+$' | paste -sd,)
echo "passing: $PASS (levels $LEVELS_OK)"
if has bench && [ $(left) -gt 80 ]; then
  echo "== bench issue14-all, levels 1-6 + $LEVELS_OK (left $(left) s)"
  timeout $(( $(left) - 20 )) python3 -m roofline.ladder.device_i14 bench --targets 1,2,3,4,5,6,$LEVELS_OK --set issue14-all --tag all --out $R > "$R/bench.log" 2>&1; echo "bench rc=$?"
fi
if has rep; then
  for i in 2 3; do
    [ $(left) -lt 40 ] && break
    timeout 60 python3 -m roofline.ladder.device_i14 bench --targets 6,9 --set gate8192 --tag rep$i --out $R > "$R/rep$i.log" 2>&1
    echo "rep$i rc=$?: $(grep -E '^\| 8192x8192x8192' $R/rep$i.log | cut -d'|' -f3-6 | tr '\n' ';')"
  done
fi
if has variants && [ $(left) -gt 60 ]; then
  echo "== variants (left $(left) s)"
  timeout $(( $(left) - 15 )) python3 -m roofline.ladder.device_i14 variants --targets $PASS,6 --out $R > "$R/variants.log" 2>&1; echo "variants rc=$?"
  grep -E "^\| (8192x8192x8192|3000x5000|64x4096x4096|16x28672|256x28672x8192|128x4096x14336)" "$R/variants.log" | cut -d'|' -f2-5 | head -40
  grep "cluster residency" "$R/variants.log" | head -2
fi
if has san; then
  SANV=$(echo "$PASS" | tr ',' '\n' | grep -vE '^[0-9]+$' | paste -sd,)
  for tool in memcheck racecheck synccheck; do
    L=$(left); [ $L -lt 25 ] && { echo "$tool: skipped (no time left)"; continue; }
    echo "== $tool (levels $LEVELS_OK, variants $SANV; left $L s)"
    LADDER_LEVELS=$LEVELS_OK LADDER_SAN_VARIANTS=${SAN_VARIANTS-$SANV} timeout $(( L < 100 ? L - 10 : 90 )) compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 -m roofline.ladder.device_suite sanitize > "$R/$tool.log" 2>&1
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
sed -n '/^| level | geomean/,$p' "$R/bench.log" | grep -vE "^\| [1-5] "
tar -czf $OUT/i14.tgz -C $OUT r && rm -rf $R

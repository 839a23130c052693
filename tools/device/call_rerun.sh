#!/usr/bin/env bash
# One device call: install the project as a user would; one more `peaks measure` run (a new
# machine start); the stage-C re-run with counters of the GEMM heads of the real prefill and
# batch-64 decode profiles (topn -> analyze -> rerun --counters, through the installed CLI); the
# GPU tests. Everything lands in $OUT as a few tars.
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee $OUT/device.txt
W=/tmp/w; mkdir -p $W/peaks $W/runs
echo "== peaks measure (this machine start)"
roofline peaks measure -o $W/peaks/h200_peaks.yaml ${PEAK_SHAPES:+--shapes $PEAK_SHAPES} 2>&1 | grep -E "gemm|hbm|check" | tail -20
echo "== first compile of every level"
python3 -c "
from roofline.ladder.build import get_kernel
from roofline.ladder.registry import LEVELS
for lv in LEVELS: get_kernel(lv)
print('built', len(LEVELS), 'levels')" 2>&1 | tail -2
for spec in prefill:prefill_llama:env_prefill decode:decode_b64_cat:env_decode; do
  IFS=: read name trace env <<<"$spec"
  R=$W/runs/$name; mkdir -p $R/profile/round_1
  cp fixtures/traces_real/$env.json $R/env_report.json; cp fixtures/traces_real/config.json $R/config.json
  roofline topn fixtures/traces_real/$trace.json.gz -o $R/profile/round_1/profile_topN.json 2>&1 | tail -1
  roofline analyze $R/profile/round_1/profile_topN.json --format table 2>&1 | tail -8
  cp $R/profile/round_1/profile_roofline.json $R/profile/round_1/stage_b_roofline.json
  echo "== rerun --counters $name"; t1=$(date +%s)
  roofline rerun $R/profile/round_1/profile_roofline.json --counters 2>&1 | grep -v "it/s\|s/it" | tail -8
  echo "rerun wall $(( $(date +%s) - t1 )) s"
  python3 - $R/profile/round_1/profile_roofline.json <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
print("stage", a["stage"])
f = lambda v: "-" if v is None else f"{v:.4g}"
print(f"{'kernel':40s} {'lvl':>3s} {'L2':>4s} {'lib ms':>8s} {'lad ms':>8s} {'lad/lib x':>9s} {'range':>13s} {'proj ms':>8s} {'in-run':>8s} {'bytes meas':>10s} {'hbm%':>6s} {'conf':>6s} verdict")
for e in a["entries"]:
    m = e.get("measured")
    if not m: continue
    r = m.get("ladder_vs_library_speedup_range") or [None, None]
    print(f"{e['short_name'][:40]:40s} {m['ladder_level']:>3} {m.get('l2_mode') or '-':>4s} {f(m.get('cublas_t_ms')):>8s} {f(m.get('ladder_t_ms')):>8s} "
          f"{f(m.get('ladder_vs_library_speedup')):>9s} {f(r[0])+'-'+f(r[1]):>13s} {f(m.get('projected_in_run_t_ms')):>8s} {f(m.get('current_t_ms')):>8s} "
          f"{f(e.get('bytes_measured')):>10s} {f(e.get('hbm_util')):>6s} {e.get('confidence'):>6s} {m.get('verdict')}")
PY
done
echo "== GPU tests"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tail -6
(cd $W && tar cf $OUT/runs.tar runs && tar cf $OUT/peaks.tar peaks)
echo "wall $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device call: the stage-C closed loop on real MoE and fp8 traces of the corpus
# (fixtures/corpus/): install as a user would, topn -> analyze -> rerun --counters through the
# installed CLI, the grouped and fp8 ladder levels beside torch._grouped_mm / torch._scaled_mm,
# with the ncu counters of every re-run head (dense bf16, fp8 and grouped: the timing's problems,
# operands and drawn routing); cubins prebuilt on the CPU machine (python3 -m roofline.ladder.prebuild
# .cubins) skip NVRTC. Needs .whl/ (the wheels the device lacks: pip download on the CPU machine)
# and .cubins/ carried along. Back in $OUT: device.txt (the card, ncu's version), runs.tar (per case:
# the Top-N, stage_b_roofline.json, the stage-C profile_roofline.json and the playbook).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv | tee $OUT/device.txt
ncu --version 2>&1 | tail -1 | tee -a $OUT/device.txt
W=/tmp/w; mkdir -p $W/runs
for spec in ${CASES:-qwen3moe_grouped_mm:1024:6:64 llama_fp8_prefill_decode:2048:8:64}; do
  IFS=: read c isl osl conc <<<"$spec"
  R=$W/runs/$c; mkdir -p $R/profile/round_1
  roofline topn fixtures/corpus/$c.json.gz -o $R/profile/round_1/profile_topN.json --isl $isl --osl $osl --conc $conc \
      --config fixtures/corpus/configs/$c.json 2>&1 | tail -1
  roofline analyze $R/profile/round_1/profile_topN.json 2>&1 | head -12 | cut -c1-160
  cp $R/profile/round_1/profile_roofline.json $R/profile/round_1/stage_b_roofline.json
  echo "== rerun --counters $c"; t1=$(date +%s)
  timeout ${RERUN_S:-240} roofline rerun $R/profile/round_1/profile_roofline.json --counters 2>&1 | grep -v "it/s\|s/it" | tail -12
  echo "rerun wall $(( $(date +%s) - t1 )) s"
  python3 - $R/profile/round_1/profile_roofline.json <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
g = lambda v, f=".4g": "-" if v is None else format(v, f)
print("stage", a["stage"])
for e in a["entries"]:
    m = e.get("measured")
    if not m:
        continue
    c = m.get("counters") or {}
    rng = m.get("ladder_vs_library_speedup_range") or [None, None]
    print(f"{e['short_name'][:28]:28s} L{m['ladder_level']} vs {m.get('library')}: {g(m.get('ladder_vs_library_speedup'), '.3f')}x "
          f"({g(rng[0], '.3f')}-{g(rng[1], '.3f')}); predicted {g(e.get('attainable_speedup'), '.3f')}x, measured "
          f"{g(e.get('measured_attainable_speedup'), '.3f')}x; {m.get('verdict')}")
    print(f"   counters: {c.get('error') or c.get('launched') or c.get('target')}; bytes measured {g(e.get('bytes_measured'))} "
          f"model {g(e.get('bytes_model'))} ({g(e.get('bytes_measured_over_model'), '.3f')}x); flops issued "
          f"{g(e.get('flops_issued'))} {(e.get('counters') or {}).get('tensor_flops_by_dtype')}; {e['compute_dtype']} "
          f"{e['roof_axis']} roof {g(e.get('roofline_pct'), '.3f')}; confidence {e['confidence']}")
    for r in m.get("routing") or []:
        print(f"   {r['label']}: {r['rule']}: {r['experts_hit_drawn']} experts hit (model {g(r['experts_hit_model'], '.1f')})")
    rb = m.get("routing_bytes")
    if rb:
        print(f"   routing bytes: measured {g(rb['bytes_measured'])} vs model at drawn {g(rb['bytes_model_drawn_hit'])} "
              f"({g(rb.get('measured_over_model_drawn'), '.3f')}x), at expected {g(rb['bytes_model_expected_hit'])} "
              f"({g(rb.get('measured_over_model_expected'), '.3f')}x)")
PY
  (cd $W && tar cf $OUT/runs.tar runs)
done
echo "wall $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device call: the stage-C closed loop on real MoE and fp8 traces of the corpus
# (fixtures/corpus/): install as a user would, topn -> analyze -> rerun --counters through the
# installed CLI, the grouped and fp8 ladder levels beside torch._grouped_mm / torch._scaled_mm;
# cubins prebuilt on the CPU machine (python3 -m roofline.ladder.prebuild .cubins) skip NVRTC.
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv | tee $OUT/device.txt
W=/tmp/w; mkdir -p $W/runs
for spec in ${CASES:-qwen3moe_grouped_mm:1024:6:64 llama_fp8_prefill_decode:2048:8:64}; do
  IFS=: read c isl osl conc <<<"$spec"
  R=$W/runs/$c; mkdir -p $R/profile/round_1
  roofline topn fixtures/corpus/$c.json.gz -o $R/profile/round_1/profile_topN.json --isl $isl --osl $osl --conc $conc \
      --config fixtures/corpus/configs/$c.json 2>&1 | tail -1
  roofline analyze $R/profile/round_1/profile_topN.json 2>&1 | head -12 | cut -c1-160
  cp $R/profile/round_1/profile_roofline.json $R/profile/round_1/stage_b_roofline.json
  echo "== rerun --counters $c"; t1=$(date +%s)
  timeout ${RERUN_S:-200} roofline rerun $R/profile/round_1/profile_roofline.json --counters 2>&1 | grep -v "it/s\|s/it" | tail -12
  echo "rerun wall $(( $(date +%s) - t1 )) s"
  (cd $W && tar cf $OUT/runs.tar runs)
done
echo "wall $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device call for the corpus's second round (issues 31, 32): traces of the round-2 cases of
# tools/device/make_corpus.py (CASES2 below), one Nsight Compute pass over one step per case and
# regime (DRAM bytes, duration, bf16 and fp8 tensor-pipe ops, --cache-control none), and one
# `ncu --set roofline` report of ONE gpt-oss decode step on its own. flash-linear-attention (fla-core +
# flash-linear-attention wheels, pure Python) travels in .whl. Everything lands in $OUT (<= 8 files).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
REPO=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla*.whl .whl/flash_linear*.whl || exit 3
export PYTHONPATH=/tmp/site
NR=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
[ -z "$NR" ] && NR=$(dirname "$(find / -name ncu_report.py -path '*extras*' 2>/dev/null | head -1)")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/device.txt
python3 -c "import fla, transformers, torch; print('fla', fla.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)" | tee -a $OUT/device.txt
W=/tmp/w; mkdir -p $W/corpus
CASES=${CASES:-qwen3_static_eager,qwen3_static_sdpa,gptoss_eager,gemma3_swa_eager,llama3b_cat_decode,qwen3moe_fp8_grouped,qwen3next_fla,bamba_mamba2}
echo "== corpus traces ($CASES)"
timeout 190 python3 tools/device/make_corpus.py --out $W/corpus --cases "$CASES" 2>&1 | grep -E "^case|Error" | tail -30
(cd $W && tar cf $OUT/corpus2.tar corpus)
echo "traces wall $(( $(date +%s) - t0 )) s"
echo "== ncu, one step per case and regime"
INC=""; for c in ${CASES//,/ }; do INC="$INC --nvtx-include ${c}__prefill/ --nvtx-include ${c}__decode/"; done
timeout 170 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum,launch__grid_size,launch__block_size \
    --clock-control none --cache-control none --nvtx $INC -f -o $W/corpus2_ncu \
    python3 tools/device/make_corpus.py --ncu --out $W/ncu_tmp --cases "$CASES" 2>&1 | grep -E "^case|Error|ERR" | tail -20
echo "ncu wall $(( $(date +%s) - t0 )) s"
echo "== ncu --set roofline, one gpt-oss decode step"
timeout 100 ncu --set roofline --clock-control none --cache-control none --nvtx --nvtx-include gptoss_eager__decode/ -f -o $W/gptoss_decode_roofline \
    python3 tools/device/make_corpus.py --ncu --out $W/ncu_tmp2 --cases gptoss_eager 2>&1 | grep -E "^case|Error|ERR" | tail -5
cd $W
for r in corpus2_ncu gptoss_decode_roofline; do
  [ -f $r.ncu-rep ] || continue
  PYTHONPATH=$PYTHONPATH:$NR python3 $REPO/tools/device/ncu_extract.py $r.ncu-rep -o ${r}_rows.json && gzip -f -9 ${r}_rows.json
  ncu --import $r.ncu-rep --csv --page raw --print-units base > ${r}_raw.csv
  gzip -f -9 -k $r.ncu-rep; gzip -f -9 ${r}_raw.csv
done
tar cf $OUT/ncu2.tar $(ls *_rows.json.gz *_raw.csv.gz 2>/dev/null)
for f in corpus2_ncu.ncu-rep.gz gptoss_decode_roofline.ncu-rep.gz; do
  [ -f $f ] && [ $(stat -c %s $f) -lt 15000000 ] && cp $f $OUT/
done
ls -la $OUT
echo "wall $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device call for the corpus's third round (code we did not write): traces of llama_liger
# (Liger-Kernel's Triton RMSNorm / SwiGLU / RoPE patched into transformers' Llama) and
# granitemoehybrid_mamba2_moe (GraniteMoeHybrid: Mamba2 reference path + attention + grouped_mm
# MoE) from tools/device/make_corpus.py, then one Nsight Compute pass over one step per case and
# regime (the metrics of call_corpus2.sh). liger-kernel (pure Python over Triton) travels in .whl.
# Everything lands in $OUT as corpus3.tar and ncu3.tar (the merge reads them as call_corpus2's).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
REPO=$(pwd)
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/liger_kernel*.whl || exit 3
export PYTHONPATH=/tmp/site
NR=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
[ -z "$NR" ] && NR=$(dirname "$(find / -name ncu_report.py -path '*extras*' 2>/dev/null | head -1)")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/device.txt
python3 -c "import liger_kernel, transformers, torch, triton; from importlib.metadata import version; print('liger', version('liger-kernel'), 'transformers', transformers.__version__, 'torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/device.txt
W=/tmp/w; mkdir -p $W/corpus
CASES=${CASES:-llama_liger,granitemoehybrid_mamba2_moe}
echo "== corpus traces ($CASES)"
timeout ${TRACE_S:-100} python3 tools/device/make_corpus.py --out $W/corpus --cases "$CASES" > $W/trace.log 2>&1
grep -E "^case|Error" $W/trace.log | tail -30
(cd $W && tar cf $OUT/corpus3.tar corpus trace.log)
echo "traces wall $(( $(date +%s) - t0 )) s"
echo "== ncu, one step per case and regime"
INC=""; for c in ${CASES//,/ }; do INC="$INC --nvtx-include ${c}__prefill/ --nvtx-include ${c}__decode/"; done
timeout ${NCU_S:-150} ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum,launch__grid_size,launch__block_size \
    --clock-control none --cache-control none --nvtx $INC -f -o $W/corpus3_ncu \
    python3 tools/device/make_corpus.py --ncu --out $W/ncu_tmp --cases "$CASES" > $W/ncu.log 2>&1
grep -E "^case|Error|ERR" $W/ncu.log | tail -20
echo "ncu wall $(( $(date +%s) - t0 )) s"
cd $W
r=corpus3_ncu
if [ -f $r.ncu-rep ]; then
  PYTHONPATH=$PYTHONPATH:$NR python3 $REPO/tools/device/ncu_extract.py $r.ncu-rep -o ${r}_rows.json && gzip -f -9 ${r}_rows.json
  ncu --import $r.ncu-rep --csv --page raw --print-units base > ${r}_raw.csv
  gzip -f -9 ${r}_raw.csv
fi
tar cf $OUT/ncu3.tar $(ls *_rows.json.gz *_raw.csv.gz ncu.log 2>/dev/null)
ls -la $OUT
echo "wall $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device call: the real-model corpus (tools/device/make_corpus.py: HF transformers models,
# traces of prefill/decode), one Nsight Compute pass over one step of every case (DRAM bytes,
# duration, tensor-pipe FLOPs per kernel, in-run L2 state: --cache-control none), and one
# `roofline peaks measure --method burst` run. Everything lands in $OUT (at most 8 files).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
roofline --help | head -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $OUT/device.txt
W=/tmp/w; mkdir -p $W/corpus
CASES=${CASES:-$(python3 -c "import sys; sys.path.insert(0,'tools/device'); import make_corpus as m; print(','.join(m.CASES))")}
# NCU_ONLY=1: only the Nsight Compute pass (a second pass over cases a first pass did not reach)
if [ -z "${NCU_ONLY:-}" ]; then
echo "== corpus traces ($CASES)"
timeout 230 python3 tools/device/make_corpus.py --out $W/corpus --cases "$CASES" 2>&1 | grep -E "^case|Error" | tail -30
(cd $W && tar cf $OUT/corpus.tar corpus)
fi
echo "corpus wall $(( $(date +%s) - t0 )) s"
if [ -n "${TRACES_ONLY:-}" ]; then ls -la $OUT; echo "wall $(( $(date +%s) - t0 )) s"; exit 0; fi
echo "== ncu, one step per case"
NCASES=$(echo "$CASES" | tr ',' '\n' | grep -v compile | paste -sd,)
INC=""; for c in ${NCASES//,/ }; do INC="$INC --nvtx-include ${c}__prefill/ --nvtx-include ${c}__decode/"; done
timeout 170 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum,launch__grid_size,launch__block_size \
    --clock-control none --cache-control none --nvtx $INC -f -o $W/corpus_ncu \
    python3 tools/device/make_corpus.py --ncu --out $W/ncu_tmp --cases "$NCASES" 2>&1 | grep -v "^==PROF==" | grep -E "case|Error|ERR|WARN" | tail -20
ls -la $W/corpus_ncu.ncu-rep
if echo "$CASES" | grep -q compile; then
echo "== ncu, the torch.compile case alone (inductor compiles under ncu: its own timeout)"
timeout 100 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,launch__grid_size,launch__block_size \
    --clock-control none --cache-control none --nvtx --nvtx-include llama_compile_decode__decode/ -f -o $W/corpus_ncu_compile \
    python3 tools/device/make_corpus.py --ncu --out $W/ncu_tmp --cases llama_compile_decode 2>&1 | grep -E "^case" | tail -3
fi
python3 tools/device/ncu_extract.py $W/corpus_ncu.ncu-rep -o $W/corpus_ncu_rows.json
[ -f $W/corpus_ncu_compile.ncu-rep ] && python3 tools/device/ncu_extract.py $W/corpus_ncu_compile.ncu-rep -o $W/corpus_ncu_compile_rows.json && gzip -f -9 $W/corpus_ncu_compile_rows.json
ncu --import $W/corpus_ncu.ncu-rep --csv --page raw --print-units base > $W/corpus_ncu_raw.csv
gzip -f -9 -k $W/corpus_ncu.ncu-rep; gzip -f -9 $W/corpus_ncu_rows.json $W/corpus_ncu_raw.csv
(cd $W && tar cf $OUT/ncu.tar corpus_ncu_rows.json.gz corpus_ncu_raw.csv.gz $(ls corpus_ncu_compile_rows.json.gz 2>/dev/null))
echo "ncu wall $(( $(date +%s) - t0 )) s"
[ -n "${NCU_ONLY:-}" ] && { ls -la $OUT; exit 0; }
[ -n "${NO_PEAKS:-}" ] && { ls -la $OUT; exit 0; }
echo "== peaks measure, burst method"
timeout 90 roofline peaks measure --method burst --dtypes bf16,fp16,fp8 --shapes 8192x8192x8192,16384x4096x14336,8192x28672x4096 \
   --rounds 10 --reps 6 --hbm-gib 4 -o $W/h200_burst.yaml 2>&1 | grep -E "gemm|hbm|check|wrote" | tail -20
(cd $W && tar cf $OUT/peaks.tar h200_burst*)
[ $(stat -c %s $W/corpus_ncu.ncu-rep.gz) -lt 15000000 ] && cp $W/corpus_ncu.ncu-rep.gz $OUT/
ls -la $OUT
echo "wall $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device call for the corpus's fourth round (compiled serving code, gathered
# experts, per-expert loops, all-position logits; an ncu DEFAULT-set report).
#  1. traces of the round-4 cases of tools/device/make_corpus.py (one process, cases in order; a
#     case that fails is recorded in corpus_meta.json "errors" and the rest go on), plus the
#     inductor kernel sources the compiled traces name (kernel_file) and the provenance files;
#  2. the default-set fixture: tools/device/ncu_default_case.py under plain `ncu -o` (no --set, no
#     --metrics; --clock-control none), then the same step again with the DRAM bytes and duration;
#  3. one Nsight Compute pass per group of cases (one step per case and regime, the metrics of
#     call_corpus3.sh), only cases whose trace ran.
# Every step has a timeout inside BUDGET seconds; everything lands in $OUT as tars (<= 8 files).
# Run from a directory holding tools/device/ (the device call sends /work/main's tree: the round's
# files travel in .dev/corpus, carried).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
BUDGET=${BUDGET:-480}
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
REPO=$(pwd)
NR=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
[ -z "$NR" ] && NR=$(dirname "$(find / -name ncu_report.py -path '*extras*' 2>/dev/null | head -1)")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/device.txt
python3 -c "import transformers, torch, triton; print('transformers', transformers.__version__, 'torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/device.txt
ncu --version | tail -1 | tee -a $OUT/device.txt
date -u | tee -a $OUT/device.txt
W=${W:-/tmp/w}; mkdir -p $W/corpus
CASES=${CASES:-qwen3_compile_static,olmoe_batched_mm,qwen2_prefill_all_logits,mixtral22_eager_loop,qwen2moe_compile_grouped,qwen3_compile_cudagraphs}

echo "== 1. corpus traces ($CASES)"
timeout -k 10 ${TRACE_S:-215} python3 tools/device/make_corpus.py ${TINY:+--tiny} --out $W/corpus --cases "$CASES" > $W/trace.log 2>&1
echo "rc $?"
grep -E "^case|Error|skipping cudagraphs" $W/trace.log | tail -30
# the inductor kernel sources the traces name (cpu_op args kernel_file): text, small
python3 - $W/corpus <<'EOF'
import glob, gzip, json, os, shutil, sys
d = sys.argv[1]
os.makedirs(f"{d}/inductor_kernels", exist_ok=True)
for p in glob.glob(f"{d}/*.json.gz"):
    case = os.path.basename(p)[:-8]
    files = set()
    for e in json.load(gzip.open(p))["traceEvents"]:
        f = (e.get("args") or {}).get("kernel_file")
        if f and os.path.exists(f):
            files.add(f)
    for f in files:
        os.makedirs(f"{d}/inductor_kernels/{case}", exist_ok=True)
        shutil.copyfile(f, f"{d}/inductor_kernels/{case}/{os.path.basename(f)}")
    if files:
        print(case, len(files), "kernel files")
EOF
(cd $W && tar cf $OUT/corpus4.tar --exclude=corpus/inductor_kernels --exclude=corpus/inductor_debug --exclude=corpus/provenance corpus trace.log)
(cd $W && tar czf $OUT/compiled4.tar.gz $(cd $W && ls -d corpus/inductor_kernels corpus/inductor_debug corpus/provenance 2>/dev/null))
ls -la $W/corpus | head -20
echo "traces wall $(( $(date +%s) - t0 )) s"

echo "== 2. ncu default set + DRAM bytes of the same step"
D=$W/ncu_default; mkdir -p $D
if [ $(left) -gt 200 ]; then
  timeout -s INT -k 10 50 ncu --clock-control none --nvtx --nvtx-include "ncu_default/" -c 3 -f -o $D/default_set \
      python3 tools/device/ncu_default_case.py > $D/default_set.log 2>&1
  echo "default rc $?"
  timeout -s INT -k 10 50 ncu --clock-control none --nvtx --nvtx-include "ncu_default/" -c 3 \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__cycles_elapsed.avg.per_second \
      -f -o $D/dram_bytes python3 tools/device/ncu_default_case.py > $D/dram_bytes.log 2>&1
  echo "dram rc $?"
  for r in default_set dram_bytes; do
    [ -f $D/$r.ncu-rep ] || continue
    ncu --import $D/$r.ncu-rep --csv --page raw --print-units base > $D/$r.raw.csv
    ncu --import $D/$r.ncu-rep --page details --print-units base > $D/$r.details.txt
    PYTHONPATH=$NR python3 tools/device/ncu_extract.py $D/$r.ncu-rep -o $D/$r.rows.json
  done
  ls -la $D
  (cd $W && tar cf $OUT/ncu_default.tar ncu_default)
fi
echo "ncu default wall $(( $(date +%s) - t0 )) s"

echo "== 3. ncu, one step per case and regime"
OK=$(python3 -c "import json; m=json.load(open('$W/corpus/corpus_meta.json')); print(','.join(c for c in '$CASES'.split(',') if c in m['cases']))" 2>/dev/null)
echo "cases with a trace: $OK"
GA=""; GB=""
for c in ${OK//,/ }; do
  case $c in qwen3_compile_static|olmoe_batched_mm|qwen2_prefill_all_logits) GA="$GA,$c";; *) GB="$GB,$c";; esac
done
n=0
for G in "$GA" "$GB"; do
  n=$((n+1)); G=${G#,}; [ -z "$G" ] && continue
  L=$(left); [ $n -eq 1 ] && L=$(( L * 55 / 100 )); L=$(( L - 25 ))
  [ $L -lt 40 ] && { echo "group $n ($G) skipped: $L s left"; continue; }
  INC=""; for c in ${G//,/ }; do INC="$INC --nvtx-include ${c}__prefill/ --nvtx-include ${c}__decode/"; done
  echo "group $n: $G, timeout $L s"
  timeout -s INT -k 15 $L ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum,launch__grid_size,launch__block_size \
      --clock-control none --cache-control none --nvtx $INC -f -o $W/corpus4_ncu_$n \
      python3 tools/device/make_corpus.py ${TINY:+--tiny} --ncu --out $W/ncu_tmp --cases "$G" > $W/ncu_$n.log 2>&1
  echo "rc $?"
  grep -E "^case|Error|ERR" $W/ncu_$n.log | tail -10
  echo "ncu group $n wall $(( $(date +%s) - t0 )) s"
done
cd $W
for r in corpus4_ncu_1 corpus4_ncu_2; do
  if [ -f $r.ncu-rep ]; then
    PYTHONPATH=$NR python3 $REPO/tools/device/ncu_extract.py $r.ncu-rep -o ${r}_rows.json && gzip -f -9 ${r}_rows.json
    ncu --import $r.ncu-rep --csv --page raw --print-units base > ${r}_raw.csv
    gzip -f -9 ${r}_raw.csv
  fi
done
tar cf $OUT/ncu4.tar $(ls *_rows.json.gz *_raw.csv.gz ncu_*.log 2>/dev/null)
ls -la $OUT
echo "wall $(( $(date +%s) - t0 )) s"

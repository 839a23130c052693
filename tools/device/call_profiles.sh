#!/usr/bin/env bash
# One device call: install the project as a user would, make the real serving-shape profiles,
# two Nsight Compute reports of the same kernels (--set roofline, and plain byte counters), and
# one `roofline peaks measure` run. Everything lands in $OUT (at most 8 files come back).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
roofline --help | head -3
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee $OUT/device.txt
W=/tmp/w; mkdir -p $W/p
echo "== profiles"; python3 tools/device/make_real_profiles.py --out $W/p 2>&1 | tail -8
echo "== ncu --set roofline"
ncu --set roofline --clock-control none --nvtx --nvtx-include "ncu_region/" -f -o $W/ncu_roofline \
    python3 tools/device/make_real_profiles.py --ncu-kernels 2>&1 | grep -v "^==PROF==" | tail -3
echo "== ncu byte counters"
ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__bytes.sum,gpu__time_duration.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,dram__bytes.sum.per_second \
    --clock-control none --nvtx --nvtx-include "ncu_region/" -f -o $W/ncu_counts \
    python3 tools/device/make_real_profiles.py --ncu-kernels 2>&1 | grep -v "^==PROF==" | tail -3
for r in ncu_roofline ncu_counts; do
  ncu --import $W/$r.ncu-rep --csv --page raw --print-units base > $W/${r}_raw.csv
  ls -la $W/$r.ncu-rep; gzip -9 -k $W/$r.ncu-rep
done
echo "== peaks measure (run on this machine start)"
roofline peaks measure -o $W/h200_peaks.yaml 2>&1 | tail -14
echo "== topn sanity on the new traces"
for t in prefill_llama decode_b64_cat graph_decode_mixed graph_decode_replay_only; do
  roofline topn $W/p/$t.json.gz -o $W/topn/$t/profile_topN.json 2>&1 | tail -2
done
(cd $W && tar cf $OUT/profiles.tar p topn && tar cf $OUT/ncu.tar ncu_roofline.ncu-rep.gz ncu_counts.ncu-rep.gz ncu_roofline_raw.csv ncu_counts_raw.csv && tar cf $OUT/peaks.tar h200_peaks*)
ls -la $OUT
echo "wall $(( $(date +%s) - t0 )) s"

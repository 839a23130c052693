"""One launch each of the warp-specialized builds at one shape, for ncu (the third ladder round, level 8's 2x):
    ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:gemm_ \
        python3 tools/device/ncu_cluster.py 4096 4096 4096 7 8 l09_coop_cluster 9
Compiles and warms each build first outside the profiled range (cudaProfilerStart/Stop with
ncu --profile-from-start off), then launches each once."""
import sys

import cupy as cp

from roofline.ladder import gpu
from roofline.ladder.build import get_kernel
from roofline.ladder.registry import VARIANTS, get_level

m, n, k = (int(x) for x in sys.argv[1:4])
levels = [get_level(int(t)) if t.isdigit() else VARIANTS[t] for t in sys.argv[4:]]
a = gpu.random_bf16((m, k), 1)
b = gpu.random_bf16((n, k), 2)
c = cp.empty((m, n), dtype=cp.uint16)
for lv in levels:
    get_kernel(lv)
    gpu.launch(lv, a, b, c, m, n, k)
cp.cuda.runtime.deviceSynchronize()
cp.cuda.runtime.profilerStart()
for lv in levels:
    gpu.launch(lv, a, b, c, m, n, k)
    cp.cuda.runtime.deviceSynchronize()
cp.cuda.runtime.profilerStop()
print("launched", [lv.name for lv in levels])

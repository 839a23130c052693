#!/usr/bin/env python3
"""NCCL-layout per-rank traces, derived from the real gloo TP=2 traces (fixtures/traces_tp/tp2/).

NCCL refuses two ranks on one GPU, so the real TP=2 run on the one-GPU machine used gloo, which
leaves no collective kernel. This script (CPU only, deterministic, standard library) rewrites
each real rank trace into the layout Kineto writes for an NCCL run, keeping every real timing:

* each host-side ``gloo:all_reduce`` (user_annotation) becomes what ProcessGroupNCCL records on
  the host, a short ``nccl:all_reduce`` / ``nccl:_allgather_base`` user_annotation, plus a
  ``record_param_comms`` cpu_op carrying the collective record (Collective name, In / Out msg
  nelems, Group size, dtype, Process Group Name / Description / Ranks, Rank), plus an NCCL kernel
  on its own stream whose start and duration are the gloo collective's (so the ranks' real
  arrival skew and their common end are kept);
* the odd collectives of each rank (the MLP's) become ``ncclDevKernel_AllGather_RING_LL`` with
  In msg nelems = N/2 and Out msg nelems = N and their record on the record_param_comms op only
  (the lookup by External id); the even ones (attention's) ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``
  with the record on the kernel itself, as Kineto writes it;
* distributedInfo says backend nccl.

The durations are gloo's (host copies and a CPU reduction), not NVLink's: the files test the
reading, the alignment and the model, not the speed of a link. Usage:

    python3 tools/make_nccl_layout_traces.py fixtures/traces_tp/tp2 fixtures/traces_tp/nccl_layout
"""
from __future__ import annotations

import gzip
import json
import os
import re
import sys

_GLOO = re.compile(r'\n  \{\n    "ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": (\d+), '
                   r'"tid": (\d+),\n    "ts": ([0-9.]+), "dur": ([0-9.]+),\n    "args": \{\n      "External id": (\d+),'
                   r'[^\n]*"Input Dims": \[\[(\d+), (\d+)\]\][^\n]*\n    \}\n  \},')
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NCCL_STREAM = 23


def _record(coll: str, n_in: int, n_out: int, rank: int, world: int) -> str:
    ranks = ", ".join(str(r) for r in range(world))
    return (f'"Collective name": "{coll}", "In msg nelems": {n_in}, "Out msg nelems": {n_out}, "Group size": {world}, '
            f'"dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Global rank start": 0, '
            f'"Global rank stride": 1, "Process Group Name": "0", "Process Group Description": "default_pg", '
            f'"Process Group Ranks": "[{ranks}]", "Rank": {rank}')


def _items(m, i: int, ext: int, corr: int, rank: int, world: int) -> str:
    pid, tid, ts, dur, _, a, b = m.groups()
    n = int(a) * int(b)
    gather = i % 2 == 1
    coll, kname = ("_allgather_base", AG) if gather else ("allreduce", AR)
    n_in = n // world if gather else n
    rec = _record(coll, n_in, n, rank, world)
    host = "nccl:_allgather_base" if gather else "nccl:all_reduce"
    kargs = "" if gather else ", " + rec
    return (f'\n  {{\n    "ph": "X", "cat": "user_annotation", "name": "{host}", "pid": {pid}, "tid": {pid},\n'
            f'    "ts": {ts}, "dur": 21.500,\n    "args": {{\n      "External id": {ext - 1},"Record function id": 0, '
            f'"Ev Idx": 0\n    }}\n  }},'
            f'\n  {{\n    "ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": {pid}, "tid": {pid},\n'
            f'    "ts": {ts}, "dur": 15.250,\n    "args": {{\n      "External id": {ext},"Record function id": 0, '
            f'"Concrete Inputs": [""], "Input type": ["c10::BFloat16"], "Input Strides": [[{b}, 1]], '
            f'"Input Dims": [[{a}, {b}]], {rec}, "Ev Idx": 0\n    }}\n  }},'
            f'\n  {{\n    "ph": "X", "cat": "kernel", "name": "{kname}", "pid": 0, "tid": {NCCL_STREAM},\n'
            f'    "ts": {ts}, "dur": {dur},\n    "args": {{\n      "External id": {ext},      "queued": 0, '
            f'"device": 0, "context": 1,      "stream": {NCCL_STREAM}, "correlation": {corr},      '
            f'"registers per thread": 96,      "shared memory": 0,      "blocks per SM": 0.015152,      '
            f'"warps per SM": 0.272727,      "grid": [2, 1, 1],      "block": [576, 1, 1],      '
            f'"est. achieved occupancy %": 0{kargs}\n    }}\n  }},')


def convert(src: str, dst: str) -> int:
    with gzip.open(src, "rt", encoding="utf-8") as f:
        text = f.read()
    head = json.loads(text[:text.index('"traceEvents"')].rstrip().rstrip(",") + "}")
    di = head["distributedInfo"]
    rank, world = di["rank"], di["world_size"]
    text = text.replace('"backend": "gloo"', '"backend": "nccl"').replace('"cpu:gloo,cuda:gloo"', '"cuda:nccl"')
    out, pos, i = [], 0, 0
    for m in _GLOO.finditer(text):
        out.append(text[pos:m.start()])
        out.append(_items(m, i, 900000 + 2 * i + 1, 900000 + i, rank, world))
        pos, i = m.end(), i + 1
    out.append(text[pos:])
    with gzip.open(dst, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write("".join(out))
    return i


def main(argv=None) -> int:
    a = argv if argv is not None else sys.argv[1:]
    src_dir, dst_dir = a[0], a[1]
    os.makedirs(dst_dir, exist_ok=True)
    for name in sorted(os.listdir(src_dir)):
        if name.startswith("rank") and name.endswith(".json.gz"):
            n = convert(os.path.join(src_dir, name), os.path.join(dst_dir, name))
            print(f"{name}: {n} collectives rewritten as NCCL kernels")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

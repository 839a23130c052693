#!/usr/bin/env python3
"""One small step for the Nsight Compute DEFAULT-set fixture (fixtures/ncu_default/: DRAM bytes
derived from a default-set report, checked against measured bytes): a decode attention's materialised GQA broadcast and a GEMM, three kernels in an NVTX
range "ncu_default" (everything before it is warm-up: cuBLAS handle, allocator).

The broadcast is transformers' own ``repeat_kv`` (transformers.models.llama.modeling_llama: expand
then reshape, one copy kernel per call) applied to the key and the value of a Qwen3-14B-shaped
static cache (batch 24, 8 KV heads, 2560 slots, head_dim 128, bf16) for 40 query heads (5x); the
GEMM is ``torch.nn.functional.linear`` of a [2048, 5120] bf16 activation by a [5120, 5120] weight.

    ncu --clock-control none --nvtx --nvtx-include "ncu_default/" -c 3 -o REPORT python3 THIS
"""
import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import repeat_kv

B, KV, S, D, NREP = 24, 8, 2560, 128, 5
M, K, N = 2048, 5120, 5120


def step(k, v, x, w):
    kk = repeat_kv(k, NREP)
    vv = repeat_kv(v, NREP)
    y = F.linear(x, w)
    return kk, vv, y


def main():
    torch.manual_seed(0)
    dt = torch.bfloat16
    k = torch.randn(B, KV, S, D, device="cuda", dtype=dt)
    v = torch.randn(B, KV, S, D, device="cuda", dtype=dt)
    x = torch.randn(M, K, device="cuda", dtype=dt)
    w = torch.randn(N, K, device="cuda", dtype=dt)
    for _ in range(2):
        step(k, v, x, w)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("ncu_default")
    out = step(k, v, x, w)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print("shapes", [tuple(t.shape) for t in out], "bytes in (k, v, x, w)",
          [t.numel() * t.element_size() for t in (k, v, x, w)],
          "bytes out", [t.numel() * t.element_size() for t in out])


if __name__ == "__main__":
    main()

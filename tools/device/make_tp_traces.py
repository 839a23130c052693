#!/usr/bin/env python3
"""Per-rank traces of a tensor-parallel decode step, for `roofline topn RANK0 RANK1 ...` and its tests.

Run on the device machine (needs torch only; must not import roofline). ``--world N`` processes
(torch.multiprocessing) share the ONE GPU; each holds its 1/N of a Llama-3-8B-shaped bf16 layer,
split by hand the Megatron way:

  attention: q/k/v column-parallel (32/N query heads, 8/N KV heads of 128 per rank), o_proj
             row-parallel (its partial sums are all-reduced);
  MLP:       gate/up column-parallel (14336/N per rank), down row-parallel (all-reduced).

RMSNorm and the residual are replicated. The all-reduce goes through torch.distributed with the
gloo backend: NCCL refuses two ranks on one GPU, so these traces hold no NCCL kernels (gloo
copies the tensor to the host, reduces it there and copies it back); the collectives show as
host-side ops (`record_param_comms` / `c10d::allreduce_`) and memcpy activity.

Each rank profiles ``--steps`` decode steps (batch ``--batch``, static KV cache at context
``--ctx``..) with torch.profiler (record_shapes=True), each step inside record_function("decode_step"),
and writes ``rank<r>.json.gz``. ``--straggler-rank R --straggler-ms T`` makes rank R sleep T ms on the
host before the first all-reduce of every step, so the other ranks wait for it.

``meta_rank<r>.json`` (per rank): the profiler's own per-kernel totals (key_averages and raw kineto
sums), the wall and monotonic clocks (time.time_ns, time.monotonic_ns) just before and after every
all-reduce call, the step count, the split and the shapes, so tests check the merged Top-N and the
waiting against an independent count.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_trace_fixtures import kernel_totals  # noqa: E402  (torch-only helper)

CFG = dict(d=4096, n_q=32, n_kv=8, hd=128, d_ff=14336)


class TPLayer:
    """One decoder layer's 1/world shard (weights as plain tensors: x @ W.t() is nn.Linear's form)."""

    def __init__(self, c, world, dev, dt, batch, ctx_max):
        d, hd = c["d"], c["hd"]
        self.hq, self.hk, self.hd = c["n_q"] // world, c["n_kv"] // world, hd
        self.ff = c["d_ff"] // world

        def w(n, k):
            return torch.randn(n, k, device=dev, dtype=dt) * (k ** -0.5)

        self.wq, self.wk, self.wv = w(self.hq * hd, d), w(self.hk * hd, d), w(self.hk * hd, d)
        self.wo = w(d, self.hq * hd)                 # row-parallel: partial sums
        self.wg, self.wu = w(self.ff, d), w(self.ff, d)
        self.wd = w(d, self.ff)                      # row-parallel: partial sums
        self.n1 = torch.ones(d, device=dev, dtype=dt)
        self.n2 = torch.ones(d, device=dev, dtype=dt)
        self.ck = torch.randn(batch, self.hk, ctx_max, hd, device=dev, dtype=dt)
        self.cv = torch.randn(batch, self.hk, ctx_max, hd, device=dev, dtype=dt)

    def forward(self, x, pos, allreduce):
        b = x.shape[0]
        h = F.rms_norm(x, (x.shape[-1],), self.n1, 1e-6)
        q = F.linear(h, self.wq).view(b, 1, self.hq, self.hd).transpose(1, 2)
        k = F.linear(h, self.wk).view(b, 1, self.hk, self.hd).transpose(1, 2)
        v = F.linear(h, self.wv).view(b, 1, self.hk, self.hd).transpose(1, 2)
        self.ck[:, :, pos:pos + 1].copy_(k)
        self.cv[:, :, pos:pos + 1].copy_(v)
        y = F.scaled_dot_product_attention(q, self.ck[:, :, :pos + 1], self.cv[:, :, :pos + 1], enable_gqa=True)
        o = F.linear(y.transpose(1, 2).reshape(b, -1), self.wo)
        x = x + allreduce(o, "attn_o")
        h = F.rms_norm(x, (x.shape[-1],), self.n2, 1e-6)
        m = F.linear(F.silu(F.linear(h, self.wg)) * F.linear(h, self.wu), self.wd)
        return x + allreduce(m, "mlp_down")


def _worker(rank, a, port, out):
    dev, dt = a.device, torch.bfloat16
    cuda = dev == "cuda"
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world)
    torch.manual_seed(1000 + rank)
    ctx_max = a.ctx + a.steps + a.warmup + 2
    layers = [TPLayer(CFG, a.world, dev, dt, a.batch, ctx_max) for _ in range(a.layers)]
    x0 = torch.randn(a.batch, CFG["d"], device=dev, dtype=dt)
    calls = []            # one record per all-reduce call inside the profiled window
    state = {"profiling": False, "first_in_step": False}

    def allreduce(t, site):
        if rank == a.straggler_rank and state["first_in_step"] and a.straggler_ms > 0:
            time.sleep(a.straggler_ms / 1000.0)     # a host-side straggler: the others wait for it
        state["first_in_step"] = False
        t0, m0 = time.time_ns(), time.monotonic_ns()
        dist.all_reduce(t)
        t1, m1 = time.time_ns(), time.monotonic_ns()
        if state["profiling"]:
            calls.append({"site": site, "nelems": t.numel(), "dtype": str(t.dtype), "t_call_ns": t0, "t_return_ns": t1,
                          "mono_call_ns": m0, "mono_return_ns": m1})
        return t

    def step(i):
        state["first_in_step"] = True
        x = x0
        for L in layers:
            x = L.forward(x, a.ctx + i, allreduce)
        return x

    with torch.inference_mode():
        for i in range(a.warmup):
            step(i)
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            state["profiling"] = True
            for i in range(a.steps):
                with torch.profiler.record_function("decode_step"):
                    step(a.warmup + i)
            if cuda:
                torch.cuda.synchronize()
            state["profiling"] = False
    path = os.path.join(out, f"rank{rank}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as fi, gzip.open(path + ".gz", "wb", compresslevel=9) as fo:
        shutil.copyfileobj(fi, fo)
    raw_bytes = os.path.getsize(path)
    os.remove(path)
    ka, raw = kernel_totals(prof)
    meta = dict(rank=rank, world_size=a.world, backend="gloo", torch=torch.__version__,
                device=torch.cuda.get_device_name() if cuda else "cpu", steps=a.steps, layers=a.layers, batch=a.batch,
                ctx_first=a.ctx + a.warmup, model=CFG, per_rank=dict(n_q=CFG["n_q"] // a.world,
                n_kv=CFG["n_kv"] // a.world, d_ff=CFG["d_ff"] // a.world),
                straggler_rank=a.straggler_rank, straggler_ms=a.straggler_ms, allreduce_calls=calls,
                trace=os.path.basename(path) + ".gz", trace_bytes_uncompressed=raw_bytes,
                trace_bytes_gz=os.path.getsize(path + ".gz"), key_averages=ka, kineto_kernel_totals=raw)
    with open(os.path.join(out, f"meta_rank{rank}.json"), "w") as f:
        json.dump(meta, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ctx", type=int, default=1024)
    p.add_argument("--straggler-rank", type=int, default=1)
    p.add_argument("--straggler-ms", type=float, default=3.0)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--device", default="cuda", help="cuda (the run), or cpu for a dry run of the script")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    mp.spawn(_worker, args=(a, a.port, a.out), nprocs=a.world, join=True)
    print(f"world {a.world}: {sorted(os.listdir(a.out))} in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()

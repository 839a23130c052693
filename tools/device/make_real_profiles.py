#!/usr/bin/env python3
"""Real H200 profiles at serving shapes, for `roofline topn` / `analyze` and their tests.

Run on the device machine (needs torch only; must not import roofline). A Llama-3-8B-shaped
bf16 decoder (d=4096, 32 query / 8 KV heads of 128, d_ff=14336, vocab 32000), written the way
Hugging Face writes it (separate q/k/v and gate/up projections, RMSNorm with an fp32 upcast and a
`mean` reduction, an embedding gather, a KV cache grown with `torch.cat`), is profiled with
torch.profiler (record_shapes=True) in four runs:

  prefill_llama.json.gz     2 prefill steps of 4 x 4096 tokens (16384 tokens): GEMMs with several
                            shapes per cuBLAS kernel, flash attention, LM head over all tokens
  decode_b64_cat.json.gz    8 decode steps at batch 64, context 1024.., HF DynamicCache (torch.cat)
  graph_decode_mixed.json.gz   one eager decode step + 6 CUDA-graph replays of the same step
  graph_decode_replay_only.json.gz   6 CUDA-graph replays only (no eager step in the window)

``--ncu-kernels`` instead runs a handful of these kernels once inside an NVTX range named
``ncu_region`` (warm-up outside it), for Nsight Compute reports.

fixtures_meta.json: per trace the profiler's own per-kernel totals (key_averages), step counts
and the shapes the script used (so tests check the Top-N against an independent count).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_trace_fixtures import profile  # noqa: E402  (torch-only helpers)

CFG = dict(vocab=32000, d=4096, n_q=32, n_kv=8, hd=128, d_ff=14336)


class HFRMSNorm(nn.Module):
    """LlamaRMSNorm as transformers writes it: fp32 upcast, pow, mean, rsqrt, downcast, scale."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        h = x.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.eps)
        return self.weight * h.to(dt)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hq, hk, hd, ff = c["d"], c["n_q"], c["n_kv"], c["hd"], c["d_ff"]
        self.hq, self.hk, self.hd = hq, hk, hd
        self.n1, self.n2 = HFRMSNorm(d), HFRMSNorm(d)
        self.q = nn.Linear(d, hq * hd, bias=False)
        self.k = nn.Linear(d, hk * hd, bias=False)
        self.v = nn.Linear(d, hk * hd, bias=False)
        self.o = nn.Linear(hq * hd, d, bias=False)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def mlp(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))

    def prefill(self, x, b, s):
        h = self.n1(x)
        q = self.q(h).view(b, s, self.hq, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.hk, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.hk, self.hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b * s, -1))
        return x + self.mlp(self.n2(x))

    def decode_cat(self, x, cache):            # cache: dict with "k", "v" [b, hk, ctx, hd]
        b = x.shape[0]
        h = self.n1(x)
        q = self.q(h).view(b, 1, self.hq, self.hd).transpose(1, 2)
        k = self.k(h).view(b, 1, self.hk, self.hd).transpose(1, 2)
        v = self.v(h).view(b, 1, self.hk, self.hd).transpose(1, 2)
        cache["k"] = torch.cat([cache["k"], k], dim=-2)   # HF DynamicCache.update
        cache["v"] = torch.cat([cache["v"], v], dim=-2)
        y = F.scaled_dot_product_attention(q, cache["k"], cache["v"], enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, -1))
        return x + self.mlp(self.n2(x))

    def decode_static(self, x, ck, cv, pos):   # static cache, pos a 1-element device tensor
        b = x.shape[0]
        h = self.n1(x)
        q = self.q(h).view(b, 1, self.hq, self.hd).transpose(1, 2)
        k = self.k(h).view(b, 1, self.hk, self.hd).transpose(1, 2)
        v = self.v(h).view(b, 1, self.hk, self.hd).transpose(1, 2)
        ck.index_copy_(2, pos, k)
        cv.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, ck, cv, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, -1))
        return x + self.mlp(self.n2(x))


class Model(nn.Module):
    def __init__(self, c, n_layers):
        super().__init__()
        self.c = dict(c, n_layers=n_layers)
        self.emb = nn.Embedding(c["vocab"], c["d"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(n_layers))
        self.norm = HFRMSNorm(c["d"])
        self.lm_head = nn.Linear(c["d"], c["vocab"], bias=False)

    def prefill(self, toks):
        b, s = toks.shape
        x = self.emb(toks.reshape(-1))
        for L in self.layers:
            x = L.prefill(x, b, s)
        return self.lm_head(self.norm(x))        # logits for every token (as an eval/scoring pass)

    def decode_cat(self, toks, caches):
        x = self.emb(toks)
        for L, c in zip(self.layers, caches):
            x = L.decode_cat(x, c)
        return self.lm_head(self.norm(x))

    def decode_static(self, toks, caches, pos):
        x = self.emb(toks)
        for L, (ck, cv) in zip(self.layers, caches):
            x = L.decode_static(x, ck, cv, pos)
        return self.lm_head(self.norm(x))


def gemm_list(c, M, m_head, n_layers):
    d, ff, V, hq, hk, hd = c["d"], c["d_ff"], c["vocab"], c["n_q"], c["n_kv"], c["hd"]
    per = [("q", M, hq * hd, d), ("k", M, hk * hd, d), ("v", M, hk * hd, d), ("o", M, d, hq * hd),
           ("gate", M, ff, d), ("up", M, ff, d), ("down", M, d, ff)]
    out = [dict(layer=n, M=m, N=nn_, K=k, calls_per_step=n_layers) for n, m, nn_, k in per]
    out.append(dict(layer="lm_head", M=m_head, N=V, K=d, calls_per_step=1))
    return out


def run_traces(a):
    dev, dt = "cuda", torch.bfloat16
    torch.manual_seed(0)
    meta = dict(torch=torch.__version__, device=torch.cuda.get_device_name(), dtype="bf16", model=CFG,
                traces={})
    t0 = time.time()
    with torch.inference_mode():
        # ---- prefill
        m = Model(CFG, a.prefill_layers).to(dev, dt).eval()
        toks = torch.randint(0, CFG["vocab"], (a.prefill_batch, a.prefill_len), device=dev)
        for _ in range(2):
            m.prefill(toks)
        torch.cuda.synchronize()

        def run_prefill(prof):
            for _ in range(a.prefill_steps):
                with torch.profiler.record_function("prefill_step"):
                    m.prefill(toks)
                prof.step()
        r = profile(run_prefill, os.path.join(a.out, "prefill_llama.json.gz"))
        M = a.prefill_batch * a.prefill_len
        r.update(regime="prefill", steps={"prefill": a.prefill_steps, "decode": 0}, batch=a.prefill_batch,
                 seq_len=a.prefill_len, n_layers=a.prefill_layers,
                 gemm_shapes=gemm_list(CFG, M, M, a.prefill_layers),
                 attn_shapes=[dict(op="sdpa", batch=a.prefill_batch, q_len=a.prefill_len, seq_len=a.prefill_len,
                                   n_q_heads=CFG["n_q"], n_kv_heads=CFG["n_kv"], head_dim=CFG["hd"],
                                   causal=True, calls_per_step=a.prefill_layers)])
        meta["traces"]["prefill_llama"] = r
        print("prefill done", round(time.time() - t0, 1), "s", flush=True)
        del m
        torch.cuda.empty_cache()

        # ---- batch-64 decode with a torch.cat KV cache
        m = Model(CFG, a.decode_layers).to(dev, dt).eval()
        B, ctx0 = a.decode_batch, a.context
        tok = torch.randint(0, CFG["vocab"], (B,), device=dev)

        def fresh():
            return [dict(k=torch.randn(B, CFG["n_kv"], ctx0, CFG["hd"], device=dev, dtype=dt),
                         v=torch.randn(B, CFG["n_kv"], ctx0, CFG["hd"], device=dev, dtype=dt))
                    for _ in range(a.decode_layers)]
        caches = fresh()
        for _ in range(2):
            m.decode_cat(tok, caches)
        caches = fresh()
        torch.cuda.synchronize()

        def run_decode(prof):
            for _ in range(a.decode_steps):
                with torch.profiler.record_function("decode_step"):
                    m.decode_cat(tok, caches)
                prof.step()
        r = profile(run_decode, os.path.join(a.out, "decode_b64_cat.json.gz"))
        r.update(regime="decode", steps={"prefill": 0, "decode": a.decode_steps}, batch=B, n_layers=a.decode_layers,
                 context_len_first=ctx0 + 1, context_len_last=ctx0 + a.decode_steps,
                 gemm_shapes=gemm_list(CFG, B, B, a.decode_layers),
                 cat_shapes=[dict(inputs=[[B, CFG["n_kv"], ctx0 + i, CFG["hd"]], [B, CFG["n_kv"], 1, CFG["hd"]]],
                                  dim=-2, calls=2 * a.decode_layers) for i in range(a.decode_steps)],
                 embedding=dict(rows=B, table=[CFG["vocab"], CFG["d"]]))
        meta["traces"]["decode_b64_cat"] = r
        print("decode done", round(time.time() - t0, 1), "s", flush=True)
        del caches
        torch.cuda.empty_cache()

        # ---- CUDA-graph decode (static cache)
        Bg, maxlen = a.graph_batch, a.context + 64
        cs = [(torch.randn(Bg, CFG["n_kv"], maxlen, CFG["hd"], device=dev, dtype=dt),
               torch.randn(Bg, CFG["n_kv"], maxlen, CFG["hd"], device=dev, dtype=dt)) for _ in range(a.decode_layers)]
        tg = torch.randint(0, CFG["vocab"], (Bg,), device=dev)
        pos = torch.tensor([a.context], device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m.decode_static(tg, cs, pos)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = m.decode_static(tg, cs, pos)
        torch.cuda.synchronize()

        def run_graph_mixed(prof):
            with torch.profiler.record_function("decode_step"):
                m.decode_static(tg, cs, pos)            # one eager step: gives the shapes
            prof.step()
            for _ in range(6):
                with torch.profiler.record_function("decode_step"):
                    g.replay()
                prof.step()

        def run_graph_only(prof):
            for _ in range(6):
                with torch.profiler.record_function("decode_step"):
                    g.replay()
                prof.step()
        common = dict(regime="decode", batch=Bg, n_layers=a.decode_layers, static_cache_len=maxlen,
                      gemm_shapes=gemm_list(CFG, Bg, Bg, a.decode_layers))
        r = profile(run_graph_mixed, os.path.join(a.out, "graph_decode_mixed.json.gz"))
        r.update(common, steps={"prefill": 0, "decode": 7}, eager_steps=1, graph_replays=6)
        meta["traces"]["graph_decode_mixed"] = r
        r = profile(run_graph_only, os.path.join(a.out, "graph_decode_replay_only.json.gz"))
        r.update(common, steps={"prefill": 0, "decode": 6}, eager_steps=0, graph_replays=6)
        meta["traces"]["graph_decode_replay_only"] = r
        del out
    meta["profile_wall_s"] = round(time.time() - t0, 2)
    with open(os.path.join(a.out, "fixtures_meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    for k, v in meta["traces"].items():
        tot = sum(x["device_time_total_us"] for x in v["key_averages"].values())
        print(f"{k}: {v['trace_bytes_uncompressed']/1e6:.2f} MB raw, {v['trace_bytes_gz']/1e6:.2f} MB gz, "
              f"{len(v['key_averages'])} kernel names, {tot:.1f} us device time")


def run_ncu_kernels(a):
    """A few kernels of known work, once each inside the NVTX range `ncu_region`."""
    dev, dt = "cuda", torch.bfloat16
    torch.manual_seed(1)
    d, ff, V = CFG["d"], CFG["d_ff"], CFG["vocab"]
    table = torch.randn(V, d, device=dev, dtype=dt)
    ids = torch.randint(0, V, (64,), device=dev)
    x64 = torch.randn(64, d, device=dev, dtype=dt)
    wq = torch.randn(d, d, device=dev, dtype=dt) / 64
    wdown = torch.randn(d, ff, device=dev, dtype=dt) / 120
    h64 = torch.randn(64, ff, device=dev, dtype=dt)
    xp = torch.randn(4096, d, device=dev, dtype=dt)
    kc = torch.randn(64, 8, 1024, 128, device=dev, dtype=dt)
    kn = torch.randn(64, 8, 1, 128, device=dev, dtype=dt)
    xr = torch.randn(16384, d, device=dev, dtype=dt)

    def work():
        F.embedding(ids, table)                               # gather 64 rows of 32000 x 4096
        xr.to(torch.float32).mean(-1, keepdim=True)           # copy bf16->fp32, mean over the last dim
        F.linear(x64, wq)                                     # 64 x 4096 x 4096
        F.linear(h64, wdown)                                  # 64 x 4096 x 14336 (split-K?)
        F.linear(xp, wq)                                      # 4096 x 4096 x 4096
        torch.cat([kc, kn], dim=-2)                           # KV cache cat
    for _ in range(3):
        work()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("ncu_region")
    work()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print("ncu kernels done")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--prefill-layers", type=int, default=2)
    p.add_argument("--prefill-steps", type=int, default=2)
    p.add_argument("--prefill-batch", type=int, default=4)
    p.add_argument("--prefill-len", type=int, default=4096)
    p.add_argument("--decode-layers", type=int, default=4)
    p.add_argument("--decode-steps", type=int, default=8)
    p.add_argument("--decode-batch", type=int, default=64)
    p.add_argument("--graph-batch", type=int, default=32)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--ncu-kernels", action="store_true")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    run_ncu_kernels(a) if a.ncu_kernels else run_traces(a)


if __name__ == "__main__":
    sys.exit(main())

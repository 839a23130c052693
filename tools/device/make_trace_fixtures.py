#!/usr/bin/env python3
"""Make the real trace fixtures of `roofline topn` on a GPU (run on the device machine).

A small bf16 decoder-only transformer (token-flattened activations as vLLM/SGLang keep them:
QKV / out-proj / gate-up / down linears, SDPA attention, RMSNorm and a final LayerNorm, SiLU MLP,
LM head) runs

  * a prefill: ``--prefill-steps`` steps of ``--prefill-batch`` sequences x ``--prefill-len`` tokens,
  * a decode loop: ``--decode-steps`` steps of batch ``--decode-batch`` with a KV cache,
  * a mixed run (1 prefill step then ``--mixed-decode-steps`` decode steps, each step inside a
    record_function range named "prefill_step" / "decode_step"),

each under ``torch.profiler`` with ``record_shapes=True``. Written to ``--out``:

  prefill.json.gz, decode.json.gz, mixed.json.gz   chrome traces (export_chrome_trace, gzipped)
  fixtures_meta.json   per trace: the profiler's own per-kernel totals (key_averages: device time
                       and count), the step counts, and the GEMM / attention shapes the script used

``--ncu-small`` instead runs a few kernels (linear, layer_norm, SiLU, twice) for a tiny ncu report.
This script needs only torch; it must not import roofline (the device image lacks its deps).
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
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Layer(nn.Module):
    def __init__(self, d: int, n_heads: int, d_ff: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d // n_heads
        self.norm1 = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)      # aten::mm
        self.o = nn.Linear(d, d, bias=True)              # aten::addmm (bias)
        self.norm2 = RMSNorm(d)
        self.gate_up = nn.Linear(d, 2 * d_ff, bias=False)
        self.down = nn.Linear(d_ff, d, bias=False)

    def attn_prefill(self, x, b, s):
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)          # [b, h, s, d]
        return self.o(y.transpose(1, 2).reshape(b * s, -1)), k, v

    def attn_decode(self, x, cache_k, cache_v, pos):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 1, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        cache_k[:, :, pos:pos + 1].copy_(k)
        cache_v[:, :, pos:pos + 1].copy_(v)
        y = F.scaled_dot_product_attention(q, cache_k[:, :, :pos + 1], cache_v[:, :, :pos + 1])
        return self.o(y.transpose(1, 2).reshape(b, -1))

    def mlp(self, x):
        g, u = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(g) * u)


class Model(nn.Module):
    def __init__(self, vocab=8192, d=1024, n_heads=8, d_ff=2816, n_layers=2):
        super().__init__()
        self.cfg = dict(vocab=vocab, d=d, n_heads=n_heads, head_dim=d // n_heads, d_ff=d_ff, n_layers=n_layers)
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, n_heads, d_ff) for _ in range(n_layers))
        self.norm_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def prefill(self, tokens):                      # tokens [b, s] -> logits of last token, caches
        b, s = tokens.shape
        x = self.emb(tokens.reshape(-1))            # [b*s, d]
        kv = []
        for L in self.layers:
            a, k, v = L.attn_prefill(L.norm1(x), b, s)
            x = x + a
            x = x + L.mlp(L.norm2(x))
            kv.append((k, v))
        last = x.view(b, s, -1)[:, -1]              # [b, d]
        return self.lm_head(self.norm_f(last)), kv

    def decode(self, tokens, caches, pos):          # tokens [b]
        x = self.emb(tokens)
        for L, (ck, cv) in zip(self.layers, caches):
            x = x + L.attn_decode(L.norm1(x), ck, cv, pos)
            x = x + L.mlp(L.norm2(x))
        return self.lm_head(self.norm_f(x))


def gemm_shapes(cfg, m_tokens, m_head):
    """The (M, N, K) of every linear of one forward step, as the script calls them."""
    d, ff, V = cfg["d"], cfg["d_ff"], cfg["vocab"]
    per_layer = [("qkv", m_tokens, 3 * d, d, "aten::mm"), ("o", m_tokens, d, d, "aten::addmm"),
                 ("gate_up", m_tokens, 2 * ff, d, "aten::mm"), ("down", m_tokens, d, ff, "aten::mm")]
    out = []
    for name, M, N, K, op in per_layer:
        out.append(dict(layer=name, M=M, N=N, K=K, op=op, calls_per_step=cfg["n_layers"]))
    out.append(dict(layer="lm_head", M=m_head, N=V, K=d, op="aten::mm", calls_per_step=1))
    return out


def kernel_totals(prof):
    """The profiler's own per-kernel totals: key_averages (us) and raw kineto events (ns)."""
    ka = {}
    for e in prof.key_averages():
        dt = getattr(e, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0.0)
        ka[e.key] = {"device_time_total_us": float(t), "count": int(e.count)}
    raw = {}
    try:
        for ev in prof.profiler.kineto_results.events():
            if "CUDA" not in str(ev.device_type()):
                continue
            r = raw.setdefault(ev.name(), {"duration_ns": 0, "count": 0})
            r["duration_ns"] += int(ev.duration_ns())
            r["count"] += 1
    except Exception as exc:  # API drift: keep key_averages, say why raw is missing
        raw = {"_error": repr(exc)}
    return ka, raw


def profile(fn, path):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        fn(prof)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    raw_path = path[:-3]
    prof.export_chrome_trace(raw_path)
    with open(raw_path, "rb") as fi, gzip.open(path, "wb", compresslevel=9) as fo:
        shutil.copyfileobj(fi, fo)
    size_raw = os.path.getsize(raw_path)
    os.remove(raw_path)
    ka, raw = kernel_totals(prof)
    return dict(trace=os.path.basename(path), trace_bytes_uncompressed=size_raw,
                trace_bytes_gz=os.path.getsize(path), key_averages=ka, kineto_kernel_totals=raw)


def main_traces(a):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16
    torch.manual_seed(0)
    model = Model(n_layers=a.layers).to(dev, dtype).eval()
    cfg = model.cfg
    h, hd, L = cfg["n_heads"], cfg["head_dim"], cfg["n_layers"]
    maxlen = a.prefill_len + a.decode_steps + a.mixed_decode_steps + 8

    def new_caches(b, filled):
        cs = [(torch.randn(b, h, maxlen, hd, device=dev, dtype=dtype),
               torch.randn(b, h, maxlen, hd, device=dev, dtype=dtype)) for _ in range(L)]
        return cs

    toks_p = torch.randint(0, cfg["vocab"], (a.prefill_batch, a.prefill_len), device=dev)
    toks_d = torch.randint(0, cfg["vocab"], (a.decode_batch,), device=dev)
    caches = new_caches(a.decode_batch, a.prefill_len)

    with torch.inference_mode():
        for _ in range(3):  # warm-up: cuBLAS handles, SDPA backend selection, allocator
            model.prefill(toks_p)
            model.decode(toks_d, caches, a.prefill_len)
        if dev == "cuda":
            torch.cuda.synchronize()

        def run_prefill(prof):
            for _ in range(a.prefill_steps):
                with torch.profiler.record_function("prefill_step"):
                    model.prefill(toks_p)
                prof.step()

        def run_decode(prof, steps=a.decode_steps, start=a.prefill_len):
            for i in range(steps):
                with torch.profiler.record_function("decode_step"):
                    model.decode(toks_d, caches, start + i)
                prof.step()

        def run_mixed(prof):
            with torch.profiler.record_function("prefill_step"):
                model.prefill(toks_p)
            prof.step()
            run_decode(prof, a.mixed_decode_steps, a.prefill_len)

        meta = dict(torch=torch.__version__, device=torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                    dtype="bf16", model=cfg, traces={})
        t0 = time.time()
        r = profile(run_prefill, os.path.join(a.out, "prefill.json.gz"))
        r.update(regime="prefill", steps={"prefill": a.prefill_steps, "decode": 0},
                 batch=a.prefill_batch, seq_len=a.prefill_len,
                 gemm_shapes=gemm_shapes(cfg, a.prefill_batch * a.prefill_len, a.prefill_batch),
                 attn_shapes=[dict(op="sdpa", batch=a.prefill_batch, q_len=a.prefill_len, seq_len=a.prefill_len,
                                   n_q_heads=h, n_kv_heads=h, head_dim=hd, causal=True, calls_per_step=L)])
        meta["traces"]["prefill"] = r
        r = profile(run_decode, os.path.join(a.out, "decode.json.gz"))
        r.update(regime="decode", steps={"prefill": 0, "decode": a.decode_steps}, batch=a.decode_batch,
                 context_len_first=a.prefill_len + 1, context_len_last=a.prefill_len + a.decode_steps,
                 gemm_shapes=gemm_shapes(cfg, a.decode_batch, a.decode_batch),
                 attn_shapes=[dict(op="sdpa", batch=a.decode_batch, q_len=1,
                                   seq_len=[a.prefill_len + 1 + i for i in range(a.decode_steps)],
                                   n_q_heads=h, n_kv_heads=h, head_dim=hd, causal=False, calls_per_step=L)])
        meta["traces"]["decode"] = r
        r = profile(run_mixed, os.path.join(a.out, "mixed.json.gz"))
        r.update(regime="mixed", steps={"prefill": 1, "decode": a.mixed_decode_steps},
                 ranges={"prefill": "prefill_step", "decode": "decode_step"},
                 gemm_shapes={"prefill": gemm_shapes(cfg, a.prefill_batch * a.prefill_len, a.prefill_batch),
                              "decode": gemm_shapes(cfg, a.decode_batch, a.decode_batch)})
        meta["traces"]["mixed"] = r
        meta["profile_wall_s"] = round(time.time() - t0, 2)
    with open(os.path.join(a.out, "fixtures_meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    for k, v in meta["traces"].items():
        n_k = len(v["key_averages"])
        tot = sum(x["device_time_total_us"] for x in v["key_averages"].values())
        print(f"{k}: {v['trace_bytes_uncompressed']/1e6:.2f} MB raw, {v['trace_bytes_gz']/1e6:.2f} MB gz, "
              f"{n_k} kernel names, {tot:.1f} us device time")


def main_ncu_small(a):
    """Two rounds of linear -> layer_norm -> SiLU: six kernels for a small ncu report."""
    dev, dtype = ("cuda" if torch.cuda.is_available() else "cpu"), torch.bfloat16
    x = torch.randn(64, 4096, device=dev, dtype=dtype)
    w = torch.randn(4096, 4096, device=dev, dtype=dtype) / 64
    g = torch.ones(4096, device=dev, dtype=dtype)
    if dev == "cuda":
        torch.cuda.synchronize()
    for _ in range(2):
        y = F.linear(x, w)
        z = F.layer_norm(y, (4096,), g)
        x = F.silu(z)
    if dev == "cuda":
        torch.cuda.synchronize()
    print("ncu-small done", tuple(x.shape))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--prefill-steps", type=int, default=2)
    p.add_argument("--prefill-batch", type=int, default=4)
    p.add_argument("--prefill-len", type=int, default=128)
    p.add_argument("--decode-steps", type=int, default=8)
    p.add_argument("--decode-batch", type=int, default=8)
    p.add_argument("--mixed-decode-steps", type=int, default=4)
    p.add_argument("--ncu-small", action="store_true")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.ncu_small:
        main_ncu_small(a)
    else:
        main_traces(a)


if __name__ == "__main__":
    sys.exit(main())

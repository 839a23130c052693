#!/usr/bin/env python3
"""The real-model corpus: Hugging Face `transformers` models (random weights, a few layers, real
shapes) profiled on the H200, each with an Nsight Compute record of one step.

Run on the device machine (needs torch + transformers only; never imports roofline). Models are
built with ``AutoModelForCausalLM.from_config(cfg)`` under ``torch.device("cuda")`` in bf16; the code
paths are transformers' own (attention, RMSNorm, rotary, DynamicCache/StaticCache, the MoE experts
backends ``grouped_mm`` / ``batched_mm`` / ``eager``). The one piece written here is the fp8 linear
(``FP8RowwiseLinear``): rowwise-scaled e4m3 activations and weights through ``torch._scaled_mm``, the
form vLLM's and torchao's rowwise fp8 take (transformers' own fp8 path needs a kernel from the hub).

Each case writes ``<case>.json.gz`` (a torch.profiler Chrome trace, record_shapes=True, steps inside
``record_function("prefill_step" | "decode_step")`` unless the case says otherwise), and an entry
in ``corpus_meta.json``: the config, the workload, the step counts, and the profiler's own
per-kernel totals (key_averages), so tests check a Top-N against an independent count.

``--ncu`` instead runs ONE step of every case (same shapes as its trace) inside an NVTX range named
after the case, for ``ncu --nvtx --nvtx-include "<case>/" ...`` (see tools/device/call_corpus.sh).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import traceback

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

DT = torch.bfloat16
TINY = False  # --tiny: shrink every config (CPU smoke test of this script)


# ----------------------------------------------------------------------------- configs
def cfg_llama():
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, num_hidden_layers=2, vocab_size=128256,
                       max_position_embeddings=8192, rope_theta=500000.0)


def cfg_qwen3_moe():
    from transformers import Qwen3MoeConfig
    return Qwen3MoeConfig(hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                          num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
                          num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                          num_hidden_layers=2, vocab_size=151936, max_position_embeddings=8192)


def cfg_mixtral():
    from transformers import MixtralConfig
    return MixtralConfig(hidden_size=4096, intermediate_size=14336, num_local_experts=8,
                         num_experts_per_tok=2, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=128, num_hidden_layers=2, vocab_size=32000,
                         max_position_embeddings=8192)


def cfg_deepseek_v3():
    from transformers import DeepseekV3Config
    return DeepseekV3Config(hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
                            n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8,
                            n_group=8, topk_group=4, first_k_dense_replace=1,
                            num_attention_heads=128, num_key_value_heads=128, q_lora_rank=1536,
                            kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                            v_head_dim=128, num_hidden_layers=2, vocab_size=129280,
                            max_position_embeddings=8192)


def cfg_mistral_swa():
    from transformers import MistralConfig
    return MistralConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=128, num_hidden_layers=2, vocab_size=32768,
                         sliding_window=1024, max_position_embeddings=8192)


def cfg_qwen3_dense():
    """Qwen3-14B-shaped dense decoder (GQA 40 -> 8)."""
    from transformers import Qwen3Config
    return Qwen3Config(hidden_size=5120, intermediate_size=17408, num_attention_heads=40,
                       num_key_value_heads=8, head_dim=128, num_hidden_layers=2, vocab_size=151936,
                       max_position_embeddings=8192)


def cfg_llama_3b():
    """Llama-3.2-3B-shaped (GQA 24 -> 8, tied embeddings), three layers."""
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=3072, intermediate_size=8192, num_attention_heads=24,
                       num_key_value_heads=8, head_dim=128, num_hidden_layers=3, vocab_size=128256,
                       tie_word_embeddings=True, max_position_embeddings=8192, rope_theta=500000.0)


def cfg_gpt_oss():
    """gpt-oss-20B-shaped: attention sinks, GQA 64 -> 8 (head_dim 64), 32 experts top-4, one
    sliding-window (128) layer and one full layer; bf16 experts (no MXFP4 here)."""
    from transformers import GptOssConfig
    return GptOssConfig(hidden_size=2880, intermediate_size=2880, num_local_experts=32,
                        num_experts_per_tok=4, num_attention_heads=64, num_key_value_heads=8,
                        head_dim=64, sliding_window=128, num_hidden_layers=2,
                        layer_types=["sliding_attention", "full_attention"], vocab_size=201088,
                        max_position_embeddings=8192)


def cfg_gemma3():
    """Gemma-3-4B-shaped text model: three sliding-window (1024) layers and one global layer."""
    from transformers import Gemma3TextConfig
    return Gemma3TextConfig(hidden_size=2560, intermediate_size=10240, num_attention_heads=8,
                            num_key_value_heads=4, head_dim=256, num_hidden_layers=4,
                            vocab_size=262208, sliding_window=1024, query_pre_attn_scalar=256,
                            layer_types=["sliding_attention"] * 3 + ["full_attention"],
                            max_position_embeddings=8192)


def cfg_qwen3_next():
    """Qwen3-Next-80B-A3B-shaped hybrid: three gated delta-net (linear attention) layers and one
    full-attention layer, every layer an MoE (512 experts top-10 + a shared expert)."""
    from transformers import Qwen3NextConfig
    return Qwen3NextConfig(hidden_size=2048, num_hidden_layers=4, num_attention_heads=16,
                           num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
                           linear_num_value_heads=32, linear_key_head_dim=128,
                           linear_value_head_dim=128, linear_conv_kernel_dim=4, num_experts=512,
                           num_experts_per_tok=10, moe_intermediate_size=512,
                           shared_expert_intermediate_size=512, vocab_size=151936,
                           layer_types=["linear_attention"] * 3 + ["full_attention"],
                           max_position_embeddings=8192)


def cfg_bamba():
    """Bamba-9B-shaped Mamba2 hybrid: three Mamba2 layers and one attention layer (index 2)."""
    from transformers import BambaConfig
    return BambaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                       num_key_value_heads=8, num_hidden_layers=4, attn_layer_indices=[2],
                       mamba_n_heads=128, mamba_d_head=64, mamba_n_groups=1, mamba_d_state=128,
                       mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=256, vocab_size=128000,
                       max_position_embeddings=8192)


def cfg_granite_hybrid():
    """Granite-4.0-H-Tiny-shaped hybrid MoE (GraniteMoeHybrid): three Mamba2 layers and one attention
    layer (index 2, no positional embedding: "nope", as the released model), every layer an MoE (64
    experts top-6, expert width 512) beside a shared SwiGLU MLP (1024)."""
    from transformers import GraniteMoeHybridConfig
    return GraniteMoeHybridConfig(hidden_size=1536, intermediate_size=512, shared_intermediate_size=1024,
                                  num_local_experts=64, num_experts_per_tok=6, num_attention_heads=12,
                                  num_key_value_heads=4, num_hidden_layers=4,
                                  layer_types=["mamba", "mamba", "attention", "mamba"],
                                  position_embedding_type="nope", mamba_n_heads=48, mamba_d_head=64,
                                  mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2,
                                  mamba_chunk_size=256, vocab_size=100352, max_position_embeddings=8192,
                                  embedding_multiplier=12.0, logits_scaling=6.0, residual_multiplier=0.22,
                                  attention_multiplier=0.0078125)


def cfg_qwen3_4b():
    """Qwen3-4B-shaped dense decoder (GQA 32 -> 8, head_dim 128, tied embeddings)."""
    from transformers import Qwen3Config
    return Qwen3Config(hidden_size=2560, intermediate_size=9728, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, num_hidden_layers=2, vocab_size=151936,
                       tie_word_embeddings=True, max_position_embeddings=8192)


def cfg_qwen2_moe():
    """Qwen1.5-MoE-A2.7B-shaped (Qwen2MoE): 60 experts top-4 (expert width 1408) beside a gated
    shared expert (5632), MHA 16 heads."""
    from transformers import Qwen2MoeConfig
    return Qwen2MoeConfig(hidden_size=2048, intermediate_size=5632, moe_intermediate_size=1408,
                          shared_expert_intermediate_size=5632, num_experts=60, num_experts_per_tok=4,
                          norm_topk_prob=False, num_attention_heads=16, num_key_value_heads=16,
                          num_hidden_layers=2, vocab_size=151936, max_position_embeddings=8192)


def cfg_olmoe():
    """OLMoE-1B-7B-shaped: 64 experts top-8 (expert width 1024), MHA 16 heads, QK-norm."""
    from transformers import OlmoeConfig
    return OlmoeConfig(hidden_size=2048, intermediate_size=1024, num_experts=64,
                       num_experts_per_tok=8, num_attention_heads=16, num_key_value_heads=16,
                       num_hidden_layers=2, vocab_size=50304, max_position_embeddings=4096)


def cfg_mixtral_8x22b():
    """Mixtral-8x22B-shaped: 8 experts top-2 (expert width 16384), GQA 48 -> 8."""
    from transformers import MixtralConfig
    return MixtralConfig(hidden_size=6144, intermediate_size=16384, num_local_experts=8,
                         num_experts_per_tok=2, num_attention_heads=48, num_key_value_heads=8,
                         head_dim=128, num_hidden_layers=2, vocab_size=32768,
                         max_position_embeddings=8192, rope_theta=1000000.0)


def cfg_qwen2_7b():
    """Qwen2.5-7B-shaped dense decoder (GQA 28 -> 4, vocab 152064, untied LM head)."""
    from transformers import Qwen2Config
    return Qwen2Config(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                       num_key_value_heads=4, num_hidden_layers=2, vocab_size=152064,
                       tie_word_embeddings=False, max_position_embeddings=8192, rope_theta=1000000.0)


def shrink(cfg):
    """--tiny: the same model class at toy sizes (CPU smoke test)."""
    for k, v in dict(hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=512,
                     num_experts=8, n_routed_experts=8, n_group=2, topk_group=1, q_lora_rank=64,
                     kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16,
                     sliding_window=16, linear_num_key_heads=2, linear_num_value_heads=4,
                     linear_key_head_dim=16, linear_value_head_dim=16, mamba_n_heads=4,
                     mamba_d_head=64, mamba_d_state=16, mamba_chunk_size=8, num_local_experts=8,
                     shared_expert_intermediate_size=64, num_experts_per_tok=2,
                     query_pre_attn_scalar=32).items():
        if hasattr(cfg, k) and getattr(cfg, k) is not None:
            setattr(cfg, k, v)
    if getattr(cfg, "n_routed_experts", None):   # MLA: rotary runs over the rope part only
        cfg.num_key_value_heads = cfg.num_attention_heads
        cfg.head_dim = cfg.qk_rope_head_dim
        cfg.qk_head_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    return cfg


# ----------------------------------------------------------------------------- fp8 linear
class FP8RowwiseLinear(nn.Module):
    """nn.Linear in e4m3 with rowwise scales: activations quantised per token at run time (amax per
    row), weights per output channel once; torch._scaled_mm with scale_a [M,1], scale_b [1,N],
    fp32 accumulate, bf16 out."""

    def __init__(self, lin: nn.Linear):
        super().__init__()
        w = lin.weight.detach().float()
        s = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
        self.register_buffer("w8", (w / s).to(torch.float8_e4m3fn))   # [N, K]
        self.register_buffer("ws", s.t().contiguous())                  # [1, N]
        self.out_features = lin.out_features

    def forward(self, x):
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        xs = x2.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / 448.0
        x8 = (x2.float() / xs).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(x8, self.w8.t(), scale_a=xs, scale_b=self.ws, out_dtype=DT)
        return y.reshape(*shp[:-1], self.out_features)


def to_fp8(model):
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, mod in list(parent.named_children()):
                if isinstance(mod, nn.Linear):
                    setattr(parent, name, FP8RowwiseLinear(mod))
    return model


class FP8GroupedExperts(nn.Module):
    """The MoE experts of a Qwen3-MoE layer in e4m3 through torch._scaled_grouped_mm (written here:
    transformers has no fp8 grouped path that runs without a hub kernel). Routing as serving
    stacks do it: sort the (token, slot) pairs by expert (torch.sort), count rows per expert
    (bincount -> cumsum offsets), gather the rows, quantise them rowwise (amax per row, scale [R]),
    gate_up and down as grouped fp8 GEMMs with weights scaled per expert and output column
    (scale [E, N]), SiLU-and-mul between, the routing weight applied, and the rows scattered back
    with index_add_ (atomic adds into [T, H])."""

    def __init__(self, ex):
        super().__init__()
        self.E, self.act_fn = ex.num_experts, ex.act_fn
        for name in ("gate_up_proj", "down_proj"):
            w = getattr(ex, name).detach().float()                 # [E, N, K]
            sc = w.abs().amax(dim=2).clamp(min=1e-12) / 448.0     # [E, N]
            self.register_buffer(name + "_8", (w / sc[..., None]).to(torch.float8_e4m3fn))
            self.register_buffer(name + "_s", sc.contiguous())

    @staticmethod
    def quant_rows(x):
        sc = x.abs().amax(dim=1).float().clamp(min=1e-12) / 448.0
        return (x.float() / sc[:, None]).to(torch.float8_e4m3fn), sc

    def gmm(self, x8, xs, name, offs):
        w8, ws = getattr(self, name + "_8"), getattr(self, name + "_s")
        if x8.is_cuda:
            return torch._scaled_grouped_mm(x8, w8.transpose(1, 2), xs, ws, offs=offs, out_dtype=DT,
                                            use_fast_accum=True)
        # CPU smoke test only (--tiny): the same arithmetic group by group
        out, lo = [], 0
        for e, hi in enumerate(offs.tolist()):
            out.append((x8[lo:hi].float() * xs[lo:hi, None]) @ (w8[e].float() * ws[e][:, None]).t())
            lo = hi
        return torch.cat(out).to(DT)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        k = top_k_index.shape[1]
        flat = top_k_index.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        tok = order // k
        offs = torch.cumsum(torch.bincount(flat, minlength=self.E), 0, dtype=torch.int32)
        x8, xs = self.quant_rows(hidden_states[tok])
        g, u = self.gmm(x8, xs, "gate_up_proj", offs).chunk(2, dim=-1)
        a8, as_ = self.quant_rows(self.act_fn(g) * u)
        y = self.gmm(a8, as_, "down_proj", offs)
        y = y * top_k_weights.reshape(-1)[order, None].to(y.dtype)
        out = torch.zeros_like(hidden_states)
        out.index_add_(0, tok, y)
        return out


def to_fp8_moe(model):
    for layer in model.model.layers:
        layer.mlp.experts = FP8GroupedExperts(layer.mlp.experts)
    return model


# ----------------------------------------------------------------------------- Liger-Kernel
# undo callables of the module patches a case made (run when the case ends: the patches are
# module-global, and the next case of the same process must get transformers' own code back)
UNDO: list = []


def liger_llama():
    """Liger-Kernel's Llama patch (liger_kernel.transformers.apply_liger_kernel_to_llama), applied
    BEFORE the model is built, as its docs say: its Triton RMSNorm (LigerRMSNorm), SwiGLU MLP
    (LigerSwiGLUMLP: two plain linears, then its fused silu(gate) * up kernel, then down) and rotary
    (liger_rotary_pos_emb: q and k rotated in place) replace transformers' eager ones. No loss runs in
    serving, so its fused linear cross-entropy (a training forward over labels) is left off. The
    patch is module-global: undone when the case ends."""
    from liger_kernel.transformers import apply_liger_kernel_to_llama
    from transformers.models.llama import modeling_llama as ml
    saved = {k: getattr(ml, k) for k in ("apply_rotary_pos_emb", "LlamaRMSNorm", "LlamaMLP")}
    apply_liger_kernel_to_llama(rope=True, rms_norm=True, swiglu=True, cross_entropy=False,
                                fused_linear_cross_entropy=False)
    UNDO.append(lambda: [setattr(ml, k, v) for k, v in saved.items()])


def undo_patches():
    while UNDO:
        UNDO.pop()()


# ----------------------------------------------------------------------------- steps
def build(cfg, experts=None, device="cuda", attn="sdpa"):
    from transformers import AutoModelForCausalLM
    if TINY:
        cfg = shrink(cfg)
    kw = {"dtype": DT, "attn_implementation": attn}
    if experts:
        kw["experts_implementation"] = experts
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, **kw)
    return model.eval()


def ids(cfg, b, s, device):
    return torch.randint(0, cfg.vocab_size, (b, s), device=device)


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Runner:
    """Prefill then decode through transformers' own cache, as a serving loop does."""

    def __init__(self, model, b, isl, device, static=False, max_len=None, keep=1):
        self.model, self.b, self.isl, self.dev = model, b, isl, device
        self.keep = keep   # prefill's logits_to_keep: 1 (the last position, as generate()), 0 = all
        self.cfg = model.config
        self.static = static
        self.max_len = max_len or (isl + 64)
        self.reset()

    def reset(self):
        from transformers import DynamicCache, StaticCache
        self.cache = (StaticCache(config=self.cfg, max_cache_len=self.max_len) if self.static
                      else DynamicCache(config=self.cfg))
        self.pos = 0

    def prefill(self):
        x = ids(self.cfg, self.b, self.isl, self.dev)
        cp = torch.arange(self.isl, device=self.dev)
        out = self.model(input_ids=x, past_key_values=self.cache, use_cache=True,
                         cache_position=cp, logits_to_keep=self.keep)
        self.pos = self.isl
        return out.logits

    def decode(self):
        x = ids(self.cfg, self.b, 1, self.dev)
        cp = torch.tensor([self.pos], device=self.dev)
        out = self.model(input_ids=x, past_key_values=self.cache, use_cache=True, cache_position=cp)
        self.pos += 1
        return out.logits


def kernel_totals(prof):
    """The profiler's own per-kernel totals (independent of roofline's trace reader)."""
    rows = {}
    for ev in prof.key_averages():
        dt = getattr(ev, "device_type", None)
        if dt is not None and "CUDA" not in str(dt):
            continue
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t and ev.count:
            rows[ev.key] = {"count": ev.count, "device_time_total_us": round(float(t), 3)}
    return rows


def profiled(path, fn):
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts, record_shapes=True) as prof:
        fn()
        sync()
    prof.export_chrome_trace(path)
    return prof


# ----------------------------------------------------------------------------- cases
# name -> (config, experts backend, prefill batch, tokens per sequence (= decode context), prefill
# steps, decode steps, options). decode_b: the decode batch when it differs from the prefill's;
# decode_experts: the backend decode switches to (transformers' generate() runs prefill on
# grouped_mm and switches decode to batched_mm on GPUs: `_optimize_model_for_decode`).
CASES = {
    "llama_prefill_decode": (cfg_llama, None, 4, 1024, 1, 8, {"decode_b": 64}),
    "llama_prefill_noranges": (cfg_llama, None, 4, 4096, 1, 0, {"ranges": False}),
    "llama_fp8_prefill_decode": (cfg_llama, None, 4, 2048, 1, 8, {"fp8": True, "decode_b": 64}),
    "qwen3moe_grouped_mm": (cfg_qwen3_moe, "grouped_mm", 8, 1024, 1, 6, {"decode_b": 64}),
    "qwen3moe_grouped_mm_b256": (cfg_qwen3_moe, "grouped_mm", 8, 512, 0, 4, {"decode_b": 256}),
    "qwen3moe_generate_batched_mm": (cfg_qwen3_moe, "grouped_mm", 4, 512, 1, 6,
                                     {"decode_b": 64, "decode_experts": "batched_mm"}),
    "qwen3moe_eager": (cfg_qwen3_moe, "eager", 4, 256, 1, 3, {"decode_b": 16}),
    "mixtral_grouped_mm": (cfg_mixtral, "grouped_mm", 4, 1024, 1, 6, {"decode_b": 64}),
    "deepseekv3_mla_moe": (cfg_deepseek_v3, "grouped_mm", 4, 512, 1, 4, {"decode_b": 32}),
    "mistral_swa": (cfg_mistral_swa, None, 2, 4096, 1, 6, {"decode_b": 16}),
    "llama_graph_decode": (cfg_llama, None, 64, 512, 0, 6, {"graph": True}),
    "llama_compile_decode": (cfg_llama, None, 64, 512, 0, 6, {"compile": True}),
    # round 2: necessary vs moved bytes, hybrids, fp8 grouped MoE. static: the
    # StaticCache's max_cache_len (decode reads all its slots; isl of them are filled); attn: the
    # attention implementation (eager materialises the GQA broadcast: repeat_kv)
    "qwen3_static_eager": (cfg_qwen3_dense, None, 4, 700, 0, 4,
                           {"decode_b": 24, "static": 2816, "attn": "eager"}),
    "qwen3_static_sdpa": (cfg_qwen3_dense, None, 4, 700, 0, 4, {"decode_b": 24, "static": 2816}),
    "gptoss_eager": (cfg_gpt_oss, "grouped_mm", 4, 1024, 1, 4, {"decode_b": 40, "attn": "eager"}),
    "gemma3_swa_eager": (cfg_gemma3, None, 2, 1792, 1, 5, {"decode_b": 24, "attn": "eager"}),
    "llama3b_cat_decode": (cfg_llama_3b, None, 4, 1536, 0, 10, {"decode_b": 48}),
    "qwen3moe_fp8_grouped": (cfg_qwen3_moe, None, 4, 640, 1, 4, {"decode_b": 48, "fp8_moe": True}),
    "qwen3next_fla": (cfg_qwen3_next, "grouped_mm", 2, 1024, 1, 4, {"decode_b": 40}),
    # bamba_mamba2 at (2, 1024, decode_b 32) ran out of memory on the H200 (2026-12-03): the
    # decode batch's own prefill through the reference chunk scan (no mamba_ssm) asked for 512 GiB
    # at 32 x 1024 tokens: its G = C x B intermediate is [b, chunks, chunk, chunk, heads, d_state]
    # fp32 (32 x 4 x 256 x 256 x 128 x 128 x 4 B); at 4 sequences of 128 tokens (one chunk) 16 GiB
    "bamba_mamba2": (cfg_bamba, None, 4, 128, 1, 4, {"decode_b": 4}),
    # round 3: code we did not write. liger: Liger-Kernel's Triton RMSNorm / SwiGLU / RoPE patched
    # into transformers' Llama (same shapes as llama_prefill_decode). granitemoehybrid: Mamba2 (torch
    # reference path, no mamba_ssm) + nope attention + grouped_mm MoE with a shared MLP; its chunk
    # scan's G = C x B broadcast is [b, chunks, 256, 256, 48 heads, 128] fp32: 12.9 GB at 4 x 512
    # tokens, 51.5 GB for the decode batch's own prefill at 16 x 512
    "llama_liger": (cfg_llama, None, 4, 1024, 1, 8, {"decode_b": 64, "liger": True}),
    "granitemoehybrid_mamba2_moe": (cfg_granite_hybrid, "grouped_mm", 4, 512, 1, 4, {"decode_b": 16}),
    # round 4: compiled serving code, gathered experts, per-expert loops, all-position
    # logits. compile: torch.compile mode ("default" | "reduce-overhead") of one decode step on a
    # StaticCache of `static` slots with isl of them filled (dynamic=False, as transformers'
    # generate() compiles a static-cache step); provenance: inductor provenance tracking on
    # (trace.provenance_tracking_level=1, trace.enabled: debug dir + kernel_information.json);
    # logits_to_keep: 0 = the LM head over every prompt position (a plain forward, no generate());
    # ncu_regimes: the regimes the ncu pass records (default: those the trace has)
    "qwen3_compile_static": (cfg_qwen3_4b, None, 32, 768, 0, 6,
                             {"compile": "default", "static": 3072, "provenance": True}),
    "olmoe_batched_mm": (cfg_olmoe, "grouped_mm", 4, 512, 0, 4,
                         {"decode_b": 48, "decode_experts": "batched_mm"}),
    "qwen2_prefill_all_logits": (cfg_qwen2_7b, None, 2, 1024, 2, 3,
                                 {"logits_to_keep": 0, "ncu_regimes": ["prefill"]}),
    "mixtral22_eager_loop": (cfg_mixtral_8x22b, "eager", 2, 512, 1, 3, {"decode_b": 32}),
    "qwen2moe_compile_grouped": (cfg_qwen2_moe, "grouped_mm", 32, 512, 0, 6,
                                 {"compile": "default", "static": 2048}),
    "qwen3_compile_cudagraphs": (cfg_qwen3_4b, None, 32, 768, 0, 6,
                                 {"compile": "reduce-overhead", "static": 3072}),
}


def prepare(name, device):
    cfgf, experts, b, isl, n_pre, n_dec, opt = CASES[name]
    if opt.get("liger") and not TINY:     # Triton: no CPU smoke test of the patched model
        liger_llama()
    model = build(cfgf(), experts, device, opt.get("attn", "sdpa"))
    if opt.get("fp8"):
        model = to_fp8(model)
    if opt.get("fp8_moe"):
        model = to_fp8_moe(model)
    if TINY:
        b, isl = min(b, 2), min(isl, 16)
    return model, b, isl, n_pre, n_dec, opt


def run_case(name, device, out_dir):
    """Profile one case; returns its corpus_meta entry."""
    model, b, isl, n_pre, n_dec, opt = prepare(name, device)
    dec_b = opt.get("decode_b", b)
    if TINY:
        dec_b = min(dec_b, 2)
    ranges = opt.get("ranges", True)
    meta = {"config": model.config.to_dict(), "experts_implementation": CASES[name][1],
            "prefill": {"batch": b, "tokens_per_seq": isl, "steps": n_pre},
            "decode": {"batch": dec_b, "context_start": isl, "steps": n_dec},
            "step_ranges": ranges, "options": {k: v for k, v in opt.items()}}
    path = os.path.join(out_dir, f"{name}.json.gz")
    prov = Provenance(name, out_dir) if opt.get("provenance") and opt.get("compile") else None
    if opt.get("compile"):
        import torch._dynamo as dynamo
        dynamo.reset()
        dynamo.utils.counters.clear()
    with torch.no_grad():
        if opt.get("graph") or opt.get("compile"):
            try:
                fn = graph_case(model, dec_b, isl, device, n_dec, compiled=bool(opt.get("compile")),
                                static=opt.get("static"), mode=compile_mode(opt))
            finally:
                if prov:
                    meta["provenance"] = prov.close()
        else:
            fn = eager_case(model, b, dec_b, isl, device, n_pre, n_dec, ranges, opt.get("decode_experts"),
                            opt.get("static"), opt.get("logits_to_keep", 1))
        prof = profiled(path, fn)
    meta["kernel_totals"] = kernel_totals(prof)
    meta["trace"] = os.path.basename(path)
    if opt.get("compile"):
        import torch._dynamo as dynamo
        c = dynamo.utils.counters
        meta["compile"] = {"mode": compile_mode(opt), "dynamic": False,
                           "graph_launches": sum(ev.count for ev in prof.key_averages()
                                                 if "GraphLaunch" in ev.key),
                           "dynamo_counters": {k: dict(v) for k, v in c.items() if v}}
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return meta


def compile_mode(opt):
    m = opt.get("compile")
    return m if isinstance(m, str) else "default"


class Provenance:
    """Inductor provenance tracking for one compiled case: trace.provenance_tracking_level=1 and
    trace.enabled (the debug dir, with inductor_provenance_tracking_node_mappings.json and the
    output code, under <out>/inductor_debug/<case>). torch 2.11 writes kernel_information.json
    only for AOTInductor; for a JIT compile the same mapping (kernel -> stack traces, post-grad and
    pre-grad nodes) is built here by torch's own create_kernel_information_json(), called inside
    each graph's compile (its globals are reset when that compile ends), and written to
    <out>/provenance/<case>.kernel_information.json (a list: one dict per compiled graph)."""

    def __init__(self, name, out_dir):
        import torch._dynamo.config as dc
        import torch._inductor.config as ic
        import torch._inductor.debug as idebug
        self.name, self.out = name, out_dir
        self.ic, self.dc, self.idebug = ic, dc, idebug
        import torch._functorch.config as fc
        self.fc = fc
        self.saved = (ic.trace.enabled, ic.trace.provenance_tracking_level, dc.debug_dir_root,
                      ic.fx_graph_cache, fc.enable_autograd_cache)
        ic.fx_graph_cache = fc.enable_autograd_cache = False   # a cache hit writes no provenance
        ic.trace.enabled = True
        ic.trace.provenance_tracking_level = 1
        dc.debug_dir_root = os.path.join(out_dir, "inductor_debug", name)
        self.graphs = []
        self.orig = idebug.dump_inductor_provenance_info

        def hooked():
            got = self.orig()
            try:
                self.graphs.append(idebug.create_kernel_information_json())
            except Exception as e:  # noqa: BLE001 - debugging aid only
                self.graphs.append({"error": f"{type(e).__name__}: {e}"})
            return got
        idebug.dump_inductor_provenance_info = hooked

    def close(self):
        ic, dc = self.ic, self.dc
        self.idebug.dump_inductor_provenance_info = self.orig
        (ic.trace.enabled, ic.trace.provenance_tracking_level, dc.debug_dir_root,
         ic.fx_graph_cache, self.fc.enable_autograd_cache) = self.saved
        d = os.path.join(self.out, "provenance")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{self.name}.kernel_information.json")
        with open(path, "w") as f:
            json.dump(self.graphs, f, indent=1)
        return {"kernel_information": os.path.relpath(path, self.out), "graphs": len(self.graphs),
                "kernels": sum(len(g) for g in self.graphs),
                "debug_dir": os.path.join("inductor_debug", self.name)}


def decode_backend(model, experts):
    """Switch the experts backend for decode (as generate() does), or leave it."""
    if experts:
        model.set_experts_implementation(experts)


def runner(model, b, isl, device, static=None, keep=1):
    """static: a StaticCache of that many slots (max_cache_len); else a DynamicCache."""
    if static and TINY:
        static = min(static, isl + 24)
    return Runner(model, b, isl, device, static=bool(static), max_len=static or None, keep=keep)


def eager_case(model, b, dec_b, isl, device, n_pre, n_dec, ranges, dec_experts=None, static=None,
               keep=1):
    first = model.config._experts_implementation if dec_experts else None
    r = runner(model, b, isl, device, static, keep)
    rd = runner(model, dec_b, isl, device, static) if dec_b != b else r
    r.prefill()            # warm-up outside the profiled window (cuBLAS handles, autotune)
    if rd is not r:
        rd.prefill()
    decode_backend(model, dec_experts)
    rd.decode()
    decode_backend(model, first)
    sync()

    if rd is not r and n_dec:
        # the decode batch's own prompts are filled BEFORE the profiled window: a serving step's
        # trace holds steps, not the harness's setup (the recorded corpus before this change had
        # that prefill inside the window, outside any step range)
        rd.reset()
        rd.prefill()
        sync()

    def fn():
        r.reset()
        for i in range(n_pre):
            if i:
                r.reset()      # each prefill step a fresh batch of prompts
            if ranges:
                with record_function("prefill_step"):
                    r.prefill()
            else:
                r.prefill()
        decode_backend(model, dec_experts)
        for _ in range(n_dec):
            with record_function("decode_step"):
                rd.decode()
        decode_backend(model, first)
    return fn


def graph_case(model, b, isl, device, n_dec, compiled, static=None, mode="default"):
    """Decode on a StaticCache (static slots, isl of them filled; isl + 64 when not given):
    torch.compile (inductor, `mode`) steps, or one eager step + CUDA-graph replays of a captured
    step."""
    slots = static or isl + 64
    if TINY:
        slots = min(slots, isl + 24)
    r = Runner(model, b, isl, device, static=True, max_len=slots)
    r.prefill()
    sync()
    x = ids(model.config, b, 1, device)
    cp = torch.tensor([isl], device=device)

    def step():
        return model(input_ids=x, past_key_values=r.cache, use_cache=True, cache_position=cp).logits

    if compiled:
        graphs = mode == "reduce-overhead"
        cstep0 = torch.compile(step, dynamic=False, **({} if mode == "default" else {"mode": mode}))

        def cstep():
            if graphs:       # each call a new step for CUDA-graph trees (outputs not kept)
                torch.compiler.cudagraph_mark_step_begin()
            return cstep0()
        for _ in range(3):
            cstep()
        sync()

        def fn():
            for _ in range(n_dec):
                with record_function("decode_step"):
                    cstep()
        return fn
    if not torch.cuda.is_available():
        return lambda: [step() for _ in range(n_dec)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    sync()

    def fn():
        with record_function("decode_step"):
            step()                      # one eager step: gives the replayed kernels their shapes
        for _ in range(n_dec - 1):
            with record_function("decode_step"):
                g.replay()
    return fn


def ncu_case(name, device):
    """One step (the trace's shapes) inside an NVTX range named after the case."""
    model, b, isl, n_pre, n_dec, opt = prepare(name, device)
    dec_b = min(opt.get("decode_b", b), 2) if TINY else opt.get("decode_b", b)
    regimes = opt.get("ncu_regimes", ("prefill", "decode"))
    with torch.no_grad():
        if opt.get("graph") or opt.get("compile"):
            if opt.get("compile"):
                import torch._dynamo as dynamo
                dynamo.reset()
            # compiled: one step in the range; graph: one eager step + one replay (both count)
            fn = graph_case(model, dec_b, isl, device, 1 if opt.get("compile") else 2,
                            compiled=bool(opt.get("compile")), static=opt.get("static"),
                            mode=compile_mode(opt))
            fn()
            sync()
            torch.cuda.nvtx.range_push(f"{name}__decode")
            fn()
            sync()
            torch.cuda.nvtx.range_pop()
        else:
            r = runner(model, b, isl, device, opt.get("static"), opt.get("logits_to_keep", 1))
            if n_pre and "prefill" in regimes:
                r.prefill()
                sync()
                r.reset()
                torch.cuda.nvtx.range_push(f"{name}__prefill")
                r.prefill()
                sync()
                torch.cuda.nvtx.range_pop()
            if n_dec and "decode" in regimes:
                rd = runner(model, dec_b, isl, device, opt.get("static"))
                rd.prefill()
                decode_backend(model, opt.get("decode_experts"))
                rd.decode()
                sync()
                torch.cuda.nvtx.range_push(f"{name}__decode")
                rd.decode()
                sync()
                torch.cuda.nvtx.range_pop()
    del model
    torch.cuda.empty_cache()


def main(argv=None):
    global TINY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="corpus_out")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--ncu", action="store_true", help="one step per case in NVTX ranges")
    ap.add_argument("--tiny", action="store_true", help="toy sizes on the CPU (smoke test)")
    a = ap.parse_args(argv)
    TINY = a.tiny
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    names = [c for c in a.cases.split(",") if c]
    os.makedirs(a.out, exist_ok=True)
    meta_path = os.path.join(a.out, "corpus_meta.json")
    meta = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "torch": torch.__version__, "cases": {}, "errors": {}}
    try:
        import transformers
        meta["transformers"] = transformers.__version__
    except ImportError:
        pass
    try:
        from importlib.metadata import version
        meta["liger_kernel"] = version("liger-kernel")
    except Exception:  # not installed: no Liger case can run
        pass
    for name in names:
        t0 = time.time()
        try:
            if a.ncu:
                ncu_case(name, device)
            else:
                meta["cases"][name] = run_case(name, device, a.out)
            print(f"case {name}: ok in {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # one broken case must not cost the others
            meta["errors"][name] = f"{type(e).__name__}: {e}"
            print(f"case {name}: FAILED {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
        finally:
            undo_patches()
        if not a.ncu:
            with open(meta_path, "w") as f:
                json.dump(meta, f, indent=1, default=str)
    return 0 if not meta["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())

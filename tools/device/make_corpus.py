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


def shrink(cfg):
    """--tiny: the same model class at toy sizes (CPU smoke test)."""
    for k, v in dict(hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=512,
                     num_experts=8, n_routed_experts=8, n_group=2, topk_group=1, q_lora_rank=64,
                     kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16,
                     sliding_window=16).items():
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


# ----------------------------------------------------------------------------- steps
def build(cfg, experts=None, device="cuda"):
    from transformers import AutoModelForCausalLM
    if TINY:
        cfg = shrink(cfg)
    kw = {"dtype": DT, "attn_implementation": "sdpa"}
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

    def __init__(self, model, b, isl, device, static=False, max_len=None):
        self.model, self.b, self.isl, self.dev = model, b, isl, device
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
                         cache_position=cp, logits_to_keep=1)
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
}


def prepare(name, device):
    cfgf, experts, b, isl, n_pre, n_dec, opt = CASES[name]
    model = build(cfgf(), experts, device)
    if opt.get("fp8"):
        model = to_fp8(model)
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
    with torch.no_grad():
        if opt.get("graph") or opt.get("compile"):
            fn = graph_case(model, dec_b, isl, device, n_dec, compiled=bool(opt.get("compile")))
        else:
            fn = eager_case(model, b, dec_b, isl, device, n_pre, n_dec, ranges, opt.get("decode_experts"))
        prof = profiled(path, fn)
    meta["kernel_totals"] = kernel_totals(prof)
    meta["trace"] = os.path.basename(path)
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return meta


def decode_backend(model, experts):
    """Switch the experts backend for decode (as generate() does), or leave it."""
    if experts:
        model.set_experts_implementation(experts)


def eager_case(model, b, dec_b, isl, device, n_pre, n_dec, ranges, dec_experts=None):
    first = model.config._experts_implementation if dec_experts else None
    r = Runner(model, b, isl, device)
    rd = Runner(model, dec_b, isl, device) if dec_b != b else r
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
        for _ in range(n_pre):
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


def graph_case(model, b, isl, device, n_dec, compiled):
    """Decode on a StaticCache: torch.compile (inductor) steps, or one eager step + CUDA-graph
    replays of a captured step."""
    r = Runner(model, b, isl, device, static=True, max_len=isl + 64)
    r.prefill()
    sync()
    x = ids(model.config, b, 1, device)
    cp = torch.tensor([isl], device=device)

    def step():
        return model(input_ids=x, past_key_values=r.cache, use_cache=True, cache_position=cp).logits

    if compiled:
        cstep = torch.compile(step, dynamic=False)
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
    with torch.no_grad():
        if opt.get("graph") or opt.get("compile"):
            fn = graph_case(model, dec_b, isl, device, 2, compiled=bool(opt.get("compile")))
            fn()
            sync()
            torch.cuda.nvtx.range_push(f"{name}__decode")
            fn()   # NB: for the graph case this is one eager step + one replay: both count
            sync()
            torch.cuda.nvtx.range_pop()
        else:
            r = Runner(model, b, isl, device)
            r.prefill()
            sync()
            if n_pre:
                r.reset()
                torch.cuda.nvtx.range_push(f"{name}__prefill")
                r.prefill()
                sync()
                torch.cuda.nvtx.range_pop()
            if n_dec:
                rd = Runner(model, dec_b, isl, device)
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
        if not a.ncu:
            with open(meta_path, "w") as f:
                json.dump(meta, f, indent=1, default=str)
    return 0 if not meta["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())

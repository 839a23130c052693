"""Op class "attn": attention (FlashAttention, cuDNN SDPA, paged decode, ...).

Model: roofline/core/models/attention.py. Stage A: heads and head_dim from config.json, batch and
context from the workload (decode: the mid-run average context, with the full one as a second
candidate). Trace: the aten attention ops below. Stage C: no GEMM re-run."""
from __future__ import annotations

from roofline.core.models import attention as _model
from roofline.core.opclasses import kvcache
from roofline.core.opclasses.aten import distinct_elems, dtype_of
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, l2_resident, register
from roofline.core.opclasses.levers import narrower
from roofline.core.opclasses.stage_a import cfg, fill, require, workload

# Attention ops: op -> (layout of q/k/v, index of is_causal in Concrete Inputs or None)
# bhsd: [batch, heads, seq, head_dim]; bshd: [batch, seq, heads, head_dim] (3-D: varlen, [tokens, h, d])
ATTN_OPS = {
    "aten::scaled_dot_product_attention": ("bhsd", 5),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 4),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "aten::_cudnn_attention_forward": ("bhsd", 10),
    "aten::_scaled_dot_product_attention_math": ("bhsd", 5),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 6),
    "aten::_flash_attention_forward": ("bshd", 8),
    "aten::_efficient_attention_forward": ("bshd", None),
}



def _mask_bytes(sig) -> int:
    """Bytes of an explicit attn_mask (the 4th argument: a sliding-window or padding mask
    transformers builds as a [batch, 1, q, kv] tensor), counting its distinct elements (a mask
    broadcast over heads is one copy in memory)."""
    from roofline.peaks import DTYPE_BYTES

    if len(sig.dims) < 4 or not isinstance(sig.dims[3], tuple) or len(sig.dims[3]) < 2:
        return 0
    t = sig.types[3] if len(sig.types) > 3 else ""
    dt = dtype_of(t)
    if dt is None:
        return 0
    st = sig.strides[3] if len(getattr(sig, "strides", ()) or ()) > 3 and isinstance(sig.strides[3], tuple) else ()
    return int(distinct_elems(sig.dims[3], st) * DTYPE_BYTES.get(dt, 1))


@job("trace_shape", "attn")
def trace_shape(sig):
    """batch, lengths, heads and head_dim of a recorded attention op (4-D, or varlen 3-D), causal
    when the op says, with its q / kv dtypes."""
    spec = ATTN_OPS.get(sig.name)
    if spec is None or len(sig.dims) < 3:
        return None
    lay, causal_i = spec
    q, k = sig.dims[0], sig.dims[1]
    if not q or not k or len(q) != len(k) or len(q) not in (3, 4):
        return None
    if len(q) == 4 and lay == "bhsd":
        out = {"batch": q[0], "seq_len": k[2], "q_len": q[2], "n_q_heads": q[1], "n_kv_heads": k[1], "head_dim": q[3]}
    elif len(q) == 4:
        out = {"batch": q[0], "seq_len": k[1], "q_len": q[1], "n_q_heads": q[2], "n_kv_heads": k[2], "head_dim": q[3]}
    else:                                # varlen [tokens, heads, head_dim]; batch from cu_seqlens
        out = {"n_q_heads": q[1], "n_kv_heads": k[1], "head_dim": q[2], "tokens_q": q[0], "tokens_kv": k[0]}
        for d in sig.dims[3:5]:
            if isinstance(d, tuple) and len(d) == 1 and d[0] > 1:
                out["batch"] = d[0] - 1
                break
    out = {kk: int(v) for kk, v in out.items()}
    out["paged"] = False
    mb = _mask_bytes(sig)
    if mb:
        out["mask_bytes"] = mb
    if causal_i is not None and causal_i < len(sig.concrete):
        c = sig.concrete[causal_i]
        if c in ("True", "False"):
            out["causal"] = c == "True"
    elif sig.name == "aten::_efficient_attention_forward" and len(sig.concrete) > 9:
        c = sig.concrete[9]              # custom_mask_type: 0 none, 1 causal from top-left, 2 bottom-right
        if c.isdigit():
            out["causal"] = c != "0"
    tq = sig.types[0] if sig.types else ""
    tk = sig.types[1] if len(sig.types) > 1 else ""
    dt = {"act": dtype_of(tq), "kv": dtype_of(tk), "out": dtype_of(tq)}
    return out, {kk: v for kk, v in dt.items() if v}


@job("fill", "attn")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    heads = cfg(config, "num_attention_heads", "n_head")
    fill(s, "n_q_heads", heads, "config.json", assumed)
    fill(s, "n_kv_heads", cfg(config, "num_key_value_heads", "num_kv_heads") or heads, "config.json", assumed)
    hd = cfg(config, "head_dim")
    if hd is None and heads and cfg(config, "hidden_size"):
        hd = int(cfg(config, "hidden_size")) // int(heads)
    fill(s, "head_dim", hd, "config.json", assumed)
    if regime == "decode":
        # a decode attention without captured batch and context needs conc, isl and osl: name them all at once
        require(wl, (("conc",) if "batch" not in s else ()) + (("isl", "osl") if "seq_len" not in s else ()),
                "the batch and context of a decode attention without a captured shape")
        if "batch" not in s:
            fill(s, "batch", int(workload(wl, "conc", "the batch of a decode attention without a captured shape")),
                 "decode batch = workload.conc", assumed)
        if "seq_len" not in s:
            what = "the context of a decode attention without a captured shape"
            isl, osl = workload(wl, "isl", what), workload(wl, "osl", what)
            # NB: seq_len is the CURRENT average context; mid-run that is isl + osl/2. The
            # full context isl + osl is only the upper end of the displayed range.
            s["seq_len_candidates"] = [("mean_context", isl + osl / 2), ("max_context", isl + osl)]
            s["seq_len"] = isl + osl / 2
            assumed.append(f"seq_len={isl + osl / 2:g} (isl + osl/2, the mid-run average context; "
                           f"upper candidate isl + osl = {isl + osl:g}) - a real source of error")
    else:
        fill(s, "batch", 1, "prefill: one sequence per launch", assumed)
        if "seq_len" not in s:
            fill(s, "seq_len", int(workload(wl, "isl", "the context of a prefill attention without a captured shape")),
                 "prefill seq_len = workload.isl", assumed)
    s["regime"] = regime
    return ("batch", "seq_len", "n_q_heads", "n_kv_heads", "head_dim")


# regime from a recorded attention op (docs/method.md section 3): a decode step feeds each sequence
# ONE new token (q_len 1); a prefill step whole prompts. Attention decides where the trace has it.
DECODE_Q_LEN_MAX = 1           # q_len <= this: decode (speculative decoding's few draft tokens are not inferred)
PREFILL_Q_LEN_MIN = 16         # q_len >= this: prefill


@job("regime_vote", "attn", rank=1, label="attention")
def regime_vote(shp: dict):
    if "q_len" in shp:
        q = shp["q_len"]
        if q <= DECODE_Q_LEN_MAX:
            return "decode", f"attention q_len {q}"
        if q >= PREFILL_Q_LEN_MIN:
            return "prefill", f"attention q_len {q}"
    return None


@job("prior_key", "attn")
def prior_key(regime: str | None, shape: dict) -> tuple[str, str | None]:
    """Attention by regime and, at decode, by KV access pattern (paged = block-table gathers, the
    default where nothing says; contiguous = a sequential read)."""
    if regime == "prefill":
        return "attn_prefill", None
    paged = shape.get("paged")
    contiguous = paged is False
    note = (f"the prior for a {'contiguous' if contiguous else 'paged'} KV cache "
            + ("(read sequentially, like a copy; the trace's attention op reads a contiguous cache)" if contiguous
               else "(block-table gathers; nothing in the input says the cache is contiguous)"))
    return ("attn_decode_contiguous" if contiguous else "attn_decode"), note


@job("choose_model", "attn")
def choose_model(alts: list[dict], notes: list[str]):
    """docs/method.md section 2: attention's seq_len is the CURRENT average context (isl + osl/2), not
    the max. The max context is no second byte model for the feasibility rule: it is only the upper
    end of the displayed range."""
    mean_ctx = next((a for a in alts if a["model"] == "mean_context"), None)
    if mean_ctx is None:
        return None
    notes.append("attention point estimate at the mean context "
                 f"({mean_ctx['note']}, isl + osl/2); the max context "
                 + ", ".join(a["note"] for a in alts if a["model"] == "max_context")
                 + " (isl + osl) is only the upper end of the displayed range")
    for a in alts:
        if not a["feasible"]:
            notes.append(f"{a['model']} ({a['note']}) implies {a['roofline_pct_raw']:.0%} of the roof: infeasible, "
                         "left out of the range")
    return mean_ctx


@job("residency", "attn")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A mask above half the L2 is re-read (a note). A memory-axis attention whose whole traffic fits in half
    the L2 and whose q, K and V were all written in this step reads them from the L2 (no verdict): a prefill
    attention (q_len > 1: the projections before it just wrote them), or a decode attention whose K length
    grows step by step (a cache re-copied whole by a cat each step, DynamicCache). A decode attention over
    a cache written in place (static, paged: one shape, or no growth) makes no such claim: its K / V may
    come from DRAM. ncu on the corpus: every attention under half the L2 read 0-22% of its model bytes
    from DRAM (Bamba decode 2.1 MB -> 0.0, prefill 10.5 -> 0.3; Granite decode 16.9 -> 1.0, prefill
    16.8 -> 3.4; Qwen3-MoE prefill 18.9 -> 4.2)."""
    if (w.res.info or {}).get("mask_bytes", 0) > l2 / 2:
        notes.append(f"the attention mask ({w.res.info['mask_bytes'] / 1e6:.0f} MB) exceeds half the L2 and is "
                     "re-read from DRAM for the heads it is broadcast over: DRAM bytes above the model's are expected")
    if chosen["bytes_est"] > l2 / 2 or (chosen.get("_m") or {}).get("roof_axis") != "memory" or not w.shapes \
            or any("q_len" not in s or "seq_len" not in s for s in w.shapes):
        return False        # NB: a compute-bound attention (intensity above the ridge) is judged on compute
    lens = sorted({s["seq_len"] for s in w.shapes if s["q_len"] == 1})
    prefill = all(s["q_len"] > 1 for s in w.shapes)
    grows = len(lens) >= 2 and len(lens) == len(w.shapes) and all(b - a == 1 for a, b in zip(lens, lens[1:]))
    if not (prefill or grows):
        return False
    why = ("a prefill attention: the projections before it just wrote q, K and V" if prefill else
           f"its K length grows one position per step ({lens[0]} -> {lens[-1]}): the cache is re-copied whole "
           "by a cat each step, just before it")
    return l2_resident(notes, "the attention", chosen["bytes_est"], l2, f", and {why}: it reads them from the L2",
                       "fusion with its producer or consumer")


@job("precision_levers", "attn")
def precision_levers(entry: dict, dtypes: dict, ctx, notes: list[str]) -> list[tuple]:
    """A fused attention's K / V are its KV cache: the lower-precision KV lever (no saving computed)."""
    return [("lower_precision_kv", t, "a fused attention reads K / V, its KV cache", None)
            for t in narrower("KV cache", dtypes.get("kv"))]


def _filled(shape: dict, ctx) -> tuple[float | None, str]:
    """(mean filled KV length per launch, the evidence) of a decode attention, or (None, what is missing).
    The K length is the filled context unless the K/V come from a cache record of that many slots
    (trace_evidence.kv_caches, kvcache.filled); with none, a K length that grows step by step is
    the filled context."""
    s = shape["seq_len"]
    lens = sorted({x.get("seq_len") for x in ctx.shapes if isinstance(x.get("seq_len"), (int, float))})
    cache = kvcache.cache_of(ctx, s, shape.get("batch"))
    if cache is None:
        if len(lens) >= 2:
            return float(s), f"the K length grows step by step ({int(lens[0])} -> {int(lens[-1])}): it is the filled context"
        return None, (f"the trace does not say how many of the attention's {s} K positions are filled: no in-place "
                      "cache write of that many slots, no K length that grows step by step")
    return kvcache.filled(cache, ctx)


@job("necessary", "attn")
def necessary(shape: dict, dt: dict, bytes_est: float, ctx):
    """A decode attention needs the K and V of its KV heads over the filled context only:
    - KV heads: config.json's num_key_value_heads (/ tp on one rank of a TP run whose degree is known:
      ctx.tp) where the K/V it is given carry more heads (a GQA broadcast materialised before it,
      repeat_kv): a GQA-aware kernel reads the KV heads in place;
    - context: the filled slots (_filled), not a preallocated cache's empty ones.
    Prefill: the model's bytes (Q, K, V, O once) with the KV heads of config.json."""
    from roofline.core.opclasses.base import Necessary

    hq, hkv, d, b = shape["n_q_heads"], shape["n_kv_heads"], shape["head_dim"], shape["batch"]
    ev, kinds = [], []
    kv_cfg = cfg(ctx.config, "num_key_value_heads", "num_kv_heads")
    nkv, said = hkv, f"config.json num_key_value_heads = {kv_cfg}"
    tp = ctx.tp if isinstance(ctx.tp, int) and ctx.tp > 1 else None
    if tp and isinstance(kv_cfg, int) and kv_cfg % tp == 0:       # one TP rank holds kv heads / tp
        kv_cfg, said = kv_cfg // tp, f"{said} / TP {tp} = {kv_cfg // tp} on this rank ({ctx.tp_evidence})"
    if isinstance(kv_cfg, int) and 0 < kv_cfg < hkv and hkv % kv_cfg == 0:
        nkv = kv_cfg
        ev.append(f"K/V carry {hkv} heads, {said}: the KV heads were broadcast "
                  f"{hkv // kv_cfg}x before the attention (a GQA-aware kernel reads the {kv_cfg} in place)")
        kinds.append("kv_heads_broadcast")
    if shape.get("regime", ctx.regime) == "prefill" or "seq_len" not in shape:
        if nkv == hkv:
            return None
        q, s = shape.get("q_len", shape.get("seq_len")), shape.get("seq_len")
        kv_bytes = b * s * d * 2 * dt["act_bytes"] * (hkv - nkv) if (q and s) else None
        if kv_bytes is None:
            return None
        return Necessary(max(0.0, bytes_est - kv_bytes), kind="kv_heads_broadcast", evidence=ev,
                         lever="read the KV heads in place (GQA-aware attention): no expanded K/V")
    filled, why = _filled(shape, ctx)
    if filled is None:
        return Necessary(None, evidence=ev, missing=why)
    filled = min(float(filled), float(shape["seq_len"]))
    if filled < shape["seq_len"] * kvcache.FULL_FRAC:
        kinds.append("empty_slots")
    ev.append(why)
    flops, nec = _model.decode_counts(b, filled, hq, nkv, d, dt["kv_bytes"])
    lever = kvcache.lever(kinds, nkv, filled, shape["seq_len"]) if kinds else None
    return Necessary(float(nec), float(flops), kind="+".join(kinds) if kinds else "as_modelled", evidence=ev,
                     lever=lever)


register(OpClass("attn", seed_class="attn",
                 # FlashAttention, cuDNN SDPA, xformers/cutlass fmha, FlashInfer, paged, MLA (before GEMM)
                 name_rules=((40, r"flash|fmha|sdpa|attention|attn|xformers|flashinfer|paged_?att|"
                                  r"batch_?decode|batch_?prefill|single_?decode|single_?prefill|splitkv|mla_?decode|"
                                  r"\bmha_|_mha_|cudnn.*fprop|cudnn.*bprop"),),
                 op_rules=((20, r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|attention"),),
                 hint_aliases=("attention",),
                 target_eff={
                     "attn_decode": 0.50,   # irregular paged KV access (block-table gathers), occupancy-sensitive
                     # a contiguous (non-paged) KV cache is read sequentially, like a copy: the streaming prior. On
                     # the real-model corpus cuDNN's decode SDPA over a contiguous cache ran at 84% of the HBM roof.
                     "attn_decode_contiguous": 0.85,
                     "attn_prefill": 0.70,  # NB: no source figure; flash-style prefill reaches ~0.6-0.75 of the
                                            # tensor roof on Hopper
                 },
                 dtype_roles=("kv",),
                 shape_keys=frozenset({"batch", "seq_len", "q_len", "n_q_heads", "n_kv_heads", "head_dim", "paged",
                                       "causal", "regime", "mask_bytes"}),
                 dim_keys=frozenset({"batch", "seq_len", "n_q_heads", "n_kv_heads", "head_dim"})))
job("model", "attn")(_model.model)

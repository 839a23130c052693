"""Op class "attn": attention (FlashAttention, cuDNN SDPA, paged decode, ...).

Model: roofline/models/attention.py. Stage A: heads and head_dim from config.json, batch and
context from the workload (decode: the mid-run average context, with the full one as a second
candidate). Trace: the aten attention ops below. Stage C: no GEMM re-run."""
from __future__ import annotations

from roofline.models import attention as _model
from roofline.opclasses.aten import distinct_elems, dtype_of
from roofline.opclasses.base import OpClass, register
from roofline.opclasses.stage_a import cfg, fill, require, workload

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


register(OpClass("attn", model=_model.model, fill=fill_stage_a, trace_shape=trace_shape,
                 shape_keys=frozenset({"batch", "seq_len", "q_len", "n_q_heads", "n_kv_heads", "head_dim", "paged",
                                       "causal", "regime", "mask_bytes"}),
                 dim_keys=frozenset({"batch", "seq_len", "n_q_heads", "n_kv_heads", "head_dim"})))

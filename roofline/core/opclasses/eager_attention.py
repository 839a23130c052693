"""Eager attention's materialised score matrix (docs/method.md section 12): the rule that says whether a
streaming head's or a batched GEMM's bytes are necessary when it is a link of an eager attention's
score chain.

transformers' eager attention writes the scores [batch, heads, q_len, kv_len] to HBM with its QK^T
batched GEMM and reads them back op by op (scale, mask, gpt-oss's sink column by cat, the max and sub
of a stable softmax, the softmax with its fp32 upcast and cast back) up to the PV batched GEMM. A fused
attention (SDPA's flash / memory-efficient / cuDNN kernels, flash-attention, a serving engine's
attention) keeps the scores on chip: it reads Q, K, V once and writes O.

The rule, on three kinds of evidence, all required:
1. the trace (Top-N `trace_evidence.score_chains`, roofline.ingest.score_chains): the op is a link of a
   complete chain, from the QK^T bmm [b x h, q, d] x [b x h, d, kv] to the PV bmm [b x h, q, kv] x
   [b x h, kv, d], each op launched right after the one before in the same step and reading the
   tensor it wrote; the entry's kernel is the link's kernel and its shape is the link's;
2. config.json: the chain's heads h are num_attention_heads (/ tp on one rank of a tensor-parallel run whose
   degree the Top-N or the env report gives: roofline.core.necessary.tp_degree) and its d is head_dim;
3. the lengths: kv_len is the step's key length: q_len itself (a prompt attending to itself), or the
   slots of the step's KV cache record (`trace_evidence.kv_caches`).
Then the op's necessary bytes are its share of the fused attention's bytes for the layer (Q, K and V of
config.json's KV heads, O, the sinks, and an explicit mask the chain adds: an upper bound, since a
causal or sliding-window kernel builds the mask on chip), over the chain's ops: the ops' necessary
bytes together are one fused attention. The FLOPs stay the model's (the fused kernel does the QK^T and
PV matmuls too). A decode bmm over a KV cache is the KV-cache rule's first (gemm.necessary: broadcast
KV heads, empty slots): one lever per cause.
What cannot be known from the trace: whether the fused backend takes this model's mask and sinks, and
the fused kernel's own pace (the saving is counted at this kernel's)."""
from __future__ import annotations

from math import prod

from roofline.core.opclasses import kvcache, origin
from roofline.core.opclasses.base import Necessary
from roofline.core.opclasses.jobs import rule
from roofline.peaks import DTYPE_BYTES

KIND = "materialised_scores"
EVIDENCE_KEY = "score_chains"
SPLIT_KEY = "op_launches"
LEVER = ("use a fused attention (attn_implementation=\"sdpa\" or a flash-attention kernel; in serving, the engine's "
         "attention): it keeps the [batch, heads, q_len, kv_len] scores on chip instead of writing them to HBM and "
         "reading them back in {n} ops")
SINKS = (" (attention sinks: a kernel that supports them: flash-attention 3 with sinks, transformers' "
         "attn_implementation=\"kernels-community/vllm-flash-attn3\", FlexAttention with a score_mod, or the serving "
         "engine's attention; PyTorch SDPA takes no sinks)")


def _mb(x: float) -> str:
    return f"{x / 1e6:.4g} MB" if x >= 1e5 else f"{x:.4g} B"


def match(shape: dict, ctx) -> tuple[dict, int] | None:
    """(the chain record, the link's index) whose link is this kernel with this shape in this regime."""
    recs = ctx.trace_evidence.get(EVIDENCE_KEY)
    if not recs or not ctx.kernel:
        return None
    key = {k: v for k, v in shape.items() if k != SPLIT_KEY}
    for r in recs:
        if r.get("regime") not in (None, ctx.regime):
            continue
        for i, lk in enumerate(r.get("links") or []):
            if ctx.kernel in (lk.get("kernels") or []) and lk.get("shape") == key:
                return r, i
    return None


def heads_of(ctx) -> tuple[int, int, int, str] | None:
    """(query heads, KV heads, head_dim, the config words) of one rank: config.json's, the heads / tp on one
    rank of a tensor-parallel run whose degree the Top-N or the env report gives (ctx.tp: tensor parallelism
    splits heads, never a head; a rank holds at least one KV head); None without them."""
    att = origin.attention_dims(ctx.config)
    if att is None:
        return None
    hq, hk, d = att
    words = f"config.json num_attention_heads {hq}, num_key_value_heads {hk}, head_dim {d}"
    tp = ctx.tp if isinstance(ctx.tp, int) and ctx.tp > 1 else None
    if tp and hq % tp == 0:
        return hq // tp, max(1, hk // tp), d, f"{words}; / TP {tp} on this rank ({ctx.tp_evidence})"
    return hq, hk, d, words


def lengths(rec: dict, ctx) -> str | None:
    """Why kv_len is the step's key length (the evidence), or None where nothing says it is."""
    q, kv, b = rec["q_len"], rec["kv_len"], rec["batch"]
    if q == kv:
        return f"q_len = kv_len = {q}: the step's {q} tokens per sequence attending to themselves"
    c = kvcache.cache_of(ctx, kv, b)
    if c is not None:
        return f"kv_len {kv} = the slots of the step's KV cache, {c['op']} {c['dims']} (trace_evidence.kv_caches)"
    return None


def parts(rec: dict, hq: int, hk: int, a: float) -> dict[str, float]:
    """The bytes of one fused attention for the chain's layer, by what moves them in the eager chain: Q and
    K (of the hk KV heads) read by QK^T, V read and O written by PV, the sink logits read by the sink cat,
    the explicit mask read by the op that adds it (distinct elements, in the model dtype: transformers
    builds it there; an upper bound: a causal or sliding-window kernel builds it on chip)."""
    b, q, kv, d, extra = rec["batch"], rec["q_len"], rec["kv_len"], rec["head_dim"], rec.get("extra_cols") or 0
    m = rec.get("mask")
    return {"Q": b * hq * q * d * a, "K": b * hk * kv * d * a, "V": b * hk * kv * d * a, "O": b * hq * q * d * a,
            "sinks": hq * extra * a, "mask": prod(m) * a if isinstance(m, list) and m else 0.0}


def role(rec: dict, i: int) -> tuple[str, ...]:
    """What of the fused attention's bytes link i moves: QK^T Q and K, PV V and O, the op that adds the
    mask the mask, the cat that appends the sink column the sinks; the others none (the fused kernel does
    their work on chip: the launch need not run)."""
    links = rec["links"]
    if i == 0:
        return ("Q", "K")
    if i == len(links) - 1:
        return ("V", "O")
    lk = links[i]
    if rec.get("mask") and rec["mask"] in lk["dims"]:
        return ("mask",)
    if rec.get("extra_cols") and lk["op"] in ("aten::cat", "aten::_cat"):
        return ("sinks",)
    return ()


@rule("gemm", rank=40)
@rule("elementwise", "norm", "quant", rank=20)
def necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The materialised-scores verdict of one shape of a chain link, or None where the rule does not apply."""
    hit = match(shape, ctx)
    heads = heads_of(ctx)
    if hit is None or heads is None:
        return None
    rec, i = hit
    hq, hk, d, words = heads
    if rec["heads"] != hq or rec["head_dim"] != d:
        return None
    why_len = lengths(rec, ctx)
    if why_len is None:
        return None
    a = DTYPE_BYTES.get(rec.get("dtype") or "") or dt["act_bytes"]
    p, mine = parts(rec, hq, hk, a), role(rec, i)
    n = float(shape.get(SPLIT_KEY) or 1)
    need = sum(p[k] for k in mine)
    ev = [chain_words(rec, i, hq), f"{words}: the chain's {rec['heads']} heads of head_dim {rec['head_dim']}", why_len,
          "necessary: a fused attention moves " + " + ".join(f"{k} {_mb(v)}" for k, v in p.items() if v)
          + f" = {_mb(sum(p.values()))} per layer (K, V of the {hk} KV heads"
          + (", the mask an upper bound: SDPA reads an explicit mask, a causal or sliding-window kernel builds it on "
             "chip" if p["mask"] else "") + "); this op's part: "
          + (" + ".join(mine) + f" = {_mb(need)}" + (f" ({_mb(need / n)} per launch of {n:g})" if n > 1 else "")
             if mine else "none: the fused kernel does its work on chip, the launch need not run"),
          "not known from the trace: whether the fused backend takes this model's mask (sliding window, padding)"
          + (" and sinks" if rec.get("extra_cols") else "") + ", and the fused kernel's own pace (the saving is "
          "counted at this kernel's)"]
    lever = LEVER.format(n=len(rec["links"]) - 1) + (SINKS if rec.get("extra_cols") else "")
    # the other kernels of every chain this kernel is a link of (any regime): the fused attention removes
    # them too (no fusion lever with them)
    covers = frozenset(k for r in ctx.trace_evidence.get(EVIDENCE_KEY) or [] if any(
        ctx.kernel in lk["kernels"] for lk in r["links"]) for lk in r["links"] for k in lk["kernels"]) - {ctx.kernel}
    if not mine:
        return Necessary(0.0, 0.0, kind=KIND, evidence=ev, removable=True, lever=lever, covers=covers)
    return Necessary(min(bytes_est, need / n), kind=KIND, evidence=ev, lever=lever, covers=covers)


def chain_words(rec: dict, i: int, hq: int) -> str:
    """The chain in words: the op, its place, the scores' dims and what they are, the chain's ops."""
    links, extra = rec["links"], rec.get("extra_cols") or 0
    sc = [rec["batch"], hq, rec["q_len"], rec["kv_len"] + extra]
    return (f"{links[i]['op']} {links[i]['dims']} is op {i + 1} of {len(links)} of an eager attention's score chain in "
            f"the {rec.get('regime') or 'traced'} step(s) ({rec['chains']} chain(s) in the trace): the scores {sc} "
            f"({rec['batch']} sequences x {hq} heads x {rec['q_len']} queries x {rec['kv_len']} keys"
            + (f" + {extra} sink column(s)" if extra else "") + f"), written to HBM by the QK^T bmm {links[0]['dims']} "
            f"and read back by each op up to the PV bmm {links[-1]['dims']}: " + " -> ".join(lk["op"] for lk in links)
            + " (each launched right after the one before in the same step, reading the tensor it wrote)")

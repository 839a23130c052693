"""Where a GEMM's operands come from, for its lower-precision lever (docs/method.md section 12,
"Lower precision: whose bytes"): a parameter (a weight: fp8 weights shrink it), a KV cache (fp8 KV
shrinks it), another activation (no precision lever), or unknown (no lever; the notes say what is
missing). A lever on the wrong operand is a wrong claim: an eager attention's QK^T / PV batched GEMM
reads the KV cache, not a weight; transformers' batched_mm MoE reads gathered expert WEIGHTS through
a batched GEMM.

What is read, per shape of the entry in the analysed regime:
* the GEMM's form (the launching aten op): a 2-D B ([K, N]: aten::mm / addmm / linear, or a matmul
  whose B is 2-D) or a batched one (aten::bmm / baddbmm / matmul over [batch, ., .]);
* config.json: the weight dimensions it names (hidden, intermediate, vocab, heads x head_dim, experts,
  MLA ranks: ``weight_dims``), the attention's heads / head_dim, an expert's hidden x intermediate;
* the step-by-step change of the dims (``grows``): a cache operand gains a token each decode step, so
  the entry's shapes differ in that one dim by a small constant step; a weight's dims never do;
* the trace's cache records (Top-N ``trace_evidence.kv_caches``): a cache of S slots for the b
  sequences of the attention.
Pure functions."""
from __future__ import annotations

from dataclasses import dataclass

from roofline.core.opclasses import kvcache

GROW_STEP_MAX = 16      # a dim that differs across the entry's shapes by a constant step this small grows per step
                        # (tokens per decode step; weight dims differ by hundreds or more)


@dataclass
class Origin:
    """The operand a precision lever would shrink: kind "parameter" (a weight), "kv_cache", "activation"
    or "unknown"; operand "A" / "B" (None: none); evidence or what is missing, in words."""
    kind: str
    operand: str | None = None
    evidence: str = ""


def _flat(config: dict | None) -> dict:
    """config.json with a multimodal model's text_config folded in (the language model's dims)."""
    if not isinstance(config, dict):
        return {}
    tc = config.get("text_config")
    return {**(tc if isinstance(tc, dict) else {}), **{k: v for k, v in config.items() if v is not None}}


def _int(c: dict, *keys) -> int | None:
    for k in keys:
        v = c.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def attention_dims(config: dict | None) -> tuple[int, int, int] | None:
    """(query heads, KV heads, head_dim) of config.json, or None."""
    c = _flat(config)
    hq = _int(c, "num_attention_heads", "n_head")
    h = _int(c, "hidden_size", "d_model")
    d = _int(c, "head_dim") or (h // hq if h and hq and h % hq == 0 else None)
    if not hq or not d:
        return None
    return hq, _int(c, "num_key_value_heads", "num_kv_heads") or hq, d


def expert_dims(config: dict | None) -> tuple[int, int, int] | None:
    """(experts, hidden, expert intermediate) of an MoE config.json, or None."""
    c = _flat(config)
    E = _int(c, "num_experts", "num_local_experts", "n_routed_experts")
    h = _int(c, "hidden_size", "d_model")
    mi = _int(c, "moe_intermediate_size", "expert_intermediate_size", "intermediate_size")
    return (E, h, mi) if E and h and mi else None


# Megatron tensor parallelism splits a column-parallel layer's output dim N (q/k/v, their fusions, gate/up,
# gate+up, the LM head: "col") and a row-parallel layer's input dim K (o_proj: heads x head_dim; down:
# intermediate: "any", a dim either side may be cut in); hidden, the router's experts and the MLA low ranks
# stay whole on each rank (None)
WHOLE_KEYS = ("hidden_size", "d_model", "num_experts", "num_local_experts", "n_routed_experts", "q_lora_rank",
              "kv_lora_rank")
TP_UNKNOWN = "the run's tensor-parallel degree is not known"
TP_HINT_MAX = 16        # an unknown GEMM whose dims a TP degree up to this would explain: the notes say which


def _dims(config: dict | None) -> list[tuple[int, str, str | None]]:
    """(dim, what names it, how tensor parallelism cuts it: "any", "col" (an output only) or None) of
    every weight dim config.json names."""
    c = _flat(config)
    out: list[tuple[int, str, str | None]] = []

    def put(v, what, cut="col"):
        if isinstance(v, int) and v > 0:
            out.append((v, what, cut))
    for k in ("hidden_size", "d_model", "intermediate_size", "moe_intermediate_size", "expert_intermediate_size",
              "shared_expert_intermediate_size", "vocab_size", "num_experts", "num_local_experts", "n_routed_experts",
              "q_lora_rank", "kv_lora_rank"):
        put(c.get(k), k, None if k in WHOLE_KEYS else "col" if k == "vocab_size" else "any")
    for k in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size"):
        if isinstance(c.get(k), int):
            put(2 * c[k], f"2 x {k} (gate+up)")
    att = attention_dims(config)
    if att:
        hq, hk, d = att
        put(hq * d, "num_attention_heads x head_dim", "any")
        put(hk * d, "num_key_value_heads x head_dim")
        put((hq + 2 * hk) * d, "(q + k + v heads) x head_dim")
        put(2 * hk * d, "2 x num_key_value_heads x head_dim (k+v)")
        put(2 * hq * d, "2 x num_attention_heads x head_dim (gated q)")
    nk, dk = _int(c, "linear_num_key_heads"), _int(c, "linear_key_head_dim")
    nv, dv = _int(c, "linear_num_value_heads"), _int(c, "linear_value_head_dim")
    if nk and dk and nv and dv:     # a linear-attention layer's projections (qkvz, ba, out)
        put(2 * nk * dk + 2 * nv * dv, "linear attention q + k + v + z dims")
        put(nv * dv, "linear_num_value_heads x linear_value_head_dim", "any")
        put(2 * nv, "2 x linear_num_value_heads (b, a)")
    mh, mdh = _int(c, "mamba_n_heads", "mamba_num_heads"), _int(c, "mamba_d_head", "mamba_head_dim")
    mg, ms = _int(c, "mamba_n_groups", "n_groups") or 1, _int(c, "mamba_d_state", "ssm_state_size", "state_size")
    if mh and mdh and ms:          # a Mamba2 layer's in_proj (z, x, B, C, dt) and out_proj
        put(mh * mdh, "mamba_n_heads x mamba_d_head (d_inner)", "any")
        put(2 * mh * mdh + 2 * mg * ms + mh, "Mamba2 in_proj (2 d_inner + 2 groups x d_state + heads)")
    nope, rope, vh = _int(c, "qk_nope_head_dim"), _int(c, "qk_rope_head_dim"), _int(c, "v_head_dim")
    hq = att[0] if att else None
    if hq and nope and rope:
        put(hq * (nope + rope), "num_attention_heads x qk_head_dim (MLA q)")
    if hq and nope and vh:
        put(hq * (nope + vh), "num_attention_heads x (qk_nope + v) head dims (MLA kv_b)")
    if rope and isinstance(c.get("kv_lora_rank"), int):
        put(c["kv_lora_rank"] + rope, "kv_lora_rank + qk_rope_head_dim (MLA kv_a)", None)
    return out


def weight_dims(config: dict | None) -> dict[int, str]:
    """The dims a weight matrix of the model has, from config.json: {dim: what names it}. A projection's
    rows and columns are each one of these (fused projections: q+k+v, gate+up)."""
    out: dict[int, str] = {}
    for v, what, _ in _dims(config):
        out.setdefault(v, what)
    return out


def shard_dims(config: dict | None, tp: int | None, row: bool = False) -> dict[int, str]:
    """The dims a weight holds on one rank of a tensor-parallel run of degree `tp`: a column-parallel
    layer's N (row=False) or a row-parallel layer's K (row=True), from config.json's dims that TP cuts
    there: {dim / tp: "what / TP tp"} where tp divides it; {} for no TP."""
    out: dict[int, str] = {}
    if not tp or tp < 2:
        return out
    for v, what, cut in _dims(config):
        if cut in (("any",) if row else ("any", "col")) and v % tp == 0:
            out.setdefault(v // tp, f"{what} / TP {tp}")
    return out


def uncut_dims(config: dict | None) -> dict[int, str]:
    """The weight dims tensor parallelism never cuts (hidden, the MLA low ranks): {dim: what names it}."""
    out: dict[int, str] = {}
    for v, what, cut in _dims(config):
        if cut is None and "experts" not in what:
            out.setdefault(v, what)
    return out


def _tp_hint(K: int, N: int, config) -> str:
    """Under which TP degree (the smallest up to TP_HINT_MAX) a Megatron shard would explain K x N, or ""."""
    full = uncut_dims(config)
    for t in range(2, TP_HINT_MAX + 1):
        col, row = shard_dims(config, t), shard_dims(config, t, row=True)
        if K in full and N in col:
            return f" (under TP {t}, N = {col[N]})"
        if K in row and N in full:
            return f" (under TP {t}, K = {row[K]})"
    return ""


def grows(shape: dict, shapes: list, key: str) -> tuple[int, int] | None:
    """(first, last) when the entry's shapes equal to `shape` in every other dim take values of `key`
    that step by a constant small step (a cache gaining tokens step by step); None: constant."""
    others = {k: v for k, v in shape.items() if k != key}
    vals = sorted({s.get(key) for s in shapes if isinstance(s.get(key), int)
                   and {k: v for k, v in s.items() if k != key} == others})
    if len(vals) < 2:
        return None
    steps = {b - a for a, b in zip(vals, vals[1:])}
    return (vals[0], vals[-1]) if len(steps) == 1 and next(iter(steps)) <= GROW_STEP_MAX else None


def _fmt(*d) -> str:
    return "[" + ",".join(str(x) for x in d) + "]"


def _batched(sh: dict, ctx) -> Origin:
    """A batched GEMM [batch, M, K] x [batch, K, N]: an attention's QK^T / PV over heads, or a batched
    MoE over gathered expert weights; else unknown."""
    B, M, N, K = sh["batch"], sh["M"], sh["N"], sh["K"]
    form = f"batched GEMM {_fmt(B, M, K)} x {_fmt(B, K, N)}"
    ex = expert_dims(ctx.config)
    if ex:
        _, h, mi = ex
        tp = _tp(ctx)      # a TP rank holds each expert's intermediate / tp
        wdims = {x for m in ({mi, mi // tp} if tp and mi % tp == 0 else {mi}) for x in ((2 * m, h), (m, h), (h, m))}
        fixed = not (grows(sh, ctx.shapes, "M") or grows(sh, ctx.shapes, "N") or grows(sh, ctx.shapes, "K"))
        if (M, K) in wdims and fixed:
            return Origin("parameter", "A", f"{form}: A {_fmt(B, M, K)} is {B} gathered expert weights of "
                          f"{M} x {K} (config.json hidden_size {h}, expert intermediate {mi}; a batched MoE), the same "
                          "in every step")
        if (N, K) in wdims and fixed:
            return Origin("parameter", "B", f"{form}: B {_fmt(B, K, N)} is {B} gathered expert weights of "
                          f"{K} x {N} (config.json hidden_size {h}, expert intermediate {mi}), the same in every step")
    att = attention_dims(ctx.config)
    if att is None:
        return Origin("unknown", None, f"{form}: config.json gives no attention heads / head_dim and no expert dims "
                      "to say what its operands are")
    hq, hk, d = att
    qk, pv = K == d, N == d
    S, tp = (N if qk else K), _tp(ctx)
    # one rank of a TP run holds hq / tp query and hk / tp KV heads: those first where the TP degree is known
    cands = [(h // tp, f"{h // tp} heads (config.json's {h} / TP {tp})") for h in (hq, hk) if tp and h % tp == 0]
    cands = [(h, w) for h, w in cands + [(hq, f"{hq} heads"), (hk, f"{hk} heads")] if B % h == 0]
    if not (qk or pv) or not cands:
        why = ""
        if (qk or pv) and not tp and any(h % t == 0 and B % (h // t) == 0 for h in (hq, hk)
                                         for t in range(2, TP_HINT_MAX + 1)):
            why = f" ({TP_UNKNOWN}: config.json's heads / TP are not tried)"
        return Origin("unknown", None, f"{form}: neither an attention over config.json's {hq} heads of head_dim {d} "
                      f"nor a batched MoE over its expert weights{why}")
    heads, label = next(((h, w) for h, w in cands if ctx.regime == "decode" and kvcache.cache_of(ctx, S, B // h)),
                        cands[0])
    b, op = B // heads, ("QK^T" if qk else "PV")
    what = f"{form} is the {op} of an eager attention (batch {B} = {b} x {label}, head_dim {d}: config.json)"
    if ctx.regime != "decode":
        return Origin("activation", None, f"{what}: its B is this step's {'K' if qk else 'V'} (an activation), "
                      "not a cache read")
    cache = kvcache.cache_of(ctx, S, b)
    if cache is not None:
        return Origin("kv_cache", "B", f"{what}: B is the {'K' if qk else 'V'} cache, {cache['op']} {cache['dims']} "
                      f"of {S} slots (trace_evidence.kv_caches)")
    g = grows(sh, ctx.shapes, "N" if qk else "K")
    if g:
        return Origin("kv_cache", "B", f"{what}: B is the {'K' if qk else 'V'} cache, its length grows step by step "
                      f"({g[0]} -> {g[1]})")
    return Origin("activation", None, f"{what}: B is its {'K' if qk else 'V'} (an activation); no cache record of "
                  f"{S} slots and no length that grows step by step says it is read from a cache")


def gemm_origin(sh: dict, ctx) -> Origin:
    """The origin of one GEMM shape's operands (M, N, K[, batch])."""
    if not all(isinstance(sh.get(k), int) for k in ("M", "N", "K")):
        return Origin("unknown", None, "the GEMM has no captured M, N, K (record_shapes)")
    if isinstance(sh.get("batch"), int):
        return _batched(sh, ctx)
    N, K = sh["N"], sh["K"]
    ops = ", ".join(sorted(ctx.aten_ops)) if ctx.aten_ops else "a GEMM op"
    g = grows(sh, ctx.shapes, "N") or grows(sh, ctx.shapes, "K")
    if g:
        return Origin("activation", None, f"B [K, N] = {_fmt(K, N)} of {ops} changes step by step ({g[0]} -> {g[1]}): "
                      "not a weight")
    if not ctx.config:
        return Origin("unknown", None, f"B [K, N] = {_fmt(K, N)} of {ops}: no config.json to match it against the "
                      "model's weight dims")
    dims, tp = weight_dims(ctx.config), _tp(ctx)
    # a TP rank's Megatron shard first (its cut dim may equal another whole dim of config.json): a column-
    # parallel layer reads a dim TP never cuts (hidden, an MLA low rank) into its cut N, a row-parallel one
    # its cut K into such a dim
    whole_dims = uncut_dims(ctx.config)
    for cut, whole, how in (("N", "K", "column-parallel"), ("K", "N", "row-parallel")):
        c, w, sd = sh[cut], sh[whole], shard_dims(ctx.config, tp, row=cut == "K")
        if c in sd and w in whole_dims:
            return Origin("parameter", "B", f"B [K, N] = {_fmt(K, N)} of {ops} is a weight, one rank's {how} shard: "
                          f"{whole} = {whole_dims[w]}, {cut} = {sd[c]} (config.json; {ctx.tp_evidence}), the same in "
                          "every step")
    if K in dims and N in dims:
        return Origin("parameter", "B", f"B [K, N] = {_fmt(K, N)} of {ops} is a weight: K = {dims[K]}, N = {dims[N]} "
                      "(config.json), the same in every step")
    miss = " and ".join(f"{n} = {v}" for n, v in (("K", K), ("N", N)) if v not in dims)
    if tp:
        return Origin("unknown", None, f"B [K, N] = {_fmt(K, N)} of {ops}: {miss} is no weight dim of config.json, "
                      f"nor a TP {tp} shard of one ({ctx.tp_evidence})")
    hint = _tp_hint(K, N, ctx.config)
    return Origin("unknown", None, f"B [K, N] = {_fmt(K, N)} of {ops}: {miss} is no weight dim of config.json"
                  + (f"; a tensor-parallel shard would explain it{hint}, but {ctx.tp_evidence or TP_UNKNOWN}: "
                     "a config.json dim / TP is accepted only where the TP degree is known" if hint else ""))


def _tp(ctx) -> int | None:
    """The run's tensor-parallel degree the context carries (None: not known)."""
    return ctx.tp if isinstance(ctx.tp, int) and ctx.tp > 1 else None


def operand_bytes(sh: dict, dt: dict, operand: str) -> float:
    """Bytes of operand A ([batch, M, K], act dtype) or B ([batch, K, N], weight dtype) of one launch."""
    b = float(sh.get("batch", 1))
    if operand == "A":
        return b * sh["M"] * sh["K"] * dt["act_bytes"]
    return b * sh["K"] * sh["N"] * dt["weight_bytes"]

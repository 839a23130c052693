"""Fill an entry's shape for its op class: captured `shapes` (stage B) first, then the profiler's
`est_shape`, then config.json and the workload (stage A). Every filled field is recorded as an
assumption so that `notes` can say what was assumed."""
from __future__ import annotations

from roofline.errors import EntryError
from roofline.inputs import Entry, Env


def _cfg(config: dict | None, *keys):
    for k in keys:
        if config and config.get(k) is not None:
            return config[k]
    return None


def _fill(shape: dict, key: str, value, why: str, assumed: list[str]):
    if key not in shape and value is not None:
        shape[key] = value
        assumed.append(f"{key}={value:g} ({why})" if isinstance(value, (int, float)) else f"{key}={value} ({why})")


def resolve_shapes(op_class: str, e: Entry, env: Env, config: dict | None, regime: str
                   ) -> tuple[list[dict], str, list[str]]:
    """-> (shapes, source, assumptions). source is "captured" (stage B) or "estimated" (stage A).
    Raises EntryError when a needed dimension cannot be found anywhere."""
    assumed: list[str] = []
    if e.shapes:
        bases, source = [dict(s) for s in e.shapes], "captured"
    else:
        bases, source = [dict(e.est_shape or {})], "estimated"
    wl = env.workload
    conc, isl, osl = wl["conc"], wl["isl"], wl["osl"]
    out = []
    for s in bases:
        if e.est_shape and source == "captured":
            for k, v in e.est_shape.items():
                _fill(s, k, v, "from est_shape", assumed)
        if op_class == "gemm":
            if regime == "decode":
                _fill(s, "M", int(conc), "decode M = workload.conc", assumed)
            else:
                _fill(s, "M", int(isl), "prefill M = one sequence of workload.isl tokens per step", assumed)
            need = ("M", "N", "K")
        elif op_class == "moe":
            if regime == "decode":
                _fill(s, "M", int(conc), "decode M = workload.conc", assumed)
            else:
                _fill(s, "M", int(isl), "prefill M = one sequence of workload.isl tokens per step", assumed)
            _fill(s, "E", _cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
            _fill(s, "top_k", _cfg(config, "num_experts_per_tok", "moe_topk", "top_k"), "config.json", assumed)
            _fill(s, "hidden", _cfg(config, "hidden_size", "d_model"), "config.json", assumed)
            _fill(s, "inter", _cfg(config, "moe_intermediate_size", "expert_intermediate_size"), "config.json", assumed)
            need = ("M", "E", "top_k", "hidden", "inter")
        elif op_class == "attn":
            heads = _cfg(config, "num_attention_heads", "n_head")
            _fill(s, "n_q_heads", heads, "config.json", assumed)
            _fill(s, "n_kv_heads", _cfg(config, "num_key_value_heads", "num_kv_heads") or heads, "config.json", assumed)
            hd = _cfg(config, "head_dim")
            if hd is None and heads and _cfg(config, "hidden_size"):
                hd = int(_cfg(config, "hidden_size")) // int(heads)
            _fill(s, "head_dim", hd, "config.json", assumed)
            if regime == "decode":
                _fill(s, "batch", int(conc), "decode batch = workload.conc", assumed)
                if "seq_len" not in s:
                    # NB: seq_len is the CURRENT average context; mid-run that is isl + osl/2. The
                    # full context isl + osl is the upper candidate (the feasibility rule picks).
                    s["seq_len_candidates"] = [("mean_context", isl + osl / 2), ("max_context", isl + osl)]
                    s["seq_len"] = isl + osl / 2
                    assumed.append(f"seq_len={isl + osl / 2:g} (isl + osl/2, the mid-run average context; "
                                   f"upper candidate isl + osl = {isl + osl:g}) - a real source of error")
            else:
                _fill(s, "batch", 1, "prefill: one sequence per launch", assumed)
                _fill(s, "seq_len", int(isl), "prefill seq_len = workload.isl", assumed)
            s["regime"] = regime
            need = ("batch", "seq_len", "n_q_heads", "n_kv_heads", "head_dim")
        elif op_class in ("elementwise", "norm", "quant"):
            if "elems_in" not in s and "shape" not in s:
                hidden = _cfg(config, "hidden_size")
                tokens = conc if regime == "decode" else isl
                if hidden:
                    s["elems_in"] = int(tokens * hidden)
                    assumed.append(f"elems_in={tokens * hidden:g} ({'conc' if regime == 'decode' else 'isl'} tokens x "
                                   "hidden_size: a per-token op over the hidden state)")
            need = ("elems_in",) if "shape" not in s else ()
        else:
            raise EntryError(f"op class {op_class!r} has no byte/FLOP model")
        missing = [k for k in need if k not in s]
        if missing:
            if e.raw.get("cuda_graph_replayed"):
                how = (": it was replayed from a CUDA graph, and replayed kernels carry no shapes; one eager step "
                       "in the profiled window gives them, or counters at stage C (--counters)")
            elif op_class == "gemm":
                how = (": a GEMM's N and K come only from captured shapes (profile with record_shapes=True) or "
                       "an est_shape in the Top-N")
            elif not config:
                how = (": give the model's config.json (`roofline analyze --config FILE`, or "
                       "`roofline topn --config FILE`)")
            else:
                how = ""
            raise EntryError(f"{op_class} shape is missing {', '.join(missing)} and neither the Top-N, "
                             f"config.json nor the workload gives it{how}")
        out.append(s)
    return out, source, assumed

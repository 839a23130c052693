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
    out = []
    for s in bases:
        if e.est_shape and source == "captured":
            for k, v in e.est_shape.items():
                _fill(s, k, v, "from est_shape", assumed)
        fill = _FILLERS.get("stream" if op_class in ("elementwise", "norm", "quant") else op_class)
        if fill is None:
            raise EntryError(f"op class {op_class!r} has no byte/FLOP model")
        need = fill(s, op_class, e, env.workload, config, regime, assumed)
        missing = [k for k in need if k not in s]
        if missing:
            raise EntryError(f"{op_class} shape is missing {', '.join(missing)} and neither the Top-N, "
                             f"config.json nor the workload gives it{_missing_how(op_class, e, config)}")
        out.append(s)
    return out, source, assumed


def _fill_m(s: dict, wl: dict, regime: str, assumed: list[str]) -> None:
    if regime == "decode":
        _fill(s, "M", int(wl["conc"]), "decode M = workload.conc", assumed)
    else:
        _fill(s, "M", int(wl["isl"]), "prefill M = one sequence of workload.isl tokens per step", assumed)


def _fill_gemm(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    _fill_m(s, wl, regime, assumed)
    return ("M", "N", "K")


def _fill_moe(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    _fill_m(s, wl, regime, assumed)
    _fill(s, "E", _cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
    _fill(s, "top_k", _cfg(config, "num_experts_per_tok", "moe_topk", "top_k"), "config.json", assumed)
    _fill(s, "hidden", _cfg(config, "hidden_size", "d_model"), "config.json", assumed)
    _fill(s, "inter", _cfg(config, "moe_intermediate_size", "expert_intermediate_size"), "config.json", assumed)
    return ("M", "E", "top_k", "hidden", "inter")


def _fill_attn(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    conc, isl, osl = wl["conc"], wl["isl"], wl["osl"]
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
            # full context isl + osl is only the upper end of the displayed range.
            s["seq_len_candidates"] = [("mean_context", isl + osl / 2), ("max_context", isl + osl)]
            s["seq_len"] = isl + osl / 2
            assumed.append(f"seq_len={isl + osl / 2:g} (isl + osl/2, the mid-run average context; "
                           f"upper candidate isl + osl = {isl + osl:g}) - a real source of error")
    else:
        _fill(s, "batch", 1, "prefill: one sequence per launch", assumed)
        _fill(s, "seq_len", int(isl), "prefill seq_len = workload.isl", assumed)
    s["regime"] = regime
    return ("batch", "seq_len", "n_q_heads", "n_kv_heads", "head_dim")


def _fill_stream(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    """elementwise / norm / quant: elems_in (or a shape), never guessed for a plain elementwise."""
    if "elems_in" not in s and "shape" not in s and op_class in ("norm", "quant"):
        # NB: a norm / quant kernel works per token over the hidden state: tokens x hidden is
        # its stage-A size (low confidence, display only)
        hidden = _cfg(config, "hidden_size")
        tokens = wl["conc"] if regime == "decode" else wl["isl"]
        if hidden:
            s["elems_in"] = int(tokens * hidden)
            assumed.append(f"elems_in={tokens * hidden:g} ({'conc' if regime == 'decode' else 'isl'} tokens x "
                           f"hidden_size: a {op_class} works per token over the hidden state)")
    if "elems_in" not in s and "shape" not in s:
        # NB: no guess. A streaming kernel's size is whatever its op moved (a KV-cache cat
        # moves the whole cache, a norm one hidden state per token): tokens x hidden_size
        # would be a number the tool cannot know, so the entry degrades (L2) instead.
        why = e.raw.get("shape_unknown") if isinstance(e.raw, dict) else None
        raise EntryError(f"{op_class} kernel without a shape: " + (why if isinstance(why, str) else
                         "the Top-N gives neither shapes nor est_shape (elems_in / shape), and an "
                         "elementwise size cannot be derived from config.json")
                         + "; give shapes (roofline topn with record_shapes) or stage-C counters")
    return ("elems_in",) if "shape" not in s else ()


_FILLERS = {"gemm": _fill_gemm, "moe": _fill_moe, "attn": _fill_attn, "stream": _fill_stream}


def _missing_how(op_class: str, e: Entry, config: dict | None) -> str:
    """What would give a missing dimension, for the L2 reason."""
    if e.raw.get("cuda_graph_replayed"):
        return (": it was replayed from a CUDA graph, and replayed kernels carry no shapes; one eager step "
                "in the profiled window gives them, or counters at stage C (--counters)")
    if op_class == "gemm":
        return (": a GEMM's N and K come only from captured shapes (profile with record_shapes=True) or "
                "an est_shape in the Top-N")
    if not config:
        return (": give the model's config.json (`roofline analyze --config FILE`, or "
                "`roofline topn --config FILE`)")
    return ""


def _num_list(v, n: int) -> list[float] | None:
    if isinstance(v, list) and len(v) == n and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                    and x >= 0 for x in v):
        return [float(x) for x in v]
    return None


def work_mix(op_class: str, e: Entry, env: Env, config: dict | None, regime: str
             ) -> tuple[list[dict], list[float], list[dict], list[float] | None, list[float] | None, str,
                        list[str], list[str]]:
    """THE one place an entry's shapes become its per-launch work, used by the analysis and by the
    stage-C re-run (timing and counters) alike.

    -> (shapes, weights, shape_dtypes, shape_t_ms, shape_launches, source, assumed, notes): the shapes of the
    analysed regime; their weights, each shape's share of the launches (they sum to 1; from
    `shape_launches` whenever the Top-N gives it, equal shares otherwise, and the notes say which);
    per-shape dtype overrides (`shape_dtypes`, else {}); per-shape mean launch time
    (`shape_base_latency_ms`, else None); per-shape launch counts (`shape_launches`, else None).
    NB: the per-launch FLOPs / bytes of a mix are sum(w_i * x_i): the launch-weighted mean, which
    times the launch count gives the kernel's total work exactly."""
    shapes, source, assumed = resolve_shapes(op_class, e, env, config, regime)
    n = len(shapes)
    raw = e.raw if isinstance(e.raw, dict) else {}
    notes: list[str] = []
    idx = list(range(n))
    launches = _num_list(raw.get("shape_launches"), n) if source == "captured" else None
    regs = raw.get("shape_regimes") if source == "captured" else None
    if isinstance(regs, list) and len(regs) == n:
        keep = [i for i, r in enumerate(regs) if isinstance(r, str) and regime in r.split("+")]
        if keep and len(keep) < n:
            notes.append(f"{len(keep)} of {n} captured shapes belong to the {regime} regime")
            idx = keep
    if launches is not None and sum(launches[i] for i in idx) > 0:
        tot = sum(launches[i] for i in idx)
        weights = [launches[i] / tot for i in idx]
        if len(idx) > 1:
            notes.append(f"{len(idx)} captured shapes, per-launch work weighted by their launches "
                         f"({', '.join(f'{launches[i]:g}' for i in idx)})")
    else:
        weights = [1.0 / len(idx)] * len(idx)
        if len(idx) > 1:
            notes.append(f"{len(idx)} shapes without launch counts: equal weights ASSUMED")
    sdt = raw.get("shape_dtypes") if source == "captured" else None
    dts = [dict(sdt[i]) if isinstance(sdt, list) and len(sdt) == n and isinstance(sdt[i], dict) else {}
           for i in idx]
    lat = _num_list(raw.get("shape_base_latency_ms"), n) if source == "captured" else None
    return ([shapes[i] for i in idx], weights, dts, [lat[i] for i in idx] if lat else None,
            [launches[i] for i in idx] if launches else None, source, assumed, notes)

"""Is config.json the traced model's? A config of another model would fill
stage-A shapes with the wrong sizes without a word. The trace's captured shapes say what they are:
  - hidden_size: every dense transformer's QKV / gate-up projection reads the hidden state, so it is
    the K (or, for the row-parallel output projections, the N) of some GEMM of the trace, under any
    tensor parallelism;
  - head_dim (config head_dim, else hidden_size / num_attention_heads): the head_dim of every
    attention shape (tensor parallelism splits heads, never a head).
A contradiction is one line naming it; nothing is changed (the analysis still runs). Pure."""
from __future__ import annotations


def _int(x) -> int | None:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and float(x).is_integer() else None


def mismatch(config: dict | None, topn) -> str | None:
    """One line naming what the trace's shapes contradict in config.json, or None."""
    if not isinstance(config, dict):
        return None
    hidden = _int(config.get("hidden_size")) or _int(config.get("d_model"))
    heads = _int(config.get("num_attention_heads")) or _int(config.get("n_head"))
    head_dim = _int(config.get("head_dim")) or (hidden // heads if hidden and heads and hidden % heads == 0 else None)
    dims, gemms, attn_hd = set(), 0, set()
    for e in topn.entries:
        n_gemm = 0
        for sh in e.shapes or []:
            if not isinstance(sh, dict):
                continue
            if all(_int(sh.get(k)) for k in ("M", "N", "K")) and "E" not in sh:
                dims |= {int(sh["K"]), int(sh["N"])}
                n_gemm += 1
            if _int(sh.get("head_dim")) and _int(sh.get("n_q_heads")):
                attn_hd.add(int(sh["head_dim"]))
        gemms += 1 if n_gemm else 0
    said = []
    if hidden and gemms >= 2 and hidden not in dims:
        said.append(f"hidden_size {hidden} is the K or N of none of the trace's GEMM shapes (they have "
                    + ", ".join(str(d) for d in sorted(dims)[:8]) + (", ..." if len(dims) > 8 else "") + ")")
    # MLA (DeepSeek): the query/key head is qk_nope_head_dim + qk_rope_head_dim, the value head
    # v_head_dim, and the absorbed form attends over kv_lora_rank + qk_rope_head_dim
    nope, rope = _int(config.get("qk_nope_head_dim")), _int(config.get("qk_rope_head_dim"))
    ok = {head_dim, _int(config.get("v_head_dim")), (nope + rope) if nope and rope else None,
          (_int(config.get("kv_lora_rank")) + rope) if _int(config.get("kv_lora_rank")) and rope else None} - {None}
    if head_dim and attn_hd and not (ok & attn_hd):
        said.append(f"head_dim {head_dim} is not the traced attention's ({', '.join(map(str, sorted(attn_hd)))})")
    if not said:
        return None
    name = config.get("model_type") or config.get("_name_or_path") or "config.json"
    return (f"config.json ({name}) does not look like the traced model: {'; '.join(said)}: a config of another "
            "model fills estimated shapes with wrong sizes; give the traced model's config.json")

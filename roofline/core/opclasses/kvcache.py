"""What the trace says about a KV cache, for the necessary jobs of the classes that read one
(attn: a fused attention kernel; gemm: an eager attention's QK^T and PV batched matmuls).
docs/method.md section 12. The records are the Top-N's `trace_evidence.kv_caches`
(roofline.ingest.evidence.kv_caches): a cache written in place a token at a time (a preallocated,
"static" cache of S slots) or the output of a cat that appends to a cache (every position a real
token). Pure functions."""
from __future__ import annotations

FULL_FRAC = 0.98      # filled positions at or above 98% of the slots: no empty slots worth naming


def heads_of(cache: dict) -> tuple[int, int, int, int] | None:
    """(batch, KV heads, slots, head_dim) of a 4-D cache record [b, h, S, d] (sequence dim 2) or
    [b, S, h, d] (sequence dim 1); None for another layout."""
    dims, sd = cache.get("dims") or [], cache.get("seq_dim")
    if len(dims) != 4 or sd not in (1, 2):
        return None
    return int(dims[0]), int(dims[3 - sd]), int(dims[sd]), int(dims[3])


def cache_of(ctx, slots, batch) -> dict | None:
    """The cache record of `slots` positions and `batch` sequences, or None."""
    return next((c for c in ctx.trace_evidence.get("kv_caches", []) if c.get("slots") == slots
                 and (c.get("dims") or [None])[0] == batch), None)


def filled(cache: dict, ctx) -> tuple[float | None, str]:
    """(mean filled positions per launch over the analysed steps, the evidence) of a cache record,
    or (None, what is missing). The output of a cat: every position. A cache written in place: a
    prompt write in the same trace plus the decode steps after it, else the workload's isl plus
    the mean decode position osl/2 (said so: not from the trace)."""
    s = cache["slots"]
    if cache.get("whole_output"):
        return float(s), (f"the K/V are the output of {cache['op']} {cache['dims']} (the kept cache plus the new "
                          "token): every position is a real token")
    toks = {int(k): v for k, v in (cache.get("tokens_written") or {}).items()}
    where = f"{cache['op']} writes {min(toks) if toks else '?'} token(s) at a time into a {s}-slot cache {cache['dims']}"
    prompt = max((t for t in toks if t > 1), default=None)
    n = ctx.steps or 0
    if prompt:
        return prompt + (n + 1) / 2, f"{where}; the trace's prompt write filled {prompt} slots, then {n:g} decode steps"
    isl, osl = ctx.workload.get("isl"), ctx.workload.get("osl")
    if isl:
        mean = float(isl) + (float(osl) / 2 if osl else 0.0)
        return mean, (f"{where}; the trace has no prompt write: filled slots from the workload, isl {isl:g}"
                      + (f" + osl/2 {float(osl) / 2:g}" if osl else "") + " (not from the trace)")
    return None, f"{where}; nothing says how many are filled (no prompt write in the trace, no workload isl)"


def lever(kinds: list[str], nkv: int, fill: float, slots) -> str:
    """The byte-reduction lever of an attention over broadcast KV heads and/or empty cache slots."""
    return "read only what the result needs: " + " and ".join(
        {"kv_heads_broadcast": f"the {nkv} KV heads in place (GQA-aware attention, no repeat_kv)",
         "empty_slots": f"the ~{fill:.0f} filled of {slots} cache slots (pass the filled length / a varlen or paged "
                        "kernel instead of the whole static cache)"}[k] for k in kinds)

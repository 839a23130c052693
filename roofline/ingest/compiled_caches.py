"""A KV cache written in place inside a torch.compile'd graph (docs/method.md section 13).

Inductor fuses a static cache's `index_copy_` (transformers' StaticCache.update) into a Triton kernel named
after it (`triton_poi_fused_..._index_copy_...`): there is no aten::index_copy_ in the trace, but the
kernel's launching cpu_op records its arguments, among them the [b, h, S, d] cache it writes, and its
numel in Concrete Inputs: b x h x t x d elements for t new tokens. That is the same evidence as an eager
index_copy_ (roofline.ingest.evidence.kv_caches): a destination of S slots written t tokens at a time."""
from __future__ import annotations

from collections import Counter

from roofline.core.opclasses.aten import NON_TENSOR


def triton_cache_write(sig, n: int, recs: dict) -> None:
    """Add the cache record(s) of an inductor kernel that fuses index_copy into a 4-D cache."""
    if not (sig.name or "").startswith("triton_") or "index_copy" not in sig.name:
        return
    scal = [int(c) for c, t in zip(sig.concrete, sig.types) if t == "Scalar" and isinstance(c, str) and c.isdigit()]
    if not scal:
        return
    numel = scal[-1]
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple) or len(d) != 4 or (d and isinstance(d[0], tuple)):
            continue
        b, h, s, hd = (int(x) for x in d)
        per_token = b * h * hd
        if not per_token or numel % per_token or not 1 <= numel // per_token < s:
            continue
        key = (sig.name, tuple(d), 2)
        r = recs.setdefault(key, {"op": f"{sig.name} (inductor: index_copy fused)", "dims": [b, h, s, hd], "slots": s,
                                  "seq_dim": 2, "tokens_written": Counter()})
        r["tokens_written"][numel // per_token] += n

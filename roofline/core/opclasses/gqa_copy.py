"""A group-expanded copy (docs/method.md section 13): the rule that says a kernel whose output is one input
repeated along one dim by the attention's group ratio need not run.

transformers' `repeat_kv` expands the KV heads of a grouped-query attention (hk heads) to the query heads
(hq = hk x group) and materialises the copy: [b, hk, kv, d] -> [b, hq, kv, d]. torch.compile fuses it into a
Triton kernel (`triton_poi_fused_..._expand_..._clone_...`) that reads the cache and writes it hq / hk
times over; an eager run's is an aten::copy_ from a stride-0 view (the streaming class's materialised
broadcast). A GQA-aware attention reads the hk heads in place (SDPA enable_gqa=True, flash-attention,
a serving engine's attention): the copy's bytes are not needed at all.

The rule, on evidence, all required:
1. the kernel's arguments (record_shapes of the launching cpu_op): one input [.., h, ..] and one output
   (its elements are the kernel's numel) equal in every dim but one, where the output's is the input's
   times a factor g > 1, and nothing else of weight (the other arguments under 1% of the bytes);
2. config.json: g = num_attention_heads / num_key_value_heads and the input's dim is num_key_value_heads
   (a tensor-parallel rank's share of both where the Top-N gives the degree). Without a config: the
   dims alone do not say it is an attention's group, no verdict (bytes_necessary unknown, saying what
   would give one);
3. the fused name lists an expand (or a clone / repeat): inductor names a kernel after the ops it fuses.
Then bytes_necessary is 0 (the launch need not run), the lever names SDPA enable_gqa / no repeat_kv."""
from __future__ import annotations

import re

from roofline.core.opclasses import origin
from roofline.core.opclasses.base import Necessary
from roofline.core.opclasses.jobs import rule

KIND = "group_expanded_copy"
KEYS = frozenset({"expand_src", "expand_dst", "expand_dim", "expand_factor"})
NAME_EVIDENCE = re.compile(r"_(expand|clone|repeat(?:_interleave)?)(?=_|$)")
SIDE_MAX = 0.01      # other arguments above this share of the bytes: the kernel does more than the copy
LEVER = ("do not materialise the KV heads' group expansion (repeat_kv): a GQA-aware attention reads the "
         "{hk} KV heads in place (SDPA enable_gqa=True, flash-attention, the serving engine's attention; in "
         "transformers, an attention implementation that takes the KV heads without repeat_kv); removes this copy")


def expansion(args: list[dict], bound: int) -> dict:
    """{expand_src, expand_dst, expand_dim, expand_factor} where the kernel's output (an argument of `bound`
    elements) is another argument repeated along one dim by an integer factor, the rest of the arguments
    under SIDE_MAX of the bytes; {} otherwise."""
    total = sum(min(a["extent"], bound) * a["eb"] for a in args) or 1
    for o in args:
        if o["elems"] != bound:
            continue
        for s in args:
            if s is o or len(s["dims"]) != len(o["dims"]) or s["dtype"] != o["dtype"]:
                continue
            diff = [i for i, (x, y) in enumerate(zip(s["dims"], o["dims"])) if x != y]
            if len(diff) != 1:
                continue
            i = diff[0]
            if s["dims"][i] < 1 or o["dims"][i] % s["dims"][i] or o["dims"][i] // s["dims"][i] < 2:
                continue
            side = total - (min(s["extent"], bound) * s["eb"] + min(o["extent"], bound) * o["eb"])
            if side / total > SIDE_MAX:
                continue
            return {"expand_src": "x".join(map(str, s["dims"])), "expand_dst": "x".join(map(str, o["dims"])),
                    "expand_dim": i, "expand_factor": o["dims"][i] // s["dims"][i]}
    return {}


def _heads(ctx) -> tuple[int, int, str] | None:
    """(query heads, KV heads, the words) of one rank from config.json (and the TP degree), or None."""
    att = origin.attention_dims(ctx.config)
    if att is None:
        return None
    hq, hk, _ = att
    words = f"config.json num_attention_heads {hq}, num_key_value_heads {hk}"
    tp = ctx.tp if isinstance(ctx.tp, int) and ctx.tp > 1 else None
    if tp and hq % tp == 0:
        return hq // tp, max(1, hk // tp), f"{words}; / TP {tp} on this rank ({ctx.tp_evidence})"
    return hq, hk, words


@rule("inductor", rank=10)
def necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The verdict on one shape of a group-expanded copy; None where the shape is no such copy."""
    f = shape.get("expand_factor")
    if not isinstance(f, int) or f < 2:
        return None
    i, src, dst = shape["expand_dim"], shape["expand_src"], shape["expand_dst"]
    heads = _heads(ctx)
    copy = f"its output {dst} is its input {src} repeated {f}x along dim {i} (Input Dims of the launching cpu_op)"
    if heads is None:
        return Necessary(None, missing=(f"{copy}, but without config.json (num_attention_heads, num_key_value_heads) "
                                        "nothing says it is an attention's KV-head group: give --config"))
    hq, hk, words = heads
    src_d = [int(x) for x in src.split("x")]
    name = NAME_EVIDENCE.findall(ctx.kernel or "")
    if hk >= hq or f != hq // hk or src_d[i] != hk:
        return None
    if not name and not (ctx.kernel or "").startswith("triton_"):
        return None
    ev = [copy, f"{words}: the factor {f} is the group ratio {hq}/{hk} and dim {i} holds the {hk} KV heads",
          ("the fused kernel's name lists " + ", ".join(dict.fromkeys(name)) + " (inductor names a kernel after the ops it "
           "fuses): repeat_kv's expand + clone") if name else "the kernel is generated code that writes the copy",
          "necessary: none, a GQA-aware attention reads the KV heads in place: the launch need not run"]
    return Necessary(0.0, 0.0, KIND, ev, removable=True, lever=LEVER.format(hk=hk))

"""The LM head over every prompt position (docs/method.md section 13): the rule that says a prefill GEMM
whose N is the vocabulary needs one row per sequence.

A prefill computes the hidden state of every prompt token; generation samples the next token from the
LAST position's logits only (transformers' generate passes logits_to_keep=1; serving engines compute the
logits of the sampled positions only). A forward that applies the LM head to all M = sequences x prompt
tokens rows writes M x vocab logits and spends 2 M vocab hidden FLOPs for rows nobody reads.

The rule, on evidence, all required:
1. the GEMM's shape: N is config.json's vocab_size and K its hidden_size (the LM head: [M, hidden] x
   [hidden, vocab]), in the prefill regime;
2. the number of sequences: M / the prompt length, the prompt length from the workload (--isl: stated
   as the workload's, an assumption the trace does not check), M a multiple of it and above it;
3. the workload asks for output tokens (--osl >= 1): the logits are for sampling, not for scoring every
   position (a perplexity / training pass needs them all).
Then bytes_necessary is the weight once plus one row per sequence in and out, flops_necessary 2 x
sequences x vocab x hidden; the lever is last-position logits (HF logits_to_keep=1)."""
from __future__ import annotations

from roofline.core.opclasses.base import Necessary
from roofline.core.opclasses.jobs import rule

KIND = "all_position_logits"
LEVER = ("compute the logits of the last position only: slice the hidden states to each sequence's last token "
         "before the LM head (transformers: logits_to_keep=1, what generate() passes; serving engines do this), "
         "removing {rows} of its {M} rows")


def _cfg(config: dict | None, key: str):
    c = config or {}
    v = c.get(key)
    if v is None and isinstance(c.get("text_config"), dict):
        v = c["text_config"].get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@rule("gemm", rank=30)
def necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The verdict on a prefill LM-head GEMM over every prompt position; None where the shape is not one."""
    M, N, K = shape.get("M"), shape.get("N"), shape.get("K")
    vocab, hidden = _cfg(ctx.config, "vocab_size"), _cfg(ctx.config, "hidden_size")
    if ctx.regime != "prefill" or shape.get("batch", 1) != 1 or not vocab or N != vocab or K != hidden \
            or not isinstance(M, int):
        return None
    isl, osl = ctx.workload.get("isl"), ctx.workload.get("osl")
    if not isl or M % int(isl) or M <= int(isl):
        return Necessary(None, missing=(f"the LM head [{M}, {K}] x [{K}, {N}] (N = config.json vocab_size) may run over "
                                        "every prompt position, but the prompt length is not known or does not divide "
                                        f"M = {M}: give the workload's --isl"))
    if not (osl and osl >= 1):
        return None       # no output token asked for: the logits may be for scoring every position
    seqs = M // int(isl)
    w = float(N) * K * dt["weight_bytes"]
    need = w + seqs * K * dt["act_bytes"] + seqs * N * dt["out_bytes"]
    ev = [f"an LM head: N {N} = config.json vocab_size, K {K} = hidden_size, in the prefill",
          f"M {M} = {seqs} sequences x {int(isl)} prompt tokens (the workload's --isl {int(isl)}: ASSUMED, the trace does "
          "not say where each sequence ends)",
          f"generation samples the last position of each sequence (the workload asks for --osl {osl:g} output tokens): "
          f"{seqs} of {M} rows are read",
          f"necessary: the weight once ({w / 1e6:.4g} MB) + {seqs} rows in and out = {need / 1e6:.4g} MB, "
          f"2 x {seqs} x {N} x {K} FLOPs"]
    return Necessary(need, 2.0 * seqs * N * K, KIND, ev, lever=LEVER.format(rows=M - seqs, M=M))

"""Mamba2's SSD chunk scan run as torch ops (docs/method.md section 12): the rule that says whether a
streaming head's bytes are necessary when it is a piece of transformers' reference path.

Without mamba_ssm (its SSD Triton kernels) and causal-conv1d, transformers' Mamba2 mixers (Bamba,
Mamba2, FalconH1, NemotronH, GraniteMoeHybrid, Zamba2) run ``torch_forward``: the chunk scan written
with broadcasts and reductions over [batch, chunks, chunk, chunk, heads, d_state] tensors
(C[:, :, :, None] * B[:, :, None] then .sum(-1); G[..., None] * L; M[..., None] * x[:, :, None] then
.sum(3); B_decay[..., None, :] * x[..., None] then .sum(2); C[..., None, :] * states then .sum(-1)), each
product written to HBM in fp32 and read back by the next op. The fused chunk scan (the chunk_scan
class's Mamba2 roles: chunk cumsum, chunk state, state passing, C B^T, chunk scan) keeps those
products on chip: it reads x, dt, A, B, C, D once and writes the per-chunk states and y.

The rule, on three kinds of evidence, all required:
1. config.json: a Mamba2 mixer (model_type in SSM_MODEL_TYPES, or mamba_n_heads / mamba_d_state) with
   its heads, head_dim, d_state and chunk size;
2. the op's own dims (stream.trace_shape's `dims`: kept for ops of rank 5 and more) are a tensor of the
   reference SSD: [b, chunks, chunk, chunk, heads, d_state | head_dim | 1], [b, chunks, chunk, heads,
   head_dim, d_state], the state passing's [b, chunks + 1, chunks + 1, heads, head_dim, d_state], or
   their 5-d reductions, with the config's numbers in those places;
3. the trace ran no fused Mamba kernel (Top-N `trace_evidence.ssm_kernels`, which `roofline topn`
   writes from every kernel name of the trace: kernel_evidence below).
Then the op's necessary bytes are at most the fused chunk scan's for the whole layer (models.linear_attn
`chunk`, roles summed) -- an upper bound: the fused scan moves them once for all of the layer's
reference ops, here counted in full for each -- and everything else it moves is avoidable.
What cannot be known from the trace: the sequences' real lengths (the reference pads them to whole
chunks: the fused scan is counted over chunks x chunk tokens, an upper bound), and whether the
fused kernels would be used if installed (transformers also needs a CUDA device and, for some
models, no padding-free input)."""
from __future__ import annotations

import re

from roofline.io.kernelnames import short_name
from roofline.core.models import linear_attn as _scan
from roofline.core.opclasses.base import Necessary
from roofline.core.opclasses.jobs import job, rule
from roofline.core.opclasses.linear_cfg import SSM_MODEL_TYPES
from roofline.core.opclasses.stage_a import cfg
from roofline.peaks import DTYPE_BYTES, norm_dtype

KIND = "reference_path"
# the fused kernels of the fast path: mamba_ssm's SSD Triton kernels (and its selective scan /
# selective state update), causal-conv1d's kernels and the Triton ports of both (vLLM, SGLang, fla)
FUSED = re.compile(r"_chunk_cumsum_fwd|_chunk_state_fwd|_state_passing_fwd|_bmm_chunk_fwd|_chunk_scan_fwd|"
                   r"chunk_scan_combined|selective_scan|selective_state_update|causal_conv1d", re.IGNORECASE)
# the reference path's own kernel that names it (nn.Conv1d as PyTorch's depthwise conv)
REFERENCE = re.compile(r"conv_depthwise2d", re.IGNORECASE)
EVIDENCE_KEY = "ssm_kernels"
ROLES = ("cumsum", "ssm_state", "ssm_passing", "ssm_bmm", "ssm_scan")
LEVER = ("use the fused Mamba2 kernels (mamba_ssm's SSD Triton kernels and causal-conv1d; transformers falls back to "
         "torch_forward without them): install mamba-ssm and causal-conv1d, so that the chunk scan keeps its "
         "[batch, chunks, chunk, chunk, heads, d_state] products on chip instead of writing each to HBM in fp32")


@job("kernel_evidence", "chunk_scan")
def kernel_evidence(launches: dict) -> dict:
    """{kernel name: launches} of the whole trace -> the Top-N's trace_evidence.ssm_kernels: the fused
    Mamba kernels that ran (none: the reference path) and the reference conv's launches."""
    fused, ref = {}, {}
    for name, n in launches.items():
        if FUSED.search(name):
            fused[short_name(name)] = fused.get(short_name(name), 0) + int(n)
        elif REFERENCE.search(name):
            ref[short_name(name)] = ref.get(short_name(name), 0) + int(n)
    return {EVIDENCE_KEY: {"fused": fused, "reference": ref}}


def mamba_dims(config: dict | None) -> dict | None:
    """heads, head_dim, d_state, groups, chunk of a Mamba2 mixer in config.json, or None."""
    if not config or not (config.get("model_type") in SSM_MODEL_TYPES or "mamba_n_heads" in config
                          or "mamba_d_state" in config):
        return None
    d = {"H": cfg(config, "mamba_n_heads", "mamba_num_heads"), "P": cfg(config, "mamba_d_head", "mamba_head_dim"),
         "N": cfg(config, "mamba_d_state", "ssm_state_size", "state_size"),
         "G": cfg(config, "mamba_n_groups", "n_groups") or 1, "L": cfg(config, "mamba_chunk_size", "chunk_size")}
    return d if all(isinstance(v, int) and v > 0 for v in d.values()) else None


def match(dims: list[int], m: dict) -> tuple[int, int, str] | None:
    """(sequences, chunks, what the tensor is) where `dims` is a tensor of the reference SSD at the config's
    numbers, else None."""
    H, P, N, L = m["H"], m["P"], m["N"], m["L"]
    if len(dims) == 6:
        b, c, x, y, h, z = dims
        if x == L and y == L and h == H and z in (N, P, 1):
            what = {N: "C x B per head (G_intermediate)", P: "the masked scores times x (Y_diag)",
                    1: "the scores times the decay mask L"}[z]
            return b, c, f"[batch, chunks, chunk, chunk, heads, {'d_state' if z == N else 'head_dim' if z == P else '1'}]: {what}"
        if x == L and (y, h, z) == (H, P, N):
            return b, c, "[batch, chunks, chunk, heads, head_dim, d_state]: the chunk states' products (B x, C states)"
        if c == x and c >= 2 and (y, h, z) == (H, P, N):
            return b, c - 1, "[batch, chunks + 1, chunks + 1, heads, head_dim, d_state]: the state passing"
    if len(dims) == 5:
        b, c, x, y, z = dims
        if x == L and ((y, z) == (L, H) or (y, z) == (H, P) or (y, z) == (H, N)):
            return b, c, "a 5-d tensor of the chunk scan ([batch, chunks, chunk, ...])"
    return None


def fused(b: int, chunks: int, m: dict, act_bytes: int) -> tuple[float, float]:
    """(bytes, FLOPs) of the fused chunk scan for one layer: b sequences of chunks x chunk tokens (an upper
    bound on the real tokens), the chunk_scan class's Mamba2 roles summed (x, dt, A, B, C read once; the
    per-chunk states written and passed; y written)."""
    shape = {"batch": b, "T": chunks * m["L"], "heads": m["H"], "qk_heads": m["G"], "dk": m["N"], "dv": m["P"],
             "chunk": m["L"], "variant": "ssm", "z": False, "state_in": False}
    dt = {"act": "", "out": "", "act_bytes": act_bytes, "out_bytes": act_bytes}
    cs = [_scan.chunk(dict(shape, role=r), dt).candidates[0] for r in ROLES]
    return sum(c.bytes_est for c in cs), sum(c.flops_est for c in cs)


@rule("elementwise", "norm", "quant", rank=10)
def necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The reference-path verdict of one shape of a streaming op, or None where the rule does not apply."""
    m = mamba_dims(ctx.config)
    text = shape.get("dims")
    if m is None or not isinstance(text, str):
        return None
    try:
        dims = [int(x) for x in text.split("x")]
    except ValueError:
        return None
    hit = match(dims, m)
    if hit is None:
        return None
    b, chunks, what = hit
    ev = ctx.trace_evidence.get(EVIDENCE_KEY)
    if not isinstance(ev, dict):
        return Necessary(None, missing=(f"the op's dims {text} are a tensor of Mamba2's SSD reference path, but the Top-N "
                                        "has no trace_evidence.ssm_kernels (re-run roofline topn): whether the fused "
                                        "kernels ran is unknown"))
    if ev.get("fused"):
        return None        # the fast path ran: this op is something else
    act = DTYPE_BYTES.get(norm_dtype(str(cfg(ctx.config, "dtype", "torch_dtype") or ""))) or dt["act_bytes"]
    n = float(shape.get("op_launches") or 1)
    need, need_flops = fused(b, chunks, m, act)
    mt = (ctx.config or {}).get("model_type") or "?"
    ref = ", ".join(f"{k} x{v}" for k, v in (ev.get("reference") or {}).items())
    evidence = [
        f"config.json: model_type {mt}, a Mamba2 mixer of {m['H']} heads x head_dim {m['P']}, d_state {m['N']}, "
        f"{m['G']} group(s), chunk {m['L']}",
        f"the op's dims [{text.replace('x', ', ')}] = {what}, at {b} sequences x {chunks} chunk(s) of {m['L']}: "
        "transformers' torch_forward (the SSD chunk scan in torch ops, each product written to HBM in fp32)",
        "no fused Mamba kernel in the trace (mamba_ssm's _chunk_scan_fwd / _chunk_state_fwd / _state_passing_fwd / "
        "_bmm_chunk_fwd, causal-conv1d's causal_conv1d_fwd)" + (f"; the reference conv ran ({ref})" if ref else ""),
        f"necessary per op: at most the fused chunk scan's {need / 1e6:.4g} MB for the layer (x, dt, A, B, C, D read "
        f"once, the states and y written; {b} sequences x {chunks} x {m['L']} tokens, an upper bound), counted in full "
        "for each of the layer's reference ops (over their launches where one op is split)",
        "not known from the trace: the sequences' real lengths (torch_forward pads them to whole chunks, so the "
        "fused scan is counted over whole chunks), and whether transformers takes the fused path once mamba-ssm and "
        "causal-conv1d are installed (it also checks the device and the input; a measured re-run says)",
    ]
    # NB: the fused scan's FLOPs too (its C B^T, states and output matmuls): mamba_ssm's Triton kernels run
    # them on the tensor cores in the model dtype, so they are priced at that roof (at these sizes the
    # fused scan is memory-bound there: its bytes set its time)
    mdt = norm_dtype(str(cfg(ctx.config, "dtype", "torch_dtype") or "")) if act else None
    return Necessary(min(bytes_est, need / n), need_flops / n, kind=KIND, evidence=evidence, lever=LEVER,
                     flops_dtype=mdt if mdt in DTYPE_BYTES else None)

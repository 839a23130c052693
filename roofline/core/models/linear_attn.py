"""Linear attention and state-space layers (gated delta rule, GLA / retention recurrences, Mamba2):
one recurrent state per sequence and state head, a ``dk x dv`` matrix (gated delta: key head dim x
value head dim; Mamba2: d_state x head_dim), carried from token to token.

Two kinds of kernel (docs/method.md section 2):
- a recurrent update (decode; flash-linear-attention's ``fused_recurrent_*`` kernels, Mamba2's
  ``selective_state_update``): the state is read once and written once, and each token's inputs
  and output pass once. NB: at decode the state dwarfs everything else (Qwen3-Next: 32 state heads x
  128 x 128 fp32 = 2 MB per sequence, against 16 KB of q/k/v/o).
- a chunked prefill (flash-linear-attention's chunk kernels; Mamba2's chunk scan): the sequence is
  cut into chunks of C tokens; each kernel of the chain has its own reads and writes (its ``role``),
  below. NB: the chunk-state kernel writes one state per chunk (B x T/C x heads x dk x dv): at
  prefill that, not the final state, is the big tensor.

Units: bytes, FLOPs, per launch. Dtype sizes: ``act`` (q, k, v, o; x, B, C), the state's own
(``state_bytes`` read, ``state_out_bytes`` written: fp32 in flash-linear-attention's fused kernels),
gates (g, beta; dt) counted at 4 bytes (fp32: they are cumsum'd / exp'd in fp32).
"""
from __future__ import annotations

import math

from roofline.core.models import Candidate, ModelResult

GATE_BYTES = 4


def _io_per_token(s: dict) -> tuple[int, int, int]:
    """(elements read at act width, elements written at out width, gate elements) of one token.
    variant "delta" (gated delta rule, GLA, retention): q and k per q/k head of dk, v per state head
    of dv in, o per state head of dv out, g and beta per state head.
    variant "ssm" (Mamba2): B and C per group of d_state (qk_heads = n_groups, dk = d_state), x (and
    z when gated in the kernel) per head of head_dim in, y per head out, dt per head."""
    qk, h, dk, dv = int(s["qk_heads"]), int(s["heads"]), int(s["dk"]), int(s["dv"])
    if s.get("variant", "delta") == "ssm":
        return 2 * qk * dk + h * dv * (1 + int(s.get("z", 0))), h * dv, h
    return 2 * qk * dk + h * dv, h * dv, 2 * h


def recurrent(shape: dict, dt: dict) -> ModelResult:
    """A recurrent state update over T tokens of each of `batch` sequences."""
    b, t = int(shape["batch"]), int(shape.get("T", 1))
    h, dk, dv = int(shape["heads"]), int(shape["dk"]), int(shape["dv"])
    state = b * h * dk * dv
    tok = int(shape.get("tokens", b * t))
    s_in = float(shape.get("state_bytes", 4)) if shape.get("state_in", True) else 0.0
    s_out = float(shape.get("state_out_bytes", shape.get("state_bytes", 4)))
    rd, wr, gates = _io_per_token(shape)
    io = tok * (rd * dt["act_bytes"] + wr * dt["out_bytes"] + gates * GATE_BYTES)
    nbytes = state * (s_in + s_out) + io
    # NB: per token and state element: decay, the state's product with k (delta rule) or the input
    # (ssm), the rank-1 update and the output contraction: ~7 FLOPs (delta), ~5 (ssm)
    per = 5 if shape.get("variant") == "ssm" else 7
    flops = float(per * h * dk * dv * tok)
    return ModelResult([Candidate("state_read_write", nbytes, flops,
                                  f"state {state * (s_in + s_out) / 1e6:.1f} MB + inputs/outputs {io / 1e6:.2f} MB")],
                       compute_dtype="fp32", info={"state_bytes": state * (s_in + s_out), "io_bytes": io,
                                                   "kind": "recurrent"})


# chunked prefill roles: what each kernel of the chain reads and writes, as element counts per token
# (x act bytes) plus the per-chunk tensors. T tokens per sequence, C tokens per chunk, NT = ceil(T/C).
CHUNK_ROLES = ("cumsum", "kkt", "solve", "kkt_solve", "wy", "state", "output",
               "ssm_state", "ssm_passing", "ssm_bmm", "ssm_scan")


def chunk(shape: dict, dt: dict) -> ModelResult:
    """One kernel of a chunked prefill, by its role."""
    b, t = int(shape["batch"]), int(shape["T"])
    qk, h, dk, dv = int(shape["qk_heads"]), int(shape["heads"]), int(shape["dk"]), int(shape["dv"])
    c = int(shape.get("chunk", 64))
    nt = math.ceil(t / c)
    role = shape["role"]
    a, o = dt["act_bytes"], dt["out_bytes"]
    s_in = float(shape.get("state_bytes", 4)) if shape.get("state_in", False) else 0.0
    tok = int(shape.get("tokens", b * t))
    q_el, v_el = qk * dk, h * dv              # per token: a q (or k) row, a v (or o) row
    g = tok * h * GATE_BYTES                   # one gate (g or beta; dt) per token and head
    states = b * nt * h * dk * dv              # one state per chunk
    final = b * h * dk * dv * 4                # the fp32 final state
    # what the kernel before it in the chain just wrote and it reads back (A; w and u; h and v_new)
    chain_in = {"wy": tok * h * c * a, "solve": tok * h * c * 4, "state": tok * h * (dk + dv) * a,
                "output": states * a + tok * v_el * a, "ssm_passing": states * 4, "ssm_scan": tok * qk * c * 4
                }.get(role, 0)
    if role == "cumsum":                       # the gate's cumulative sum within each chunk, in place
        nbytes, flops = 2 * g, float(tok * h)
    elif role in ("kkt", "kkt_solve"):         # k k^T within each chunk (x beta, gates): A [tok, h, C]
        out_b = 4 if role == "kkt" else a      # the unfused kkt writes A in fp32, the fused solve in act
        nbytes = tok * q_el * a + 2 * g + tok * h * c * out_b
        flops = float(tok * h * c * dk * (1 if role == "kkt" else 2))
    elif role == "solve":                      # (I + A)^-1 per chunk: A fp32 in, act out
        nbytes = tok * h * c * (4 + a)
        flops = float(tok * h * c * c / 3)
    elif role == "wy":                         # w = A (k beta), u = A (v beta)
        nbytes = tok * (q_el + v_el + h * c) * a + 2 * g + tok * h * (dk + dv) * a
        flops = float(2 * tok * h * c * (dk + dv))
    elif role == "state":                      # the state per chunk: reads k, w, u, g, h0; writes h, v_new, ht
        nbytes = tok * (q_el + h * dk + v_el) * a + g + b * h * dk * dv * s_in + states * a + tok * v_el * a + final
        flops = float(4 * tok * h * dk * dv)
    elif role == "output":                     # o = q h + (q k^T masked) v_new, per chunk
        nbytes = tok * (2 * q_el + v_el) * a + states * a + g + tok * v_el * o
        flops = float(2 * tok * h * dk * dv + 2 * tok * h * c * (dk + dv) / 2)
    elif role == "ssm_state":                  # Mamba2: each chunk's state from x, B, dt: fp32 states out
        nbytes = tok * (v_el + q_el) * a + 2 * g + states * 4
        flops = float(2 * tok * h * dk * dv)
    elif role == "ssm_passing":                # Mamba2: the states passed along the chunks (fp32 in, out)
        nbytes = states * 4 * 2 + b * nt * h * GATE_BYTES + b * h * dk * dv * s_in
        flops = float(2 * states)
    elif role == "ssm_bmm":                    # Mamba2: C B^T per chunk and group
        nbytes = tok * 2 * q_el * a + tok * qk * c * 4
        flops = float(2 * tok * qk * c * dk)
    elif role == "ssm_scan":                   # Mamba2: y = C states + (C B^T masked) x, + D x (z gate)
        nbytes = tok * qk * c * 4 + tok * (q_el + v_el * (1 + int(shape.get("z", 0)))) * a + states * 4 + 2 * g \
            + tok * v_el * o
        flops = float(2 * tok * h * dk * dv + 2 * tok * h * c * dv)
    else:
        raise KeyError(f"chunk role {role!r}")
    return ModelResult([Candidate(f"chunk_{role}", float(nbytes), flops, f"{role}, {nt} chunks of {c}")],
                       compute_dtype=dt["act"], info={"kind": "chunk", "role": role, "chunks": nt,
                                                      "chain_in_bytes": float(chain_in)})


def model(shape: dict, dt: dict) -> ModelResult:
    """The class's model: a chunk kernel when the shape names its role, else a recurrent update."""
    return chunk(shape, dt) if shape.get("role") in CHUNK_ROLES else recurrent(shape, dt)

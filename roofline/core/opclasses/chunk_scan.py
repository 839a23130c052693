"""Op class "chunk_scan": the chunked prefill of a linear-attention or state-space layer: the chain
of kernels flash-linear-attention launches for a chunked gated delta rule (gate cumsum, k k^T and
its triangular solve, the WY representation w / u, the state per chunk, the output) and Mamba2's
chunk scan (mamba_ssm / vLLM: chunk cumsum, chunk state, state passing, C B^T, chunk scan).

Model: roofline/core/models/linear_attn.py (`chunk`): each kernel's own reads and writes by its role,
which the kernel name says (ROLES below).
Trace: Triton kernels with no aten op; flash-linear-attention launches the whole chain inside one
autograd Function call (ChunkGatedDeltaRuleFunction, ...), whose Input Dims give q, k, v and the
initial state: every kernel of the chain has that shape, and its role from its own name.
Stage A: heads / head dims / d_state / chunk size from config.json; one prefill of workload.isl
tokens per sequence, sequences = the Top-N's prefill batch where it says, else one (said so).
Prior: these kernels are tensor-core matmuls over chunks with their operands streamed once, the
access pattern of flash-style prefill attention: its prior (0.70)."""
from __future__ import annotations

import re

from roofline.io.errors import EntryError
from roofline.core.models import linear_attn as _model
from roofline.core.opclasses import ssd_reference  # noqa: F401  (registers the trace evidence this class's heads read)
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, l2_resident, register
from roofline.core.opclasses.linear_cfg import fill_dims, function_shape, variant
from roofline.core.opclasses.stage_a import fill, workload

FUNCTIONS = ("ChunkGatedDeltaRuleFunction", "ChunkDeltaRuleFunction", "ChunkGLAFunction",
             "ChunkRetentionFunction", "ChunkSimpleGLAFunction")

# kernel name -> its role in the chain (first match; fla names, then mamba_ssm's)
ROLES: tuple[tuple[str, str], ...] = (
    (r"kkt_solve", "kkt_solve"), (r"scaled_dot_kkt", "kkt"), (r"solve_tril|merge_\d+x\d+_to_\d+x\d+_inverse", "solve"),
    (r"recompute_w_u|wy_repr_fwd|fwd_prepare_wy", "wy"),
    (r"_chunk_cumsum|chunk_local_cumsum|chunk_global_cumsum|gate_chunk_cumsum", "cumsum"),
    (r"_chunk_state_fwd|chunk_state_varlen", "ssm_state"), (r"state_passing", "ssm_passing"),
    (r"bmm_chunk", "ssm_bmm"), (r"_chunk_scan_fwd", "ssm_scan"),
    (r"fwd_kernel_h|fwd_h\b|kernel_h_blockdim", "state"), (r"fwd_kernel_o|chunk_fwd_o", "output"),
)
_ROLES_RX = [(re.compile(p, re.IGNORECASE), r) for p, r in ROLES]


def role_of(name: str) -> str | None:
    for rx, r in _ROLES_RX:
        if rx.search(name or ""):
            return r
    return None


@job("trace_shape", "chunk_scan")
def trace_shape(sig):
    if sig.name not in FUNCTIONS:
        return None
    return function_shape(sig)


@job("fill", "chunk_scan")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    role = role_of(e.name)
    if role is None:
        raise EntryError(f"a chunked-scan kernel whose role in the chain the name does not say ({e.short_name or e.name}): "
                         "its bytes depend on it; give its shapes and a `role` in the Top-N entry's est_shape "
                         f"(one of {', '.join(_model.CHUNK_ROLES)}), or ncu counters for a measured verdict")
    s.setdefault("role", role)
    var = s.get("variant") or ("ssm" if role.startswith("ssm") else variant(e.name, config))
    fill_dims(s, var, config, assumed)
    fill(s, "chunk", 64, "chunk size 64 (flash-linear-attention's default)", assumed)
    if "T" not in s:
        fill(s, "T", int(workload(wl, "isl", "the tokens of a chunked prefill without Input Dims")),
             "one prefill of workload.isl tokens per sequence", assumed)
    fill(s, "batch", 1, "one sequence per prefill launch (no Input Dims say more)", assumed)
    if var == "ssm" and "z" not in s:
        s["z"] = role == "ssm_scan"
    s.setdefault("model_type", (config or {}).get("model_type") or "")
    return ("batch", "T", "heads", "dk", "dv", "qk_heads", "role")


@job("residency", "chunk_scan")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A chunk kernel whose whole traffic fits in half the L2 works on what the kernels around it in
    the chain wrote and read (a short prefill's k k^T solve: ncu 2.8 MB of DRAM for 25.7 MB of
    operands on the Qwen3-Next corpus case): served from L2, no verdict (True). A larger one that
    reads back what the kernel before it just wrote (A, w / u, h / v_new), fitting in half the L2:
    that part may come from L2, so DRAM bytes under the model's are expected (said; False)."""
    info = w.res.info or {}
    if chosen["bytes_est"] <= l2 / 2:
        return l2_resident(notes, "the chunk kernel", chosen["bytes_est"], l2,
                           ", between kernels of one chain that wrote and read the same tensors: served from L2",
                           "fusing the chain")
    back = info.get("chain_in_bytes") or 0.0
    if 0 < back <= l2 / 2:
        notes.append(f"it reads back {back / 1e6:.3g} MB that the kernel before it in the chain just wrote, which fits "
                     "in the L2: that part may be served from L2, so DRAM bytes up to that much under the model's are "
                     "expected")
    return False


register(OpClass("chunk_scan", flags=frozenset({"fusable"}), seed_class="attn",
                 name_rules=((27, r"chunk_gated_delta|chunk_delta_rule|chunk_gla|chunk_retention|chunk_fwd_kernel|"
                                  r"chunk_local_cumsum|chunk_global_cumsum|gate_chunk_cumsum|scaled_dot_kkt|kkt_solve|"
                                  r"solve_tril|recompute_w_u|_chunk_scan_fwd|_chunk_state_fwd|state_passing_fwd|"
                                  r"bmm_chunk_fwd|_chunk_cumsum_fwd|merge_\d+x\d+_to_\d+x\d+_inverse"),),
                 op_rules=((16, r"^Chunk\w*(DeltaRule|GLA|Retention)\w*Function$"),),
                 hint_aliases=("linear_attention_prefill", "chunk_scan"),
                 target_eff={"chunk_scan": 0.70},
                 missing_hint=(": give config.json (linear_num_value_heads, linear_key_head_dim, linear_value_head_dim; "
                               "Mamba2: mamba_n_heads, mamba_d_head, mamba_d_state) or profile with record_shapes=True"),
                 shape_keys=frozenset({"batch", "T", "tokens", "heads", "qk_heads", "dk", "dv", "chunk", "role",
                                       "state_in", "state_bytes", "variant", "z", "model_type"}),
                 dim_keys=frozenset({"batch", "T", "tokens", "heads", "qk_heads", "dk", "dv", "chunk"})))
job("model", "chunk_scan")(_model.model)

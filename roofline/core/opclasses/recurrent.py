"""Op class "recurrent": the recurrent state update of a linear-attention or state-space layer at
decode (flash-linear-attention's ``fused_recurrent_*`` Triton kernels: gated delta rule, delta rule,
GLA, retention; vLLM / SGLang's fused gated-delta-rule update; Mamba2's ``selective_state_update``).

Model: roofline/core/models/linear_attn.py (`recurrent`): the state (batch x heads x dk x dv) read once
and written once, plus each token's inputs and output.
Trace: these are Triton kernels with no aten op; flash-linear-attention launches them inside an
autograd Function, whose call the profiler records with its Input Dims (q, k, v, the initial state
and its dtype: linear_cfg.function_shape).
Stage A (no Input Dims): heads / head dims / d_state from config.json; the sequences from the
kernel's grid where the package's grid rule gives them exactly (fla's fused recurrent kernel:
grid = ceil(dv / BV) x sequences x heads, BV = min(8, next power of two of dv)), else workload.conc;
one token per sequence; the state in fp32 (fla's fused kernels accumulate and store the final
state in fp32, and transformers caches what they return). Each assumption is said in the notes.
Prior: the state is read once and written once, in order, per (sequence, head) tile: a copy's
access pattern, so the streaming prior (0.85). NB: fla's kernel runs one warp per 8 state columns;
ncu measured it at 55% of the H200's HBM roof on the Qwen3-Next corpus case (decode, 40
sequences: 157 MB per launch): moderate headroom, which the prior is meant to show."""
from __future__ import annotations

from roofline.io.errors import EntryError
from roofline.core.models import linear_attn as _model
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, register
from roofline.core.opclasses.linear_cfg import fill_dims, function_shape, variant
from roofline.core.opclasses.stage_a import cfg, fill, workload
from roofline.peaks import DTYPE_BYTES, norm_dtype

# the autograd Functions of flash-linear-attention's recurrent kernels (tp_name: the class's name)
FUNCTIONS = ("FusedRecurrentFunction", "FusedRecurrentGatedDeltaRuleFunction", "FusedRecurrentDeltaRuleFunction")


@job("trace_shape", "recurrent")
def trace_shape(sig):
    if sig.name not in FUNCTIONS:
        return None
    r = function_shape(sig)
    if r is None:
        return None
    shape, dt = r
    shape["state_out_bytes"] = 4       # NB: fla's fused kernels write the final state in fp32, whatever h0's dtype
    return shape, dt


def _next_pow2(n: int) -> int:
    return 1 << (max(int(n), 1) - 1).bit_length()


def batch_from_grid(grid, heads: int, dv: int) -> int | None:
    """Sequences from fla's fused recurrent grid: (NV * N * HV,) in flash-linear-attention 0.6, or the
    older 3-d form (NK = 1, NV, N * HV) that vLLM's copy keeps; NV = ceil(dv / BV), BV = min(8,
    next_pow2(dv)). None where the grid is not of either form."""
    if not isinstance(grid, list) or not grid:
        return None
    g = [int(x) for x in grid]
    nv = -(-int(dv) // min(8, _next_pow2(dv)))
    if len(g) == 3 and g[0] == 1 and g[1] == nv and g[2] % int(heads) == 0:
        return g[2] // int(heads) or None
    if any(x != 1 for x in g[1:]):
        return None
    per = nv * int(heads)
    return g[0] // per if per and g[0] % per == 0 and g[0] >= per else None


@job("fill", "recurrent")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    var = s.get("variant") or variant(e.name, config)
    fill_dims(s, var, config, assumed)
    if "batch" not in s and all(k in s for k in ("heads", "dv")) and var == "delta" and "fused_recurrent" in e.name:
        raw = e.raw if isinstance(e.raw, dict) else {}
        fill(s, "batch", batch_from_grid(raw.get("grid"), s["heads"], s["dv"]),
             "sequences from the kernel's grid: flash-linear-attention's fused recurrent grid is "
             "ceil(dv / min(8, dv)) x sequences x state heads", assumed)
    if "batch" not in s:
        if regime != "decode":
            raise EntryError("a recurrent state update outside decode without Input Dims: its sequences and tokens "
                             "are unknown; profile with record_shapes=True (the autograd Function's Input Dims give "
                             "them), or give its shapes in the Top-N")
        fill(s, "batch", int(workload(wl, "conc", "the sequences of a recurrent state update")),
             "one state per sequence: workload.conc", assumed)
    fill(s, "T", 1, "one token per sequence at decode", assumed)
    if var == "ssm":
        # NB: Mamba2's selective_state_update updates the cache's state in place, in the cache's dtype
        # (transformers' and vLLM's default: the model dtype)
        name = str(cfg(config, "mamba_ssm_cache_dtype", "dtype", "torch_dtype") or "bf16")
        sb = DTYPE_BYTES.get(norm_dtype(name if name != "auto" else str(cfg(config, "dtype", "torch_dtype") or "bf16")))
        fill(s, "state_bytes", sb, "the Mamba2 state in the cache's dtype (config.json's mamba_ssm_cache_dtype, else "
             "the model dtype), updated in place", assumed)
        fill(s, "state_out_bytes", sb, "updated in place", assumed)
    cache = cfg(config, "mamba_ssm_cache_dtype")
    if cache not in (None, "auto") and DTYPE_BYTES.get(norm_dtype(str(cache))):
        fill(s, "state_bytes", DTYPE_BYTES[norm_dtype(str(cache))], "config.json's mamba_ssm_cache_dtype", assumed)
        fill(s, "state_out_bytes", s["state_bytes"], "the cache's state updated in place", assumed)
    fill(s, "state_bytes", 4, "the state in fp32: flash-linear-attention's fused kernels keep it in fp32 (a "
         "serving engine may keep it in the model dtype: give mamba_ssm_cache_dtype in config.json)", assumed)
    if var == "ssm" and "z" not in s:
        s["z"] = "selective_state_update" in e.name or "selective_scan_update" in e.name
    s.setdefault("model_type", (config or {}).get("model_type") or "")
    return ("batch", "heads", "dk", "dv", "qk_heads")


@job("latency_levers", "recurrent")
def latency_levers(entry: dict) -> list[str]:
    return ["state layout: more state columns per CTA (fla's fused recurrent kernel runs one warp per 8 value "
            "columns); at decode the state read + write is the whole op"]


register(OpClass("recurrent", seed_class="attn",
                 name_rules=((26, r"fused_recurrent|recurrent_\w*fwd|selective_state_update|selective_scan_update|"
                                  r"gated_delta_rule_update|sigmoid_gating_delta_rule"),),
                 op_rules=((15, r"^FusedRecurrent\w*Function$"),),
                 hint_aliases=("linear_attention_decode", "state_update"),
                 target_eff={"recurrent": 0.85},
                 missing_hint=(": give config.json (linear_num_value_heads, linear_key_head_dim, linear_value_head_dim; "
                               "Mamba2: mamba_n_heads, mamba_d_head, mamba_d_state, mamba_n_groups) or profile with "
                               "record_shapes=True"),
                 shape_keys=frozenset({"batch", "T", "tokens", "heads", "qk_heads", "dk", "dv", "state_in",
                                       "state_bytes", "state_out_bytes", "variant", "z", "model_type"}),
                 dim_keys=frozenset({"batch", "T", "tokens", "heads", "qk_heads", "dk", "dv"})))
job("model", "recurrent")(_model.model)

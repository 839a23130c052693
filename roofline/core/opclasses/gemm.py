"""Op class "gemm": a dense (or batched) GEMM C = A·B.

Model: roofline/core/models/gemm.py. Stage A: M from the workload; N and K only from captured shapes
or an est_shape. Trace: the aten GEMM ops below. Stage C: the GEMM itself, or the launch-weighted
mix of its captured shapes."""
from __future__ import annotations

from math import prod

from roofline.core.models import gemm as _model
from roofline.core.opclasses import kvcache, origin
from roofline.core.opclasses.aten import dtype_of
from roofline.core.opclasses.jobs import job, rule
from roofline.core.opclasses.base import Necessary, OpClass, Problem, register
from roofline.core.opclasses.levers import operand_levers, split_k_levers
from roofline.core.opclasses.stage_a import fill_m

# GEMM ops: op -> (index of A, index of B, B layout). "kn": B is [K, N]; "nk": B is [N, K] (linear).
GEMM_OPS = {
    "aten::mm": (0, 1, "kn"), "aten::_scaled_mm": (0, 1, "kn"), "aten::_int_mm": (0, 1, "kn"),
    "aten::addmm": (1, 2, "kn"), "aten::_addmm_activation": (1, 2, "kn"),
    "aten::bmm": (0, 1, "kn"), "aten::baddbmm": (1, 2, "kn"), "aten::matmul": (0, 1, "kn"),
    "aten::linear": (0, 1, "nk"), "aten::_scaled_mm_v2": (0, 1, "kn"),
}


@job("trace_shape", "gemm")
def trace_shape(sig):
    """M, N, K (and batch) of a recorded GEMM op, with its operand dtypes."""
    spec = GEMM_OPS.get(sig.name)
    if spec is None:
        return None
    ia, ib, lay = spec
    if len(sig.dims) <= max(ia, ib):
        return None
    a, b = sig.dims[ia], sig.dims[ib]
    if not a or not b or len(a) < 2 and lay != "nk":
        return None
    out = {}
    if lay == "nk":                      # linear: x [..., K], W [N, K]
        if len(b) != 2:
            return None
        out = {"M": int(prod(a[:-1])) if len(a) > 1 else 1, "N": int(b[0]), "K": int(b[1])}
    elif len(b) == 2:                    # [..., M, K] x [K, N]: leading dims fold into M
        out = {"M": int(prod(a[:-1])), "N": int(b[1]), "K": int(a[-1])}
    elif len(a) >= 3 and len(b) >= 3:    # batched
        out = {"M": int(a[-2]), "N": int(b[-1]), "K": int(a[-1]), "batch": int(prod(a[:-2]))}
    else:
        return None
    ta = sig.types[ia] if ia < len(sig.types) else ""
    tb = sig.types[ib] if ib < len(sig.types) else ""
    dt = {"act": dtype_of(ta), "weight": dtype_of(tb), "out": dtype_of(ta)}
    if sig.name.startswith("aten::_scaled_mm"):
        dt["out"] = None                 # out_dtype is an argument the trace does not type
    return out, {k: v for k, v in dt.items() if v}


@job("fill", "gemm")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    fill_m(s, wl, regime, assumed)
    return ("M", "N", "K")


@job("gemm_problems", "gemm")
def gemm_problems(entry: dict) -> list[Problem]:
    """The GEMM itself; one kernel name with several captured GEMMs: a launch-weighted mix per launch."""
    sh = entry.get("shape") or {}
    dt = (entry.get("dtypes") or {}).get("act", "bf16")
    if entry.get("shapes_used"):
        return [Problem(f"dense {u['shape']['M']}x{u['shape']['N']}x{u['shape']['K']}", int(u["shape"]["M"]),
                        int(u["shape"]["N"]), int(u["shape"]["K"]), dt, float(u["shape"].get("batch", 1)) * u["weight"])
                for u in entry["shapes_used"]]
    if all(k in sh for k in ("M", "N", "K")):
        return [Problem("dense", int(sh["M"]), int(sh["N"]), int(sh["K"]), dt, float(sh.get("batch", 1)))]
    return []


# regime from a recorded GEMM's rows (docs/method.md section 3): a decode step feeds each sequence
# one new token, so its GEMMs have as many rows as sequences in the batch; a prefill step whole prompts
PREFILL_GEMM_ROWS_MIN = 2048   # a GEMM of this many rows or more: prefill (decode batches above 2048 are rare)
DECODE_GEMM_ROWS_MAX = 512     # a GEMM of this many rows or fewer: decode


@job("regime_vote", "gemm", rank=2, label="GEMM")
def regime_vote(shp: dict):
    if "M" in shp and "batch" not in shp:
        m = shp["M"]
        if m >= PREFILL_GEMM_ROWS_MIN:
            return "prefill", f"GEMM of {m} rows"
        if m <= DECODE_GEMM_ROWS_MAX:
            return "decode", f"GEMM of {m} rows"
    return None


@job("residency", "gemm")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A GEMM operand larger than half the L2 is re-read from DRAM tile by tile: DRAM bytes above
    the fewest-bytes count are expected (prefill GEMMs 1.0-2.1x on the real-model corpus)."""
    half = l2 / 2
    big = []
    for sh, d in zip(w.shapes, w.dts):
        if not all(k in sh for k in ("M", "N", "K")):
            continue                      # measured work (counters) has no operands to size
        bt = float(sh.get("batch", 1))
        a = float(sh["M"]) * float(sh["K"]) * d["act_bytes"] * bt
        b = float(sh["K"]) * float(sh["N"]) * d["weight_bytes"] * bt
        if max(a, b) > half and min(a, b) > 0.01 * half:
            big.append(f"{sh['M']}x{sh['N']}x{sh['K']}: {'A' if a >= b else 'B'} {max(a, b) / 1e6:.0f} MB")
    if big:
        notes.append(f"operands larger than half the L2 ({l2 / 1e6:.0f} MB) are re-read from DRAM tile by tile "
                     f"({'; '.join(big[:3])}): DRAM bytes above this fewest-bytes count are expected; the "
                     "compute axis is unaffected")
    return False


@rule("gemm", rank=10)
def kv_necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """A decode batched GEMM of an eager attention over a KV cache (docs/method.md section 12):
    QK^T [B, q, d] x [B, d, S] or PV [B, q, S] x [B, S, d], where the trace's cache record
    (trace_evidence.kv_caches) has S slots of head_dim d for b sequences and B = b x hq. Its result
    needs the KV heads once (hk of them, not the hq the materialised broadcast repeats) over the
    filled slots only (kvcache.filled), plus its own Q / P and output over those slots. Nothing
    matches (no cache of those dims, another regime): the model's bytes (None)."""
    B, M, N, K = shape.get("batch"), shape.get("M"), shape.get("N"), shape.get("K")
    if ctx.regime != "decode" or not all(isinstance(x, int) and x > 0 for x in (B, M, N, K)) or B < 2:
        return None
    for c in ctx.trace_evidence.get("kv_caches", []):
        h = kvcache.heads_of(c)
        if h is None:
            continue
        b, hk, S, d = h
        qk = N == S and K == d
        if not (qk or (K == S and N == d)) or B % b or (B // b) % hk:
            continue
        hq = B // b
        fill, why = kvcache.filled(c, ctx)
        if fill is None:
            return Necessary(None, missing=why)
        fill = min(float(fill), float(S))
        kinds = [k for k, on in (("kv_heads_broadcast", hq > hk), ("empty_slots", fill < S * kvcache.FULL_FRAC)) if on]
        if not kinds:
            return None
        a, kv, o = dt["act_bytes"], dt["weight_bytes"], dt["out_bytes"]
        # NB: K (or V) of the hk KV heads over the filled slots once; QK^T reads Q and writes the
        # scores over the filled slots, PV reads those probabilities and writes the output
        nec = b * hk * fill * d * kv + (B * M * d * a + B * M * fill * o if qk else B * M * fill * a + B * M * d * o)
        op = "QK^T" if qk else "PV"
        ev = [f"batched GEMM [{B},{M},{K}] x [{B},{K},{N}] = the {op} of an eager attention over the {S}-slot cache "
              f"{c['op']} {c['dims']}: batch {B} = {b} sequences x {hq} heads"
              + (f", the cache holds {hk} KV heads (broadcast {hq // hk}x before this GEMM)" if hq > hk else ""), why]
        return Necessary(float(nec), 2.0 * B * M * fill * d, kind="+".join(kinds), evidence=ev,
                         lever=kvcache.lever(kinds, hk, fill, S))
    return None


@job("precision_levers", "gemm")
def precision_levers(out: dict, dt: dict, ctx, notes: list[str]) -> list[tuple]:
    """Lower precision of the operand that the trace and config.json say is a weight (a linear layer's
    B, a batched MoE's gathered expert weights) or the KV cache (an eager attention's K / V over a cache
    record or a length that grows step by step): origin.gemm_origin per shape; none where unknown."""
    if not ctx.shapes or len(ctx.dts) != len(ctx.shapes):
        notes.append("no lower-precision lever: no captured shape says what the GEMM's operands are")
        return []
    origins = [origin.gemm_origin(s, ctx) for s in ctx.shapes]
    op_bytes = [origin.operand_bytes(s, d, o.operand) if o.operand else 0.0
                for s, d, o in zip(ctx.shapes, ctx.dts, origins)]
    dts = [d.get("act") if o.operand == "A" else d.get("weight") for d, o in zip(ctx.dts, origins)]
    return operand_levers(origins, op_bytes, dts, ctx, ctx.bytes_per_launch, notes)


register(OpClass(
    "gemm", flags=frozenset({"folds_splitk_reduce", "compulsory_bytes"}), seed_class="gemm",
    # cuBLAS/cuBLASLt incl. nvjet, CUTLASS, ThunderKittens, DeepGEMM, hipBLASLt/Tensile, Marlin/AWQ/GPTQ
    # quantised GEMM, Triton mm templates, GEMV (after MoE and attention, whose names often say "gemm")
    name_rules=((60, r"gemm|gemv|nvjet|cublas|cutlass|xmma|\bs\d{3,5}gemm|_s\d{4,5}|h\d{4,5}gemm|matmul|"
                     r"scaled_mm|_mm_|triton_tem_fused|wgmma|deep_?gemm|thunderkittens|\btk_|marlin|"
                     r"hipblaslt|^cijk_|dot_kernel|splitkreduce|tensorop"),),
    op_rules=((10, r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|_int_mm|addmv|mv|dot)$"),),
    hint_aliases=("matmul",),
    target_eff={"gemm": 0.90},     # regular, dense compute
    dtype_roles=("weight",),
    shape_keys=frozenset({"M", "N", "K", "batch"}), dim_keys=frozenset({"M", "N", "K", "batch"}),
    missing_hint=(": a GEMM's N and K come only from captured shapes (profile with record_shapes=True) or "
                  "an est_shape in the Top-N")))
job("latency_levers", "gemm")(split_k_levers)
job("model", "gemm")(_model.model)

"""Op class "moe": a mixture-of-experts layer (fused MoE, grouped expert GEMMs).

Model: roofline/core/models/moe.py. Two shapes:
- a grouped expert GEMM (one launch per projection): `rows` (token-expert pairs), `E`, `N`, `K`,
  from the aten grouped-GEMM ops below (transformers' `grouped_mm` experts backend, torch's
  `_grouped_mm` / `_scaled_grouped_mm`); config.json only names the projection (gate_up: K =
  hidden_size; down: N = hidden_size);
- a fused MoE layer (vLLM / SGLang `fused_moe_kernel`: no aten shapes): M from the workload, E /
  top_k / hidden / inter from config.json (stage A).
Stage C: the expert GEMMs at the average rows per hit expert."""
from __future__ import annotations

from dataclasses import replace

from roofline.core.models import moe as _model
from roofline.core.opclasses import origin
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, Problem, register
from roofline.core.opclasses.aten import dtype_of
from roofline.core.opclasses.levers import operand_levers, split_k_levers
from roofline.core.opclasses.stage_a import cfg, fill, fill_m


# Grouped GEMM ops: op -> (index of A [rows, K], index of W [E, K, N]). NB: W is the logical
# [E, K, N] operand; a model storing [E, N, K] passes a transposed view, whose recorded dims are
# the view's.
GROUPED_OPS = {"aten::_grouped_mm": (0, 1), "aten::_scaled_grouped_mm": (0, 1), "aten::grouped_mm": (0, 1)}


@job("trace_shape", "moe")
def trace_shape(sig):
    """rows, E, N, K of a recorded grouped expert GEMM, with its operand dtypes."""
    spec = GROUPED_OPS.get(sig.name)
    if spec is None or len(sig.dims) <= max(spec):
        return None
    a, w = sig.dims[spec[0]], sig.dims[spec[1]]
    if not (isinstance(a, tuple) and isinstance(w, tuple)) or len(w) != 3 or len(a) not in (2, 3):
        return None
    if len(a) == 3:                      # batched form [E, m, K] x [E, K, N] (no offsets)
        rows, k = int(a[0]) * int(a[1]), int(a[2])
    else:
        rows, k = int(a[0]), int(a[1])
    if k != int(w[1]):
        return None
    out = {"pairs": rows, "E": int(w[0]), "N": int(w[2]), "K": k}
    ta = sig.types[spec[0]] if spec[0] < len(sig.types) else ""
    tw = sig.types[spec[1]] if spec[1] < len(sig.types) else ""
    dt = {"act": dtype_of(ta), "weight": dtype_of(tw), "out": dtype_of(ta)}
    if sig.name == "aten::_scaled_grouped_mm":
        dt["out"] = None                 # out_dtype is an argument the trace does not type
    return out, {kk: v for kk, v in dt.items() if v}


def _projection(s: dict, config, assumed) -> None:
    """Name a grouped GEMM's projection from config.json (no effect on its bytes: K x N per expert)."""
    hidden = cfg(config, "hidden_size", "d_model")
    if hidden is None or "projection" in s:
        return
    if int(s["K"]) == int(hidden):
        s["projection"] = "gate_up" if int(s["N"]) != int(hidden) else "gate_up or down"
    elif int(s["N"]) == int(hidden):
        s["projection"] = "down"


@job("fill", "moe")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    if "pairs" in s:
        fill(s, "E", cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
        if all(k in s for k in ("N", "K")):
            _projection(s, config, assumed)
        return ("pairs", "E", "N", "K")
    fill_m(s, wl, regime, assumed)
    fill(s, "E", cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
    fill(s, "top_k", cfg(config, "num_experts_per_tok", "moe_topk", "top_k"), "config.json", assumed)
    fill(s, "hidden", cfg(config, "hidden_size", "d_model"), "config.json", assumed)
    fill(s, "inter", cfg(config, "moe_intermediate_size", "expert_intermediate_size"), "config.json", assumed)
    return ("M", "E", "top_k", "hidden", "inter")


@job("gemm_problems", "moe")
def gemm_problems(entry: dict) -> list[Problem]:
    """The grouped GEMMs of one logical op: pairs = M x top_k rows over E experts (stage 1 gate/up
    N = 2 inter, K = hidden; stage 2 down N = hidden, K = inter), or the recorded grouped form."""
    sh = entry.get("shape") or {}
    dt = (entry.get("dtypes") or {}).get("act", "bf16")
    if all(k in sh for k in ("pairs", "E", "N", "K")):
        # the launch-weighted mix of the captured grouped shapes (gate_up and down run under one
        # kernel name), as the analysis weighs them (roofline.core.shapes.work_mix)
        mix = [(u["shape"], float(u["weight"])) for u in entry.get("shapes_used") or []
               if all(k in (u.get("shape") or {}) for k in ("pairs", "E", "N", "K"))] or [(sh, 1.0)]
        return [Problem(f"grouped {s.get('projection') or ''}".strip(), int(s["pairs"]), int(s["N"]), int(s["K"]), dt,
                        w, E=int(s["E"]), experts_hit_model=_model.experts_hit(int(s["E"]), int(s["pairs"])))
                for s, w in mix]
    if not all(k in sh for k in ("M", "E", "top_k", "hidden", "inter")):
        return []
    M, E, k = int(sh["M"]), int(sh["E"]), int(sh["top_k"])
    pairs = M * k
    hit = _model.experts_hit(E, pairs)
    hidden, inter = int(sh["hidden"]), int(sh["inter"])
    stage = sh.get("stage")
    out = []
    kw = dict(E=E, tokens=M, top_k=k, experts_hit_model=hit)
    if stage in (None, 1):
        out.append(Problem("moe stage1 (gate/up)", pairs, 2 * inter, hidden, dt, 1.0, **kw))
    if stage in (None, 2):
        out.append(Problem("moe stage2 (down)", pairs, hidden, inter, dt, 1.0, **kw))
    return out


def moe_layers(config: dict | None) -> int | None:
    """The MoE layers of a model from config.json: the layer count less the leading dense layers
    (first_k_dense_replace), or every decoder_sparse_step-th layer; None when it says nothing."""
    if not config or not isinstance(config.get("num_hidden_layers"), int):
        return None
    n = int(config["num_hidden_layers"])
    dense = config.get("first_k_dense_replace")
    if isinstance(dense, int) and 0 <= dense < n:
        return n - dense
    step = config.get("decoder_sparse_step")
    if isinstance(step, int) and step > 1:
        return n // step
    return n


@job("launches", "moe")
def fused_moe_launches(e, w, reg, config: dict | None, notes: list[str]) -> int | None:
    """A fused MoE layer model (stage A, no stage in the shape) counts a whole layer's expert work;
    a fused_moe kernel is launched once per stage (gate/up, then down). Where the Top-N does not say
    how many launches form one logical op, the launches per step over the MoE layers of config.json
    say it (2 launches a layer: stage 1 + stage 2), and the notes say so. None: the Top-N's count."""
    if "launches_per_logical_op" in (e.raw or {}) or not w.shapes \
            or "pairs" in w.shapes[0] or w.shapes[0].get("stage") is not None:
        return None
    layers = moe_layers(config)
    if not layers:
        return None
    per_layer = reg.launches_per_step / layers
    if per_layer >= 1.5 and abs(per_layer - round(per_layer)) < 0.05:
        n = int(round(per_layer))
        notes.append(f"{reg.launches_per_step:g} launches per step over {layers} MoE layers (config.json) = {n} "
                     f"launches per layer: one logical op (a layer's expert GEMMs) = {n} launches")
        return n
    return None


@job("residency", "moe")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """Each expert's weights above half the L2, over several row tiles: re-read per row tile."""
    info = w.res.info or {}
    if info.get("grouped") and info.get("expert_weight_bytes", 0) > l2 / 2:
        rows_per_expert = info["pairs"] / max(info["experts_hit"], 1.0)
        if rows_per_expert > 128:
            notes.append(f"each expert's weights ({info['expert_weight_bytes'] / 1e6:.0f} MB) exceed half the L2 and "
                         f"its ~{rows_per_expert:.0f} rows span several row tiles: weight tiles are re-read from DRAM "
                         "for each row tile, so DRAM bytes above the model's are expected")
    return False


@job("model_notes", "moe")
def model_notes(alts: list[dict], notes: list[str]) -> None:
    allx = next((a for a in alts if a["model"] == "all_experts"), None)
    if allx is not None:
        notes.append(f"all-expert model: {allx['bytes_est'] / 1e6:.1f} MB -> {allx['roofline_pct_raw']:.1%}")


@job("stop_reading_levers", "moe")
def stop_reading_levers(entry: dict, info: dict) -> list[str]:
    """Routing touches fewer experts than the kernel streams: the unrouted experts' weights."""
    if info.get("experts_hit") is None:
        return []
    hit, E = info["experts_hit"], info["E"]
    if hit < E - 0.5:
        waste = (E - hit) * info["expert_weight_bytes"]
        return [f"stop reading unrouted experts: routing touches ~{hit:.0f} of {E} experts; streaming all "
                f"of them moves {waste / 1e6:.0f} MB more per logical op"]
    return []


def _expert_origin(sh: dict, ex) -> origin.Origin:
    """A grouped GEMM's per-group operand W [E, K, N] is the expert weights where config.json's experts and
    expert dims say so; a fused MoE layer (stage A) streams the expert weights config.json sized."""
    if not (all(isinstance(sh.get(k), int) for k in ("pairs", "E", "N", "K"))
            or all(isinstance(sh.get(k), int) for k in ("M", "E", "top_k", "hidden", "inter"))):
        return origin.Origin("unknown", None, "no grouped-GEMM or fused-MoE shape (measured work): nothing says what "
                             "its operands are")
    if "pairs" not in sh:
        return origin.Origin("parameter", "W", f"the fused MoE layer streams {sh.get('E')} experts' weights of hidden "
                             f"{sh.get('hidden')} x intermediate {sh.get('inter')} (config.json)")
    E, N, K = sh["E"], sh["N"], sh["K"]
    w = f"W [E, K, N] = [{E},{K},{N}] of the grouped GEMM"
    if ex is None:
        return origin.Origin("unknown", None, f"{w}: config.json gives no experts / hidden / expert intermediate "
                             "to match it against")
    E_cfg, h, mi = ex
    if E == E_cfg and {K, N} in ({h, 2 * mi}, {h, mi}):
        return origin.Origin("parameter", "W", f"{w} is the expert weights: E = {E} experts, K x N = hidden {h} x "
                             f"{'2 x ' if 2 * mi in (K, N) else ''}intermediate {mi} (config.json)")
    return origin.Origin("unknown", None, f"{w}: config.json says {E_cfg} experts of hidden {h} x intermediate {mi}")


@job("precision_levers", "moe")
def precision_levers(out: dict, dt: dict, ctx, notes: list[str]) -> list[tuple]:
    """Lower precision of the expert weights (_expert_origin), saving half of the weight bytes the chosen
    model streams (the experts hit, or all E)."""
    if not ctx.shapes or len(ctx.dts) != len(ctx.shapes):
        notes.append("no lower-precision lever: no shape says what the MoE streams")
        return []
    ex = origin.expert_dims(ctx.config)
    allx = out.get("byte_model") == "all_experts"
    origins, wbytes = [], []
    for sh, d in zip(ctx.shapes, ctx.dts):
        origins.append(_expert_origin(sh, ex))
        if origins[-1].operand is None:
            n, elems = 0.0, 0
        elif "pairs" in sh:
            n, elems = (sh["E"] if allx else _model.experts_hit(sh["E"], sh["pairs"])), sh["N"] * sh["K"]
        else:
            n = sh["E"] if allx else _model.experts_hit(sh["E"], sh["M"] * sh["top_k"])
            elems = _model.expert_weight_elems(sh["hidden"], sh["inter"], sh.get("stage"))
        wbytes.append(n * elems * d["weight_bytes"])
    return operand_levers(origins, wbytes, [d.get("weight") for d in ctx.dts], ctx, ctx.bytes_per_launch, notes)


@job("finish_levers", "moe")
def finish_levers(out: dict, lv, all_entries: list[dict], info: dict, dt: dict):
    """An unsaturated MoE whose all-expert model is infeasible: that is itself evidence for the
    stop-reading lever (other_levers)."""
    if out["headroom_class"] != "saturated" and any(not a["feasible"] for a in out.get("alternatives", [])):
        return replace(lv, other_levers=lv.other_levers + [t for t in stop_reading_levers(out, info)
                                                           if t not in lv.other_levers])
    return lv


register(OpClass("moe", seed_class="moe",
                 # fused MoE, grouped GEMM, routing/gating, token permutation (before attention and GEMM:
                 # their names often say "gemm")
                 name_rules=((30, r"fused_moe|moe_|_moe|moe::|\bmoe\b|^moe|grouped_?gemm|group_?gemm|groupgemm|"
                                  r"gemm_?grouped|ptr_?array|array_?tma|group_?problem|grouped|topk_?gating|"
                                  r"gating_?softmax|expert"),),
                 op_rules=((40, r"moe|^aten::_grouped_mm$|^aten::_scaled_grouped_mm$"),),
                 target_eff={"moe": 0.90},   # decode weight streaming is essentially a memcpy
                 dtype_roles=("weight",),
                 arch_class="moe",
                 shape_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "stage", "pairs", "N", "K",
                                       "projection"}),
                 dim_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "pairs", "N", "K"})))
job("latency_levers", "moe")(split_k_levers)
job("model", "moe")(_model.model)

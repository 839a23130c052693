"""The procedure of seed 002 section 3: head scoping, regime, byte/FLOP model, utilizations, roof,
bound type, verdict, routing, rankings. Pure: it never prints, plots or writes files (house rule 4).

Units: times in ms (per launch unless named *_logical_*), bytes, FLOPs, bytes/s, FLOP/s.
"""
from __future__ import annotations

import datetime as _dt
import math
import traceback
from typing import Any

from roofline import contract, routing
from roofline.classify import classify, is_splitk_reduce, short_name as _short_name
from roofline.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT, SKILL, SKILL_VERSION  # noqa: F401  (SKILL_VERSION re-exported)
from roofline.errors import EntryError
from roofline.inputs import Entry, Env, TopN
from roofline.models import MODELS, ModelResult
from roofline.peaks import DTYPE_BYTES, Peaks, norm_dtype
from roofline.shapes import work_mix

DISPATCH_FLOOR_MS = 0.005      # ~5 us: a launch this short is timed by dispatch, not by its work
LATENCY_UTIL = 0.60            # both utils under this (above the dispatch floor) => latency-bound
SUSPECT_LOW = 0.001            # roofline_pct under this is as impossible as one above 1.0
BOUND_TYPES = ("memory", "compute", "latency", "unknown")   # CLOSED set
HEADROOM_CLASSES = ("underperforming", "moderate", "saturated", "unknown")
_CONF_ORDER = {"low": 0, "medium": 1, "high": 2}


def _min_conf(*cs: str) -> str:
    return min(cs, key=lambda c: _CONF_ORDER[c])


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def pick_regime(e: Entry, topn: TopN) -> tuple[str, str]:
    """The e2e-critical regime: the one carrying the launches over the run."""
    if len(e.regimes) == 1:
        r = next(iter(e.regimes))
        other = "prefill" if r == "decode" else "decode"
        if (topn.n_prefill_steps if other == "prefill" else topn.n_decode_steps):
            return r, f"this kernel ran only in the {r} regime (the trace also has {other} steps)"
        return r, f"only the {r} regime is profiled"
    nd, npf = topn.n_decode_steps, topn.n_prefill_steps
    if nd is None or npf is None:
        return "decode", "serving step counts absent: decode assumed e2e-critical"
    dec = nd * e.regimes["decode"].launches_per_step
    pre = npf * e.regimes["prefill"].launches_per_step
    r = "decode" if dec >= pre else "prefill"
    return r, f"{r} carries the launches ({dec:g} decode vs {pre:g} prefill launches in the run)"


def resolve_dtypes(e: Entry, env: Env) -> dict[str, Any]:
    md = norm_dtype(env.model_dtype)
    act = norm_dtype(e.dtypes.get("act")) or md
    weight = norm_dtype(e.dtypes.get("weight")) or md
    # NB: an 8-bit (or narrower) activation model still writes 16-bit outputs (bf16) by default.
    out = norm_dtype(e.dtypes.get("out")) or (act if DTYPE_BYTES.get(act, 2) >= 2 else "bf16")
    kv = norm_dtype(e.dtypes.get("kv")) or norm_dtype(env.kv_cache_dtype) or act
    dt = {"act": act, "weight": weight, "out": out, "kv": kv}
    for k in list(dt):
        if dt[k] not in DTYPE_BYTES:
            raise EntryError(f"unknown {k} dtype {dt[k]!r}")
        dt[f"{k}_bytes"] = DTYPE_BYTES[dt[k]]
    return dt


def _shape_dtypes(dt: dict, override: dict) -> dict:
    """The entry's dtypes with one shape's own act/out (a mixed-dtype copy) put in."""
    if not override:
        return dt
    out = dict(dt)
    for k in ("act", "weight", "out", "kv"):
        v = norm_dtype(override.get(k))
        if v in DTYPE_BYTES:
            out[k], out[f"{k}_bytes"] = v, DTYPE_BYTES[v]
    return out


def _compute_peak(peaks: Peaks, dtype: str) -> tuple[float | None, str, list[str]]:
    notes = []
    p = peaks.compute_peak(dtype)
    if p is not None:
        return p, dtype, notes
    for alt in ("bf16", "fp16", "fp32"):
        if peaks.compute_peak(alt) is not None:
            notes.append(f"no {dtype} compute peak for {peaks.device}; the {alt} roof is used")
            return peaks.compute_peak(alt), alt, notes
    return None, dtype, ["no compute peak at all for this device"]


def _metrics(bytes_est: float, flops_est: float, t_s: float, peak_bw: float, peak_flops: float | None) -> dict:
    achieved_bw = bytes_est / t_s
    achieved_flops = flops_est / t_s
    hbm_util = achieved_bw / peak_bw
    compute_util = achieved_flops / peak_flops if peak_flops else 0.0
    ai = flops_est / bytes_est if bytes_est > 0 else math.inf
    ridge = peak_flops / peak_bw if peak_flops else math.inf
    roof_axis = "compute" if ai > ridge else "memory"
    pct = compute_util if roof_axis == "compute" else hbm_util
    return {"achieved_bw_bytes_s": achieved_bw, "achieved_flops": achieved_flops, "hbm_util": hbm_util,
            "compute_util": compute_util, "arithmetic_intensity": ai, "ridge_point": ridge,
            "roof_axis": roof_axis, "roofline_pct_raw": pct}


def _feasible(m: dict, compute_tol: float = 0.0) -> bool:
    """A byte model is refuted when it implies a rate above a roof; on a measured compute roof,
    only beyond the roof's own run-to-run spread (see Peaks.compute_roof_spread)."""
    return m["hbm_util"] <= 1.0 and m["compute_util"] <= 1.0 / (1.0 - compute_tol)


def analyze_entry(e: Entry, topn: TopN, env: Env, config: dict | None, peaks: Peaks, stage: str,
                  counters: Any | None, all_light: list[dict]) -> tuple[dict, dict]:
    """One head entry -> (artifact entry, model info). Raises EntryError to degrade it (L2)."""
    notes: list[str] = []
    # op_class is the seed's closed set in the artifact; the finer kind (norm, quant, comm) picks
    # the model and the prior here and is kept as op_kind
    op_class = classify(e.name, e.classification)
    sname = e.short_name or _short_name(e.name)
    out: dict[str, Any] = {"name": e.name, "short_name": sname, "pct_gpu_time": _verbatim_pct(e),
                           "op_class": contract.seed_op_class(op_class), "op_kind": op_class,
                           "editable": e.editable, "modeled": False}
    if e.problems:
        raise EntryError("; ".join(e.problems))
    regime, why = pick_regime(e, topn)
    reg = e.regimes[regime]
    out.update(regime=regime, t_ms=reg.base_latency_ms, launches_per_step=_verbatim_lps(e, regime, reg),
               launches_per_logical_op=e.launches_per_logical_op)
    notes.append(why)
    if op_class == "comm":
        raise EntryError("communication kernels are not modelled: their roof is the interconnect, not HBM")
    if op_class not in MODELS:
        raise EntryError(f"op class {op_class!r} cannot be modelled (name not recognised and no usable "
                         "classification hint): no guess is made")
    if peaks.hbm_bw_bytes_s is None:
        raise EntryError(f"no memory peak for {peaks.device}")
    if is_splitk_reduce(e.name):
        raise EntryError("split-K reduce kernel: it sums the partial results of a GEMM launched just before it, so "
                         "it is half of that GEMM's logical op, not a GEMM of its own; analyse the pair as one "
                         "op (roofline topn folds the reduce into its GEMM's time)")
    dt = resolve_dtypes(e, env)
    shapes, weights, shape_dts, shape_t_ms, shape_source, assumed, mix_notes = work_mix(
        op_class, e, env, config, regime)
    notes += mix_notes
    dts = [_shape_dtypes(dt, o) for o in shape_dts]
    results: list[ModelResult] = [MODELS[op_class](s, d) for s, d in zip(shapes, dts)]
    res = results[0]
    if len(results) > 1:
        # several shapes under one kernel name: the launch-weighted work of one launch
        res = ModelResult([type(c)(c.label, sum(w * r.candidates[i].bytes_est for w, r in zip(weights, results)),
                                   sum(w * r.candidates[i].flops_est for w, r in zip(weights, results)), c.note)
                           for i, c in enumerate(res.candidates)], res.compute_dtype, res.assumptions,
                          res.primary, res.info)
    if any(shape_dts):
        notes.append("per-shape dtypes from the Top-N (shape_dtypes): " + ", ".join(
            f"{d['act']}->{d['out']}" for d in dts))
    if assumed:
        notes.append("assumed " + "; ".join(assumed))
    # Per-launch vs per-logical-op: the model counts one logical op; compare it with the summed
    # time of the launches forming it.
    n_l = e.launches_per_logical_op
    t_logical_ms = reg.base_latency_ms * n_l
    out["t_logical_op_ms"] = t_logical_ms
    notes.append(f"unit: one logical op = {n_l} launch(es), {t_logical_ms:.6g} ms"
                 if n_l > 1 else f"unit: one launch, {t_logical_ms:.6g} ms")
    t_s = t_logical_ms / 1e3
    peak_bw = peaks.hbm_bw_bytes_s
    peak_flops, cdtype, pnotes = _compute_peak(peaks, res.compute_dtype)
    notes += pnotes
    # the compute roof's own run-to-run spread, where the FLOP count is exact (captured shapes)
    tol_c = peaks.compute_roof_spread(cdtype) if shape_source == "captured" else 0.0
    # Evaluate every candidate byte model; feasibility rule: the largest feasible one.
    alts = []
    for c in res.candidates:
        m = _metrics(c.bytes_est, c.flops_est, t_s, peak_bw, peak_flops)
        alts.append({"model": c.label, "bytes_est": c.bytes_est, "flops_est": c.flops_est,
                     "roofline_pct_raw": m["roofline_pct_raw"], "hbm_util": m["hbm_util"],
                     "feasible": _feasible(m, tol_c), "note": c.note, "_m": m})
    feasible = [a for a in alts if a["feasible"]]
    chosen = max(feasible, key=lambda a: a["bytes_est"]) if feasible else min(alts, key=lambda a: a["bytes_est"])
    mean_ctx = next((a for a in alts if a["model"] == "mean_context"), None)
    if op_class == "attn" and mean_ctx is not None:
        # Seed section 4: attention's seq_len is the CURRENT average context (isl + osl/2), not the
        # max. The max context is no second byte model for the feasibility rule: it is only the
        # upper end of the displayed range.
        chosen = mean_ctx
        notes.append("attention point estimate at the mean context "
                     f"({mean_ctx['note']}, isl + osl/2); the max context "
                     + ", ".join(a["note"] for a in alts if a["model"] == "max_context")
                     + " (isl + osl) is only the upper end of the displayed range")
        for a in alts:
            if not a["feasible"]:
                notes.append(f"{a['model']} ({a['note']}) implies {a['roofline_pct_raw']:.0%} of the roof: infeasible, "
                             "left out of the range")
    elif len(alts) > 1:
        if feasible:
            notes.append(f"byte model: {chosen['model']} (largest feasible of {', '.join(a['model'] for a in alts)})")
        else:
            notes.append("every candidate byte model is infeasible: the class model is wrong here")
        for a in alts:
            if not a["feasible"]:
                notes.append(f"{a['model']} model implies {a['roofline_pct_raw']:.0%} of the roof: infeasible "
                             "(L3 case; stage-C counters decide)")
    m = dict(chosen["_m"])
    bytes_est, flops_est = chosen["bytes_est"], chosen["flops_est"]
    confidence = "medium" if shape_source == "captured" else "low"
    if shape_source != "captured":
        notes.append("stage A shapes (estimated): display only, do not rank on it")
    # Stage C: measured bytes on the memory axis, useful FLOPs on the compute axis.
    if counters is not None:
        tdt = {d: v for d, v in (counters.tensor_flops_by_dtype or {}).items() if v}
        if tdt:
            measured_dt = max(tdt, key=tdt.get)
            if measured_dt != cdtype and peaks.compute_peak(measured_dt):
                notes.append(f"stage C: the tensor cores ran {measured_dt} (counters), not {cdtype}: the "
                             f"{measured_dt} compute roof is used")
                cdtype, peak_flops = measured_dt, peaks.compute_peak(measured_dt)
        m, bytes_est, confidence = _apply_counters(out, counters, m, bytes_est, flops_est, t_s, peak_bw,
                                                   peak_flops, n_l, confidence, notes)
    # Confidence caps from the peaks.
    if peaks.confidence == "low":
        confidence = "low"
        notes.append("peaks are low-confidence (L1 / ambiguous device): display only")
    if m["roof_axis"] == "compute":
        cc = peaks.compute_confidence(cdtype)
        if cc == "low":
            notes.append(f"the {cdtype} compute peak is not validated (seed 002 section 8): the compute-axis "
                         "ratio is not usable for ranking")
        confidence = _min_conf(confidence, "high" if cc == "high" else cc)
    pct_raw = m.pop("roofline_pct_raw")
    roof_axis = m.pop("roof_axis")
    out.update(modeled=True, bytes_est=bytes_est, flops_est=flops_est, **m)
    out["roof_axis"] = roof_axis
    out["compute_dtype"] = cdtype
    out["dtypes"] = {k: dt[k] for k in ("act", "weight", "out", "kv")}
    out["shape"] = {k: v for k, v in shapes[0].items() if k not in ("seq_len_candidates",)}
    if len(shapes) > 1:
        out["shapes_used"] = [{"shape": {k: v for k, v in sh.items() if k != "seq_len_candidates"},
                               "weight": w, **({"dtypes": {k: d[k] for k in ("act", "out")}} if shape_dts[i] else {})}
                              for i, (sh, w, d) in enumerate(zip(shapes, weights, dts))]
        if shape_t_ms:
            out["per_shape"] = _per_shape(shapes, weights, results, shape_t_ms, e, regime,
                                          [a["model"] for a in alts].index(chosen["model"]), peak_bw, peaks)
    out["shape_source"] = shape_source
    out["byte_model"] = chosen["model"]
    if len(alts) > 1:
        out["alternatives"] = [{k: v for k, v in a.items() if k != "_m"} for a in alts]
        if op_class == "moe":
            allx = next(a for a in alts if a["model"] == "all_experts")
            notes.append(f"all-expert model: {allx['bytes_est'] / 1e6:.1f} MB -> {allx['roofline_pct_raw']:.1%}")
    tgt = routing.target_eff_for(op_class, regime)
    out["target_eff"] = tgt
    feas_pcts = [a["roofline_pct_raw"] for a in alts if a["feasible"]]
    if len(feas_pcts) > 1 and "bytes_measured" not in out:
        lo, hi = min(feas_pcts), max(feas_pcts)
        out["roofline_pct_range"] = [lo, hi]
        if tgt:
            out["attainable_speedup_range"] = [max(1.0, tgt / hi), max(1.0, tgt / lo)]
    out["roofline_pct_raw"] = pct_raw
    out["roofline_pct"] = min(max(pct_raw, 0.0), 1.0)
    if roof_axis == "compute" and 1.0 < pct_raw <= 1.0 / (1.0 - tol_c) and m["hbm_util"] <= 1.0:
        # At the compute wall: the FLOPs are exact (captured shapes) and the excess over the roof is
        # inside the roof's own measured run-to-run spread, so it is the denominator's uncertainty,
        # not a wrong model: read as 100% of the roof (a verdict), raw ratio kept.
        out["at_compute_wall"] = True
        notes.append(f"at the compute wall: {pct_raw:.1%} of the {cdtype} envelope roof, inside the roof's "
                     f"measured run-to-run spread ({tol_c:.1%}: lowest recorded run vs the envelope): read as 100%")
        pct_raw = 1.0
    out["suspect"] = False
    out["dispatch_bound"] = False
    out["stage_c_candidate"] = False
    bound = "latency" if (m["hbm_util"] < LATENCY_UTIL and m["compute_util"] < LATENCY_UTIL) else roof_axis
    verdict = True
    if reg.base_latency_ms <= DISPATCH_FLOOR_MS:
        # No verdict: the launch is timed by dispatch, not by its transfer or math.
        out["dispatch_bound"] = True
        bound = "latency"
        verdict = False
        notes.append(f"dispatch-bound: {reg.base_latency_ms * 1e3:.2f} us per launch is within launch-overhead "
                     "scale (~5 us): no verdict; the lever is fusion / graph capture")
    if not (SUSPECT_LOW <= pct_raw <= 1.0) or bytes_est <= 0:
        # L3: an impossible ratio is the model being wrong, never a verdict.
        out["suspect"] = True
        out["stage_c_candidate"] = True
        out["bytes_upper_bound"] = peak_bw * t_s
        verdict = False
        notes.append(f"L3 suspect: roofline_pct_raw {pct_raw:.3g} is outside [{SUSPECT_LOW}, 1]; shown clamped, "
                     f"no verdict; the model's bytes may not exceed {peak_bw * t_s:.4g} (peak_bw x t); "
                     "stage-C counter measurement candidate")
    out["bound_type"] = bound if bound in BOUND_TYPES else "unknown"
    attain = max(1.0, tgt / pct_raw) if (tgt and pct_raw > 0) else None
    if attain is not None:
        # No launch gets faster than the dispatch floor: the same ~5 us that makes a launch
        # dispatch-bound caps what any rewrite of it can buy (continuous at the floor: no cliff).
        floor_cap = max(1.0, reg.base_latency_ms / DISPATCH_FLOOR_MS)
        if attain > floor_cap:
            notes.append(f"attainable speedup capped at the dispatch floor: {reg.base_latency_ms * 1e3:.2f} us / "
                         f"{DISPATCH_FLOOR_MS * 1e3:g} us = {floor_cap:.3g}x (the roofline alone says {attain:.3g}x)")
            out["attainable_speedup_uncapped"] = attain
            attain = floor_cap
    gain = e.pct_gpu_time * (1.0 - 1.0 / attain) if attain else None
    band = routing.headroom_class(pct_raw, tgt) if tgt else "unknown"
    if verdict and confidence != "low":
        out["headroom_class"] = band
        out["attainable_speedup"], out["expected_e2e_gain_pct"] = attain, gain
    else:
        out["headroom_class"] = "unknown"
        out["attainable_speedup"] = attain if verdict else None
        out["expected_e2e_gain_pct"] = gain if verdict else None
        if verdict:
            out["provisional_headroom_class"] = band
    out["confidence"] = confidence
    out["route"] = routing.route(out)
    out["route_reason"] = routing.ROUTES[out["route"]]
    # Seed section 2: byte_reduction_levers only on saturated heads; every other lever (latency:
    # occupancy, fusion, split-K; the evidence-based stop-reading lever of an unsaturated MoE) goes
    # to other_levers.
    out["byte_reduction_levers"] = (routing.byte_reduction_levers(out, all_light, res.info, dt)
                                    if out["headroom_class"] == "saturated" else [])
    out["other_levers"] = routing.other_levers(out)
    if (op_class == "moe" and out["headroom_class"] != "saturated"
            and any(not a["feasible"] for a in out.get("alternatives", []))):
        # the all-expert model being infeasible is itself evidence for the stop-reading lever
        out["other_levers"] += [lv for lv in routing.byte_reduction_levers(out, [], res.info, dt)
                                if lv.startswith("stop reading")]
    out["notes"] = "; ".join(notes)
    return out, res.info


def _per_shape(shapes, weights, results, shape_t_ms, e, regime, cand_i, peak_bw, peaks) -> list[dict]:
    """One row per captured shape of a multi-shape kernel name: its launches, mean time and
    figures on the byte model the entry uses, so a reader sees which shape is slow."""
    raw_l = e.raw.get("shape_launches") if isinstance(e.raw, dict) else None
    rows = []
    for sh, w, r, t_ms in zip(shapes, weights, results, shape_t_ms):
        c = r.candidates[min(cand_i, len(r.candidates) - 1)]
        pf, _, _ = _compute_peak(peaks, r.compute_dtype)
        row = {"shape": {k: v for k, v in sh.items() if k != "seq_len_candidates"}, "weight": w, "t_ms": t_ms,
               "bytes_est": c.bytes_est, "flops_est": c.flops_est}
        if t_ms > 0:
            m = _metrics(c.bytes_est, c.flops_est, t_ms / 1e3, peak_bw, pf)
            row.update(achieved_flops=m["achieved_flops"], achieved_bw_bytes_s=m["achieved_bw_bytes_s"],
                       hbm_util=m["hbm_util"], compute_util=m["compute_util"], roof_axis=m["roof_axis"],
                       roofline_pct=m["roofline_pct_raw"])
        rows.append(row)
    if isinstance(raw_l, list) and len(raw_l) >= len(rows):
        # launches in the order of the Top-N's shapes (work_mix keeps that order within a regime)
        by_key = {}
        for sh, n in zip(e.shapes or [], raw_l):
            by_key.setdefault(tuple(sorted((k, v) for k, v in sh.items())), n)
        for row, sh in zip(rows, shapes):
            key = tuple(sorted((k, v) for k, v in sh.items() if k not in ("seq_len_candidates", "regime")))
            if key in by_key:
                row["launches"] = by_key[key]
    return rows


def _apply_counters(out, kc, m, bytes_est, flops_est, t_s, peak_bw, peak_flops, n_l, confidence, notes):
    """Stage C: merge one isolated-op counter record. L4 on missing/unstable counters."""
    out["counters"] = {
        "source": kc.source, "launches": kc.launches, "t_ms": kc.t_ms, "dram_bytes": kc.dram_bytes,
        "flops_issued": kc.flops_issued, "tensor_flops_by_dtype": dict(kc.tensor_flops_by_dtype),
        "cuda_core_flops": kc.cuda_core_flops, "l2_bytes": kc.l2_bytes, "l1_bytes": kc.l1_bytes,
        "unstable": kc.unstable, **({"extra": dict(kc.extra)} if kc.extra else {}),
        **({"derived_from_rate": list(kc.derived_from_rate)} if getattr(kc, "derived_from_rate", None) else {}),
    }
    if kc.dram_bytes is None or kc.dram_bytes <= 0 or kc.unstable:
        why = "unstable across launches" if kc.unstable else "no DRAM byte counter"
        notes.append(f"L4: counters matched but {why}: stage A/B analytic result kept, confidence not raised")
        return m, bytes_est, confidence
    measured_bytes = kc.dram_bytes * n_l
    out["bytes_model"] = bytes_est
    out["bytes_measured"] = measured_bytes
    out["flops_useful"] = flops_est
    if kc.flops_issued:
        out["flops_issued"] = kc.flops_issued * n_l
        out["padding_waste_ratio"] = out["flops_issued"] / flops_est if flops_est > 0 else None
    out["bytes_measured_over_model"] = measured_bytes / bytes_est if bytes_est > 0 else None
    mm = _metrics(measured_bytes, flops_est, t_s, peak_bw, peak_flops)
    notes.append("stage C: roofline_pct uses MEASURED DRAM bytes on the memory axis and the model's USEFUL "
                 f"FLOPs on the compute axis ({kc.source}, {kc.launches} launch(es) averaged); measured/model "
                 f"bytes = {measured_bytes / bytes_est:.2f}" if bytes_est > 0 else "stage C: measured bytes")
    from roofline.counters.ncu import rate_notes
    notes.extend(rate_notes(kc))
    return mm, measured_bytes, "high"


def _verbatim_pct(e: Entry):
    """pct_gpu_time exactly as the Top-N wrote it (40 stays 40, not 40.0)."""
    raw = e.raw.get("pct_gpu_time") if isinstance(e.raw, dict) else None
    return raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == e.pct_gpu_time else e.pct_gpu_time


def _verbatim_lps(e: Entry, regime: str | None, reg):
    """launches_per_step as the Top-N wrote it: a count stays an integer."""
    if reg is None:
        return None
    try:
        raw = e.raw["regimes"][regime]["launches_per_step"]
    except (KeyError, TypeError):
        raw = None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == reg.launches_per_step:
        return raw
    v = reg.launches_per_step
    return int(v) if float(v).is_integer() else v


def _light(e: Entry) -> dict:
    kind = classify(e.name, e.classification)
    return {"name": e.name, "short_name": e.short_name or _short_name(e.name),
            "op_class": contract.seed_op_class(kind), "op_kind": kind, "pct_gpu_time": e.pct_gpu_time}


def analyze(topn: TopN, env: Env, config: dict | None, peaks: Peaks, *, stage: str | None = None,
            counters: list | None = None, head_threshold_pct: float = HEAD_THRESHOLD_PCT, head_cap: int = HEAD_CAP,
            inputs_meta: dict | None = None) -> dict:
    """Run the section-3 procedure and return the artifact (a JSON-ready dict). Never raises for a
    problem inside one entry (L2/L5 per entry); raises only on programming errors outside the loop,
    which the hook turns into skill_errors[]."""
    art: dict[str, Any] = {
        "skill": SKILL, "skill_version": SKILL_VERSION, "gfx": env.gfx, "gpu_name": env.gpu_name,
        "peaks": peaks.to_artifact(), "stage": None, "entries": [], "ranking_by_pct": [],
        "ranking_by_expected_gain": [], "degraded": [], "skill_errors": [],
        "head_threshold_pct": head_threshold_pct, "head_cap": head_cap,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs": inputs_meta or {"topn": topn.path, "env": env.path},
    }
    if topn.round is not None:
        art["round"] = topn.round
    # 0. scope to the head: biggest first, >= threshold, capped; the rest is absent, not degraded
    order = sorted(topn.entries, key=lambda e: (-(e.pct_gpu_time if _finite(e.pct_gpu_time) else -1.0), e.index))
    head, nonfinite = [], []
    for e in order:
        if not _finite(e.pct_gpu_time):
            nonfinite.append(e)
        elif e.pct_gpu_time >= head_threshold_pct:
            head.append(e)
    over_cap = head[head_cap:]
    head = head[:head_cap]
    art["skipped"] = {"below_threshold": sum(1 for e in topn.entries if _finite(e.pct_gpu_time)
                                             and e.pct_gpu_time < head_threshold_pct),
                      "over_cap": [e.name for e in over_cap]}
    all_light = [_light(e) for e in topn.entries if _finite(e.pct_gpu_time)]
    # counters (stage C): match once
    matched: dict[str, Any] = {}
    if counters is not None:
        from roofline.counters import match

        matched, unmatched = match([{"name": e.name, "short_name": e.short_name} for e in head], counters)
        art["unmatched_counters"] = list(unmatched)
    any_captured = any(e.shapes for e in head)
    art["stage"] = stage or ("C" if matched else ("B" if any_captured else "A"))
    for e in nonfinite:
        art["degraded"].append({"name": e.name, "reason": "; ".join(e.problems) or "pct_gpu_time is not a number"})
    for e in head:
        light = next(x for x in all_light if x["name"] == e.name and x["pct_gpu_time"] == e.pct_gpu_time)
        try:
            ent, _info = analyze_entry(e, topn, env, config, peaks, art["stage"], matched.get(e.name), all_light)
        except EntryError as exc:
            ent = _degraded_entry(e, light, str(exc))
            art["degraded"].append({"name": e.name, "reason": str(exc)})
        except Exception as exc:  # L5 inside one entry: degrade it, record the error, go on
            ent = _degraded_entry(e, light, f"internal error: {exc.__class__.__name__}: {exc}")
            art["degraded"].append({"name": e.name, "reason": f"internal error: {exc.__class__.__name__}: {exc}"})
            art["skill_errors"].append({"where": f"entry {e.name}", "error": f"{exc.__class__.__name__}: {exc}",
                                        "traceback": traceback.format_exc(limit=4)})
        art["entries"].append(contract.complete_entry(ent))
    art["ranking_by_pct"], art["ranking_by_expected_gain"] = rankings(art["entries"])
    return art


def _degraded_entry(e: Entry, light: dict, reason: str) -> dict:
    regime = "decode" if "decode" in e.regimes else next(iter(e.regimes), None)
    r = e.regimes.get(regime) if regime else None
    return {"name": e.name, "short_name": light["short_name"], "pct_gpu_time": _verbatim_pct(e),
            "regime": regime, "op_class": light["op_class"], "op_kind": light["op_kind"], "modeled": False,
            "editable": e.editable, "t_ms": r.base_latency_ms if r else None,
            "launches_per_step": _verbatim_lps(e, regime, r),
            "bound_type": "unknown", "headroom_class": "unknown", "confidence": "low", "suspect": False,
            "attainable_speedup": None, "expected_e2e_gain_pct": None, "byte_reduction_levers": [],
            "route": "host_side" if e.editable is False else "pct_fallback",
            "route_reason": routing.ROUTES["host_side" if e.editable is False else "pct_fallback"],
            "notes": f"degraded (L2): {reason}"}


def gain_rank_key(e: dict) -> tuple[float, bool]:
    """What ranking_by_expected_gain sorts on: the expected e2e gain of an entry with a verdict at
    medium or high confidence; for every other entry its pct_gpu_time, the most it could give (a
    head without a verdict is never buried below a +0.00% saturated one). -> (key %, has_gain)."""
    if (e.get("headroom_class") not in (None, "unknown") and e.get("confidence") in ("medium", "high")
            and e.get("expected_e2e_gain_pct") is not None):
        return float(e["expected_e2e_gain_pct"]), True
    return float(e["pct_gpu_time"]), False


def rankings(entries: list[dict]) -> tuple[list[str], list[str]]:
    """Both rankings, side by side (section 2), so the consumer sees the disagreement instead of a
    blend. By expected gain: see gain_rank_key; ties go to the larger pct_gpu_time."""
    by_pct = [e["name"] for e in sorted(entries, key=lambda e: -e["pct_gpu_time"])]
    by_gain = sorted(entries, key=lambda e: (-gain_rank_key(e)[0], -e["pct_gpu_time"], not gain_rank_key(e)[1]))
    return by_pct, [e["name"] for e in by_gain]

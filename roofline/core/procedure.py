"""One head entry through the procedure of docs/method.md sections 1-5, as named steps a reader can test
one by one (roofline.core.analysis runs them over the heads and assembles the artifact):

  entry_head (Head) -> place_regime (Placement) -> check_modelable -> model_work (Work; or measured_work:
  no model, but counters) -> logical_time -> compute_roof -> choose_byte_model -> apply_stage_c
  -> cap_confidence -> record_figures (Figures) -> record_target -> at_compute_wall (Target)
  -> verdict_flags (Flags) -> attainable_speedup -> record_headroom (Verdict) -> necessary.record (Necessity)
  -> entry_fields (the entry) -> route_and_levers

Each step returns a frozen value (roofline.core.entry: Head, Placement, Figures, Target, Flags, Verdict)
and appends its notes to `notes` (in reading order); the artifact entry is written once from those
values (entry.entry_fields), then the necessity and the levers are read off it. Pure. Units: ms (per
launch unless *_logical_*), bytes, FLOPs, /s.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from roofline.core import necessary, opclasses, routing
from roofline.core.entry import (Figures, Flags, Head, Levers, Placement, Sides, Target, Verdict, entry_fields,
                                 with_levers)
from roofline.core.classify import classify, is_splitk_reduce, short_name as _short_name
from roofline.io.errors import EntryError
from roofline.core.inputs import Entry, Env, TopN
from roofline.core.models import ModelResult
from roofline.peaks import DTYPE_BYTES, Peaks, norm_dtype
from roofline.core.roofmath import _compute_peak, _feasible, _finite, _metrics, _min_conf  # noqa: F401  (_finite re-exported)
from roofline.core.regimes import REAL_TIME_PCT, pick_regime, regime_shares, regime_times_ms, share_note  # noqa: F401  (re-exported)
from roofline.core.residency import cache_residency, _flag_rows_over_roof
from roofline.core.shapes import work_mix
from roofline.io.values import UNKNOWN
from roofline.core.merge import apply_stage_c, explained_by_mix  # noqa: F401  (steps of this procedure: stage C's merge)

DISPATCH_FLOOR_MS = 0.005      # ~5 us: a launch this short is timed by dispatch, not by its work
LATENCY_UTIL = 0.60            # both utils under this (above the dispatch floor) => latency-bound
SUSPECT_LOW = 0.001            # roofline_pct under this is as impossible as one above 1.0
BOUND_TYPES = ("memory", "compute", "latency", UNKNOWN)   # CLOSED set
HEADROOM_CLASSES = ("underperforming", "moderate", "saturated", UNKNOWN)


def resolve_dtypes(e: Entry, env: Env) -> dict[str, Any]:
    md = norm_dtype(env.model_dtype) if env.model_dtype else None
    act = norm_dtype(e.dtypes.get("act")) or md
    weight = norm_dtype(e.dtypes.get("weight")) or md or act
    if act is None:
        raise EntryError("no dtype: the Top-N gives this entry no dtypes, and the env report no model_dtype: give "
                         "it with `roofline topn TRACE --model-dtype bf16` or in the env report (docs/env_report.md)")
    # NB: an fp8/fp4 activation model still writes 16-bit outputs (bf16) by default; an integer or
    # bool tensor (sort keys, indices, masks) writes its own dtype.
    out = norm_dtype(e.dtypes.get("out")) or (act if act not in ("fp8", "fp4", "fp4x2") else "bf16")
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


def entry_head(e: Entry) -> tuple[Head, str]:
    """What every entry has, modelled or not; and the finer op kind that picks the model."""
    # op_class is the contract's closed set in the artifact (the class's seed_class); the class itself
    # (norm, quant, comm, ...) picks the model and the prior here and is kept as op_kind
    op_class = classify(e.name, e.classification)
    head = Head(e.name, e.short_name or _short_name(e.name), _verbatim_pct(e), opclasses.seed_class(op_class),
                op_class, e.editable)
    return head, op_class


def place_regime(e: Entry, topn: TopN, notes: list[str], regime: str | None = None):
    """The e2e-critical regime (or the one asked for) and its timing, with its share of the GPU time
    (regime_pct_gpu_time: what its gain is computed on); returns (Placement, the Regime record)."""
    if regime is None:
        regime, why = pick_regime(e, topn)
    else:
        why = f"the {regime} regime, analysed beside the kernel's e2e-critical one"
    reg = e.regimes[regime]
    place = Placement(regime, reg.base_latency_ms, _verbatim_lps(e, regime, reg), e.launches_per_logical_op,
                      regime_shares(e, topn)[regime])
    notes.append(why)
    notes.extend(n for n in [share_note(e, topn)] if n)
    raw = e.raw if isinstance(e.raw, dict) else {}
    notes.extend(raw[k] for k in ("regime_note", "link_note") if isinstance(raw.get(k), str))
    # a Top-N whose regime topn inferred from the shapes (no step ranges) says so in every entry
    tnotes = topn.raw.get("notes") if isinstance(topn.raw, dict) else None
    notes.extend(n for n in (tnotes if isinstance(tnotes, list) else [])
                 if isinstance(n, str) and n.startswith("ASSUMED: regime"))
    return place, reg


def check_modelable(e: Entry, op_class: str, peaks: Peaks, counters: Any | None = None) -> None:
    """Raise EntryError (L2) for an entry no model may be put on (counters with DRAM bytes: measured_work)."""
    oc = opclasses.get(op_class)
    if (oc is None or not oc.has("model")) and not (counters is not None and counters.dram_bytes):
        raise EntryError(opclasses.not_modelled_reason(op_class, e.raw if isinstance(e.raw, dict) else {}))
    no_roof = opclasses.missing_roof_reason(peaks, op_class)
    if no_roof:
        raise EntryError(no_roof)
    if is_splitk_reduce(e.name):
        raise EntryError("split-K reduce kernel: it sums the partial results of a GEMM launched just before it, so "
                         "it is half of that GEMM's logical op, not a GEMM of its own; analyse the pair as one "
                         "op (roofline topn folds the reduce into its GEMM's time)")


@dataclass
class Work:
    """The work mix of one entry: its shapes (launch weights, own dtypes, own times) and the
    class model's result per shape; `res` is the launch-weighted result of one launch."""
    dt: dict
    shapes: list
    weights: list
    shape_dts: list
    shape_t_ms: list
    shape_launches: list | None
    shape_source: str
    dts: list
    results: list
    res: ModelResult


def model_work(op_class: str, e: Entry, env: Env, config: dict | None, regime: str, notes: list[str]) -> Work:
    """Dtypes, shapes (captured or stage-A) and the class model's candidates on them."""
    # the shapes first: an entry with neither shapes nor dtypes degrades for its shapes, the cause
    shapes, weights, shape_dts, shape_t_ms, shape_launches, shape_source, assumed, mix_notes = work_mix(
        op_class, e, env, config, regime)
    dt = resolve_dtypes(e, env)
    notes += mix_notes
    dts = [_shape_dtypes(dt, o) for o in shape_dts]
    model = opclasses.get(op_class).model
    results: list[ModelResult] = [model(s, d) for s, d in zip(shapes, dts)]
    res = results[0]
    notes += res.assumptions
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
    return Work(dt, shapes, weights, shape_dts, shape_t_ms, shape_launches, shape_source, dts, results, res)


def measured_work(e: Entry, env: Env, counters: Any | None, why: EntryError, notes: list[str],
                  t_ms: float | None = None) -> Work:
    """No byte/FLOP model (`why`) but counters with DRAM bytes (of its own launches, ``t_ms`` each): the work."""
    from roofline.core.merge import measured_result

    res = measured_result(counters, e.launches_per_logical_op, norm_dtype(env.model_dtype), t_ms)
    if res is None and counters is not None:
        lack = "they hold no DRAM bytes (collect dram__bytes.sum, e.g. ncu --set roofline)" if not counters.unstable \
            else "they differ across launches" + (f" and time {counters.t_ms:.4g} ms per launch against this entry's "
                                                  f"{t_ms:.4g} ms: not its launches" if counters.t_ms and t_ms else "")
        raise EntryError(f"{why}; the matched counters cannot stand in: {lack}")
    if res is None:
        raise why
    try:
        dt = resolve_dtypes(e, env)
    except EntryError:
        md = norm_dtype(env.model_dtype)
        dt = {k: md for k in ("act", "weight", "out", "kv")} | {f"{k}_bytes": DTYPE_BYTES.get(md) for k in
                                                                ("act", "weight", "out", "kv")}
    notes.append(f"no byte/FLOP model ({why}): the matched counters are the work")
    return Work(dt, [{}], [1.0], [{}], [], None, "measured", [dt], [res], res)


def launches_per_logical_op(e: Entry, op_class: str, w: "Work", reg, config: dict | None, notes: list[str]) -> int:
    """The launches forming one logical op: the class's rule where it has one and it applies (a fused
    MoE layer: launches per step over config.json's MoE layers), else the Top-N's count."""
    oc = opclasses.of(op_class)
    n = oc.launches(e, w, reg, config, notes)
    return e.launches_per_logical_op if n is None else n


def logical_time(reg, place: Placement, n_l: int, notes: list[str]) -> tuple[Placement, float]:
    """Per-launch vs per-logical-op: the model counts one logical op; it is compared with the
    summed time of the `n_l` launches forming it. Returns (the placement with it, t_s of one logical op)."""
    t_logical_ms = reg.base_latency_ms * n_l
    notes.append(f"unit: one logical op = {n_l} launch(es), {t_logical_ms:.6g} ms"
                 if n_l > 1 else f"unit: one launch, {t_logical_ms:.6g} ms")
    return replace(place, launches_per_logical_op=n_l, t_logical_op_ms=t_logical_ms), t_logical_ms / 1e3


def compute_roof(peaks: Peaks, dtype: str, shape_source: str, notes: list[str]) -> tuple[float | None, str, float]:
    """(compute peak FLOP/s, its dtype, the roof's run-to-run spread used as feasibility slack)."""
    peak_flops, cdtype, pnotes = _compute_peak(peaks, dtype)
    notes += pnotes
    # the compute roof's own run-to-run spread, where the FLOP count is exact (captured shapes)
    tol_c = peaks.compute_roof_spread(cdtype) if shape_source == "captured" else 0.0
    return peak_flops, cdtype, tol_c


def choose_byte_model(op_class: str, res: ModelResult, t_s: float, peak_bw: float, peak_flops: float | None,
                      tol_c: float, notes: list[str]) -> tuple[list[dict], dict]:
    """Evaluate every candidate byte model; feasibility rule: the largest feasible one
    (attention: the mean context). Returns (alternatives, the chosen one)."""
    alts = []
    for c in res.candidates:
        m = _metrics(c.bytes_est, c.flops_est, t_s, peak_bw, peak_flops)
        alts.append({"model": c.label, "bytes_est": c.bytes_est, "flops_est": c.flops_est,
                     "roofline_pct_raw": m["roofline_pct_raw"], "hbm_util": m["hbm_util"],
                     "feasible": _feasible(m, tol_c), "note": c.note, "_m": m})
    feasible = [a for a in alts if a["feasible"]]
    chosen = max(feasible, key=lambda a: a["bytes_est"]) if feasible else min(alts, key=lambda a: a["bytes_est"])
    oc = opclasses.of(op_class)
    own = oc.choose_model(alts, notes)
    if own is not None:
        # the class's own rule (attention: the mean context, the max only the top of the range)
        chosen = own
    elif len(alts) > 1:
        if feasible:
            notes.append(f"byte model: {chosen['model']} (largest feasible of {', '.join(a['model'] for a in alts)})")
        else:
            notes.append("every candidate byte model is infeasible: the class model is wrong here")
        for a in alts:
            if not a["feasible"]:
                notes.append(f"{a['model']} model implies {a['roofline_pct_raw']:.0%} of the roof: infeasible "
                             "(L3 case; stage-C counters decide)")
    return alts, chosen


def cap_confidence(peaks: Peaks, roof_axis: str, cdtype: str, confidence: str, notes: list[str]) -> str:
    """Confidence caps from the peaks: a low-confidence table, an unvalidated compute roof."""
    if peaks.confidence == "low":
        confidence = "low"
        notes.append("peaks are low-confidence (L1 / ambiguous device): display only")
    if roof_axis == "compute":
        cc = peaks.compute_confidence(cdtype)
        if cc == "low":
            notes.append(f"the {cdtype} compute peak is not validated (docs/method.md section 8): the compute-axis "
                         "ratio is not usable for ranking")
        confidence = _min_conf(confidence, "high" if cc == "high" else cc)
    return confidence


def record_figures(op_class: str, w: Work, m: dict, bytes_est: float, chosen: dict, alts: list[dict], cdtype: str,
                   e: Entry, peak_bw: float, peaks: Peaks, notes: list[str]) -> Figures:
    """The model's figures: bytes/FLOPs, utilizations, roof axis, dtypes, shapes (per shape where
    several), byte model and its alternatives."""
    rates = {k: v for k, v in m.items() if k not in ("roofline_pct_raw", "roof_axis")}
    shapes_used = per_shape = alternatives = None
    if len(w.shapes) > 1:
        shapes_used = [{"shape": {k: v for k, v in sh.items() if k != "seq_len_candidates"},
                        "weight": wt, **({"dtypes": {k: d[k] for k in ("act", "out")}} if w.shape_dts[i] else {})}
                       for i, (sh, wt, d) in enumerate(zip(w.shapes, w.weights, w.dts))]
        if w.shape_t_ms:
            per_shape = _per_shape(w, e, [a["model"] for a in alts].index(chosen["model"]), peak_bw, peaks)
            _flag_rows_over_roof(per_shape, peaks, notes)
    if len(alts) > 1:
        alternatives = [{k: v for k, v in a.items() if k != "_m"} for a in alts]
        opclasses.of(op_class).model_notes(alts, notes)
    return Figures(bytes_est, chosen["flops_est"], rates, m["roof_axis"], cdtype,
                   {k: w.dt[k] for k in ("act", "weight", "out", "kv")},
                   {k: v for k, v in w.shapes[0].items() if k not in ("seq_len_candidates",)}, w.shape_source,
                   chosen["model"], m["roofline_pct_raw"], shapes_used, per_shape, alternatives)


def record_target(op_class: str, regime: str, alts: list[dict], pct_raw: float, measured: bool,
                  paged: bool | None = None, notes: list[str] | None = None) -> Target:
    """The class prior (target efficiency), the range over the feasible byte models (none where
    stage C measured the bytes) and the reported ratio (clamped into [0, 1], the raw one kept)."""
    key, why = opclasses.of(op_class).prior(regime, {"paged": paged})
    tgt = routing.TARGET_EFF.get(key)
    if why and regime == "decode" and notes is not None:
        notes.append(f"target_eff {tgt:g}: {why}")
    feas_pcts = [a["roofline_pct_raw"] for a in alts if a["feasible"]]
    pct_range = speed_range = None
    if len(feas_pcts) > 1 and not measured:
        lo, hi = min(feas_pcts), max(feas_pcts)
        pct_range = [lo, hi]
        if tgt:
            speed_range = [max(1.0, tgt / hi), max(1.0, tgt / lo)]
    return Target(tgt, pct_raw, min(max(pct_raw, 0.0), 1.0), pct_range, speed_range)


def at_compute_wall(tgt: Target, roof_axis: str, tol_c: float, hbm_util: float, cdtype: str,
                    notes: list[str]) -> tuple[Target, float]:
    """At the compute wall: the FLOPs are exact (captured shapes) and the excess over the roof is
    inside the roof's own measured run-to-run spread, so it is the denominator's uncertainty,
    not a wrong model: read as 100% of the roof (a verdict), raw ratio kept. Returns (the target
    with the flag, the ratio read)."""
    pct_raw = tgt.roofline_pct_raw
    if roof_axis == "compute" and 1.0 < pct_raw <= 1.0 / (1.0 - tol_c) and hbm_util <= 1.0:
        notes.append(f"at the compute wall: {pct_raw:.1%} of the {cdtype} envelope roof, inside the roof's "
                     f"measured run-to-run spread ({tol_c:.1%}: lowest recorded run vs the envelope): read as 100%")
        return replace(tgt, at_compute_wall=True), 1.0
    return tgt, pct_raw


def bound_of(hbm_util: float, compute_util: float, roof_axis: str, t_ms: float) -> str:
    """The bound type (docs/method.md section 3): latency when both utilizations are under
    LATENCY_UTIL or a launch is within the dispatch floor, else the roof axis. The one rule for an
    entry and for each of its shapes (per_shape)."""
    if t_ms <= DISPATCH_FLOOR_MS or (hbm_util < LATENCY_UTIL and compute_util < LATENCY_UTIL):
        return "latency"
    return roof_axis


def verdict_flags(roof_axis: str, m: dict, t_ms: float, pct_raw: float, bytes_est: float, peak_bw: float,
                  t_s: float, notes: list[str], l2_resident: bool = False, oc: opclasses.OpClass | None = None,
                  measured: bool = False) -> Flags:
    """Bound type and the no-verdict cases (dispatch floor, L3 suspect, served from the L2 without
    measured bytes, the class's own): whether a verdict may be given."""
    bound = bound_of(m["hbm_util"], m["compute_util"], roof_axis, t_ms)
    verdict, dispatch, suspect, upper = True, False, False, None
    if t_ms <= DISPATCH_FLOOR_MS:
        # No verdict: the launch is timed by dispatch, not by its transfer or math.
        dispatch, bound, verdict = True, "latency", False
        notes.append(f"dispatch-bound: {t_ms * 1e3:.2f} us per launch is within launch-overhead "
                     "scale (~5 us): no verdict; the lever is fusion / graph capture")
    if not (SUSPECT_LOW <= pct_raw <= 1.0) or bytes_est <= 0:
        # L3: an impossible ratio is the model being wrong, never a verdict.
        suspect, upper, verdict = True, peak_bw * t_s, False
        notes.append(f"L3 suspect: roofline_pct_raw {pct_raw:.3g} is outside [{SUSPECT_LOW}, 1]; shown clamped, "
                     f"no verdict; the model's bytes may not exceed {peak_bw * t_s:.4g} (peak_bw x t); "
                     "stage-C counter measurement candidate")
    if l2_resident and not measured:
        # the L2 serves it: the HBM ratio is no evidence about the kernel (cache_residency); the bound
        # type stays the utilizations' (the contract defines it by them)
        verdict = False
    if oc is not None and oc.no_verdict:
        # the class says the roof cannot judge it (opclasses/, no_verdict); the bound type stays the
        # utilizations' (the contract defines it by them)
        verdict = False
        notes.append(oc.no_verdict)
    return Flags(bound if bound in BOUND_TYPES else UNKNOWN, verdict, suspect, dispatch, suspect, upper, l2_resident)


def attainable_speedup(tgt: float | None, pct_raw: float, t_ms: float, notes: list[str]) -> tuple[float | None, float | None]:
    """target / achieved (at least 1x), capped at the dispatch floor: no launch gets faster than the
    same ~5 us that makes a launch dispatch-bound (continuous at the floor: no cliff). Returns
    (the speedup, the uncapped one where the cap applied, else None)."""
    attain = max(1.0, tgt / pct_raw) if (tgt and pct_raw > 0) else None
    if attain is not None:
        floor_cap = max(1.0, t_ms / DISPATCH_FLOOR_MS)
        if attain > floor_cap:
            notes.append(f"attainable speedup capped at the dispatch floor: {t_ms * 1e3:.2f} us / "
                         f"{DISPATCH_FLOOR_MS * 1e3:g} us = {floor_cap:.3g}x (the roofline alone says {attain:.3g}x)")
            return floor_cap, attain
    return attain, None


def record_headroom(share_pct: float, tgt: float | None, pct_raw: float, attain: float | None, verdict: bool,
                    confidence: str, uncapped: float | None = None, groups: list | None = None) -> Verdict:
    """Headroom class, speedup and e2e gain: a verdict only when allowed and not low-confidence
    (else provisional); each measured group of like launches judged on the same rules."""
    # NB: the gain is on the share of GPU time of the regime analysed, never the kernel's whole share
    gain = share_pct * (1.0 - 1.0 / attain) if attain else None
    band = routing.headroom_class(pct_raw, tgt) if tgt else UNKNOWN
    if verdict and confidence != "low":
        v = Verdict(band, attain, gain, confidence, None, uncapped)
    else:
        v = Verdict(UNKNOWN, attain if verdict else None, gain if verdict else None, confidence,
                    band if verdict else None, uncapped)
    for g in (x for x in groups or [] if x.get("roofline_pct") is not None):
        # each group of like launches on the entry's rules (no band for one timed by dispatch)
        g["bound_type"] = bound_of(g["hbm_util"], g["compute_util"], g["roof_axis"], g["t_ms"])
        g["headroom_class"] = routing.headroom_class(g["roofline_pct"], tgt) if tgt and g["t_ms"] > DISPATCH_FLOOR_MS else UNKNOWN
    return v


def route_and_levers(out: dict, op_class: str, all_light: list[dict], info: dict, dt: dict,
                     necessary_levers: list | None = None, ctx=None, notes: list[str] | None = None) -> Levers:
    """Route (docs/method.md section 5; by the larger of the tuning and the avoidable gain) and levers
    with their evidence (roofline.core.levers: levers_detail; byte_reduction_levers on saturated heads
    only, docs/artifact.md; every other lever goes to other_levers)."""
    from roofline.core import levers

    route = routing.route_by_gain(out)
    detail, byte_red, other = levers.apply(out, op_class, necessary_levers or [], all_light, info, dt, ctx, notes,
                                           routing.other_levers(out))
    lv = Levers(route, routing.route_reason(out, route), other, detail, byte_red)
    # the class's last word (a collective's levers replace these; an MoE's infeasible all-expert model)
    return opclasses.of(op_class).finish_levers(out, lv, all_light, info, dt)


def analyze_entry(e: Entry, topn: TopN, env: Env, config: dict | None, peaks: Peaks, stage: str,
                  counters: Any | None, all_light: list[dict], regime: str | None = None) -> tuple[dict, dict]:
    """One head entry in one regime (default: its e2e-critical one) -> (artifact entry, model info).
    Raises EntryError to degrade it (L2)."""
    notes: list[str] = list(e.notes)
    head, op_class = entry_head(e)
    if e.problems:
        raise EntryError("; ".join(e.problems))
    place, reg = place_regime(e, topn, notes, regime)
    check_modelable(e, op_class, peaks, counters)
    oc = opclasses.of(op_class)
    # a collective: the roofline judges its transfer, not its wait for the other ranks
    reg, split = oc.judged_time(e, reg, notes)
    try:
        w = model_work(op_class, e, env, config, place.regime, notes)
    except EntryError as exc:
        w = measured_work(e, env, counters, exc, notes, reg.base_latency_ms)   # re-raises exc without usable counters
    n_l = launches_per_logical_op(e, op_class, w, reg, config, notes)
    place, t_s = logical_time(reg, place, n_l, notes)
    peak_bw, roof = opclasses.memory_roof(peaks, op_class)
    peak_flops, cdtype, tol_c = compute_roof(peaks, w.res.compute_dtype, w.shape_source, notes)
    alts, chosen = choose_byte_model(op_class, w.res, t_s, peak_bw, peak_flops, tol_c, notes)
    l2_resident = cache_residency(op_class, w, chosen, peaks, notes)
    if counters is not None and w.shape_source == "captured":
        ci = alts.index(chosen)
        counters = explained_by_mix(counters, [(wt, r.candidates[min(ci, len(r.candidates) - 1)].bytes_est,
                                                r.candidates[min(ci, len(r.candidates) - 1)].flops_est)
                                               for wt, r in zip(w.weights, w.results)], notes)
    m, bytes_est, confidence, cdtype, peak_flops, meas = apply_stage_c(op_class, chosen, w.shape_source, counters,
                                                                       peaks, cdtype, peak_flops, t_s, peak_bw, n_l, notes)
    measured = meas is not None and meas.get("bytes_measured") is not None
    confidence = cap_confidence(peaks, m["roof_axis"], cdtype, confidence, notes)
    fig = record_figures(op_class, w, m, bytes_est, chosen, alts, cdtype, e, peak_bw, peaks, notes)
    paged = w.shapes[0].get("paged")
    tgt = record_target(op_class, place.regime, alts, fig.roofline_pct_raw, measured,
                        paged if isinstance(paged, bool) else None, notes)
    tgt, pct_raw = at_compute_wall(tgt, fig.roof_axis, tol_c, m["hbm_util"], cdtype, notes)
    flags = verdict_flags(fig.roof_axis, m, reg.base_latency_ms, pct_raw, bytes_est, peak_bw, t_s, notes, l2_resident,
                          oc, measured)
    attain, uncapped = attainable_speedup(tgt.target_eff, pct_raw, reg.base_latency_ms, notes)
    sides = Sides(None if roof == "hbm" else roof, split, attain if split is not None else None, meas)
    attain = oc.kernel_speedup(split, attain, notes)
    verdict = record_headroom(place.regime_pct_gpu_time, tgt.target_eff, pct_raw, attain, flags.verdict, confidence,
                              uncapped, meas.get("measured_groups") if meas is not None else None)
    ci = alts.index(chosen)
    nec = necessary.assess(op_class, w, ci, ctx := necessary.context(topn, env, config, place.regime, w, e, ci))
    need = necessary.record(nec, chosen["bytes_est"], chosen["flops_est"], peak_bw, peak_flops, place.regime_pct_gpu_time,
                            notes, peaks, meas.get("flops_issued") if meas is not None else None)
    out = entry_fields(head, place, sides, fig, tgt, flags, verdict, need)
    lv = route_and_levers(out, op_class, all_light, w.res.info, w.dt, nec.levers, ctx, notes)
    return with_levers(out, lv, notes), w.res.info


def _per_shape(w: "Work", e: Entry, cand_i: int, peak_bw, peaks) -> list[dict]:
    """One row per captured shape of a multi-shape kernel name: its launches, mean time and
    figures on the byte model the entry uses, so a reader sees which shape is slow."""
    rows = []
    launches = w.shape_launches or [None] * len(w.shapes)
    for sh, wt, r, t_ms, n in zip(w.shapes, w.weights, w.results, w.shape_t_ms, launches):
        c = r.candidates[min(cand_i, len(r.candidates) - 1)]
        pf, _, _ = _compute_peak(peaks, r.compute_dtype)
        row = {"shape": {k: v for k, v in sh.items() if k != "seq_len_candidates"}, "weight": wt, "t_ms": t_ms,
               "bytes_est": c.bytes_est, "flops_est": c.flops_est}
        if n is not None:
            row["launches"] = int(n) if float(n).is_integer() else n
        if t_ms > 0:
            m = _metrics(c.bytes_est, c.flops_est, t_ms / 1e3, peak_bw, pf)
            row.update(achieved_flops=m["achieved_flops"], achieved_bw_bytes_s=m["achieved_bw_bytes_s"],
                       hbm_util=m["hbm_util"], compute_util=m["compute_util"], roof_axis=m["roof_axis"],
                       roofline_pct=m["roofline_pct_raw"], _cdtype=r.compute_dtype,
                       bound_type=bound_of(m["hbm_util"], m["compute_util"], m["roof_axis"], t_ms))
        rows.append(row)
    return rows


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
    return v if v is None or not float(v).is_integer() else int(v)

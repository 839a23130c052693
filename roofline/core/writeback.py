"""Stage C's write-back of one re-run's timing into its artifact entry (docs/method.md sections 6
and 9): the like-for-like ratio (ladder level vs library kernel, both isolated under one L2 state),
its spread, the projected in-run time, the isolation cost, the verdict of the one noise-band judge
(roofline/core/judge.py) and the entry's note. The analysis runs it last (`merge_reruns`), for
every counter record that carries a re-run's timing (roofline/counters/records.py); the measured
counters themselves went through the stage-C merge of the analysis (roofline/core/merge.py).
Pure: dicts in, the entry updated in place.
"""
from __future__ import annotations

from roofline.peaks.roof import roofline
from roofline.core.judge import judge_isolated


def _roof_pct(entry: dict, t_ms: float, peaks: dict) -> float | None:
    """The fraction of the roof the entry's work (bytes_est, flops_est of one logical op) reaches in
    t_ms on the artifact's roofs (roofline.peaks.roof, the one arithmetic); None without an HBM roof."""
    bw = peaks.get("hbm_bw_bytes_s")
    if not bw:
        return None
    pf = (peaks.get("flops") or {}).get(entry.get("compute_dtype"))
    return roofline(entry["bytes_est"], entry.get("flops_est") or 0.0, t_ms / 1e3, bw, pf)["roofline_pct_raw"]


def merge_reruns(art: dict, timings: dict[str, dict], note: str | None = None) -> None:
    """Each re-run's timing (entry name -> the re-run's measurement) written onto its entry, in the
    artifact's entry order; `note` (an L4 line) appended to each of those entries."""
    for e in [x for x in art["entries"] if x["name"] in timings and x.get("modeled")]:
        write_back(art, e["name"], timings[e["name"]])
        if note:
            e["notes"] += f"; {note}"


def write_back(art: dict, name: str, meas: dict) -> dict:
    """Merge one re-run into entry `name`. `meas`: {"problems": [...], "ladder_level", "ladder_t_ms"
    (+p20/p80), "cublas_t_ms" (+p20/p80), "check_ok", "l2_mode", "counters": {...}|None,
    "dispatch_reason"}, times summed over the problems of one logical op. Returns the entry.

    The verdict compares like with like: the best ladder level against the library kernel, both
    isolated under the same L2 state, and projects that ratio onto the in-run time. In-run vs
    isolated is kept only as `isolation_ratio` (what isolation itself costs the library kernel)."""
    e = next(x for x in art["entries"] if x["name"] == name)
    peaks = art["peaks"]
    current = e.get("t_logical_op_ms") or e["t_ms"] * e.get("launches_per_logical_op", 1)
    lad, lib = meas.get("ladder_t_ms"), meas.get("cublas_t_ms")
    library_in_run = _is_library_kernel(e) or launched_by_library_op(e, meas.get("library"))
    m = {
        "isolated": True, "l2_mode": meas.get("l2_mode"), "l2_mode_reason": meas.get("l2_mode_reason"),
        "problems": meas.get("problems"), "dispatch_reason": meas.get("dispatch_reason"),
        "ladder_level": meas.get("ladder_level"), "ladder_t_ms": lad,
        "ladder_t_ms_p20": meas.get("ladder_t_ms_p20"), "ladder_t_ms_p80": meas.get("ladder_t_ms_p80"),
        "cublas_t_ms": lib, "cublas_t_ms_p20": meas.get("cublas_t_ms_p20"),
        "cublas_t_ms_p80": meas.get("cublas_t_ms_p80"), "check_ok": meas.get("check_ok"),
        "ladder_roofline_pct": _roof_pct(e, lad, peaks) if lad else None,
        "cublas_roofline_pct": _roof_pct(e, lib, peaks) if lib else None,
        "current_t_ms": current, "predicted_attainable_speedup": e.get("attainable_speedup"),
        "device": meas.get("device"), "time_utc": meas.get("time_utc"),
        "library": meas.get("library", "cuBLAS (torch.mm)"),
        **({"ladder_build": meas["ladder_build"]} if meas.get("ladder_build") else {}),
    }
    grouped = [q for q in (meas.get("problems") or []) if q.get("routing")]
    if grouped:   # the drawn routing and the experts it hit, beside the model's expectation
        mix = meas.get("counters") or {}
        merged = e.get("bytes_measured") if mix.get("dram_bytes") and not mix.get("error") else None
        m["routing"], m["routing_bytes"] = routing_bytes(e, grouped, merged)
    speedup, basis = _measured_speedup(m, meas, current, lad, lib, library_in_run)
    m["speedup_basis"] = basis
    m["best"] = "ladder" if (lad and (not lib or lad < lib)) else "cublas"
    j = judge_isolated(speedup, e.get("attainable_speedup"),
                       words="like-for-like" if basis.startswith("ladder vs library") else "rerun")
    verdict, contradiction = j["verdict"], j["model_contradicted"]
    if j["outcome"] == "gain" and not basis.startswith("ladder vs library") and m["best"] == "cublas" and lad:
        # the best isolated kernel is the library op's: the gain is the library's, not the ladder's
        verdict += (f" (by the library op {m['library']}, not the ladder: the ladder level ran "
                    f"{lib / lad:.3f}x the library)")
    m.update(measured_attainable_speedup=speedup, verdict=verdict, model_contradicted=contradiction)
    if meas.get("counters"):
        m["counters"] = meas["counters"]
    e["measured"] = m
    e["measured_attainable_speedup"] = speedup
    if contradiction:
        e["suspect_model"] = True
    e["model_contradicted"] = bool(e.get("model_contradicted")) or contradiction   # the artifact-level flag
    note = _rerun_note(m, lad, lib, speedup, basis, verdict, current)
    note += _routing_note(m)
    e["notes"] = (e.get("notes", "") + "; " + note).lstrip("; ")
    art["stage"] = "C"
    return e


def _measured_speedup(m: dict, meas: dict, current: float, lad, lib, library_in_run: bool) -> tuple[float, str]:
    """The measured speedup and its basis; writes the like-for-like ratio, its spread and the
    projected in-run time into m."""
    if lad and lib:
        m["isolation_ratio"] = lib / current
        ratio = lib / lad
        m["ladder_vs_library_speedup"] = ratio
        lo_hi = [meas.get("cublas_t_ms_p20"), meas.get("cublas_t_ms_p80"),
                 meas.get("ladder_t_ms_p20"), meas.get("ladder_t_ms_p80")]
        if all(lo_hi):
            m["ladder_vs_library_speedup_range"] = [lo_hi[0] / lo_hi[3], lo_hi[1] / lo_hi[2]]
        if library_in_run:
            # like for like: both isolated, same L2 state; projected onto the in-run time
            speedup, basis = ratio, "ladder vs library, both isolated"
        else:
            speedup, basis = current / min(lad, lib), "in-run kernel (not a library one) vs the best isolated"
        m["projected_in_run_t_ms"] = current / max(speedup, 1e-12)
    else:
        cands = {k: v for k, v in (("ladder", lad), ("cublas", lib)) if v}
        speedup, basis = current / min(cands.values()), "in-run vs isolated (no like-for-like pair)"
    return speedup, basis


def _rerun_note(m: dict, lad, lib, speedup: float, basis: str, verdict: str, current: float) -> str:
    """The entry's note on one re-run: times, basis, spread, verdict, projection, isolation cost."""
    rng = m.get("ladder_vs_library_speedup_range")
    lvl = f"L{m['ladder_level']}" + (f" ({m['ladder_build']})" if m.get("ladder_build") else "")
    note = (f"stage C re-run ({m['l2_mode'] or 'cold'} L2): ladder {lvl} {lad:.4g} ms vs library "
            f"{lib:.4g} ms isolated -> {speedup:.3f}x {basis}" if (lad and lib) else
            f"stage C re-run: {speedup:.3f}x {basis}")
    if rng:
        note += f" (p20-p80 spread {rng[0]:.3f}-{rng[1]:.3f}x)"
    note += f"; {verdict}"
    if "projected_in_run_t_ms" in m:
        note += f"; projected in-run {m['projected_in_run_t_ms']:.4g} ms (now {current:.4g} ms)"
    if "isolation_ratio" in m:
        note += f"; isolation costs the library {m['isolation_ratio']:.2f}x its in-run time (kept apart)"
    return note


def routing_bytes(e: dict, grouped: list[dict], bytes_measured: float | None) -> tuple[list[dict], dict]:
    """A grouped head's drawn routing per problem (its rule and the experts it hit, beside the
    model's expected experts_hit) and the model's bytes at each (the entry's op-class model at the
    grouped shape), per
    logical op (sum of count x problem, the work mix the counters measured), beside the measured
    bytes (the entry's, from this re-run's counters through the merge; None without). NB: the model's bytes are linear in the experts hit (one
    expert's N x K weights each), so at the drawn routing they are the model's figure moved by
    (drawn - expected) x one expert's weight bytes."""
    from roofline.core import opclasses
    from roofline.peaks import DTYPE_BYTES, norm_dtype

    model = opclasses.get(e.get("op_class")).model

    dts = e.get("dtypes") or {}
    dt = {}
    for k in ("act", "weight", "out"):
        dt[k] = norm_dtype(dts.get(k)) or norm_dtype(dts.get("act")) or "bf16"
        dt[f"{k}_bytes"] = DTYPE_BYTES[dt[k]]
    rows, tot = [], {"bytes_model_expected_hit": 0.0, "bytes_model_drawn_hit": 0.0}
    for q in grouped:
        res = model({"pairs": q["M"], "E": q["E"], "N": q["N"], "K": q["K"]}, dt)
        expected = res.candidates[0].bytes_est
        drawn = expected + (q["experts_hit_drawn"] - res.info["experts_hit"]) * res.info["expert_weight_bytes"]
        rows.append({"label": q.get("label"), "rule": q["routing"], "experts_hit_drawn": q.get("experts_hit_drawn"),
                     "experts_hit_model": q.get("experts_hit_model"), "bytes_model_expected_hit": expected,
                     "bytes_model_drawn_hit": drawn})
        tot["bytes_model_expected_hit"] += q["count"] * expected
        tot["bytes_model_drawn_hit"] += q["count"] * drawn
    tot["bytes_measured"] = bytes_measured
    if bytes_measured:
        tot["measured_over_model_drawn"] = bytes_measured / tot["bytes_model_drawn_hit"]
        tot["measured_over_model_expected"] = bytes_measured / tot["bytes_model_expected_hit"]
    return rows, tot


def _routing_note(m: dict) -> str:
    """The note's words on a grouped head's measured bytes against the model at the drawn routing."""
    rb = m.get("routing_bytes") or {}
    if not rb.get("bytes_measured"):
        return ""
    drawn = ", ".join(str(r["experts_hit_drawn"]) for r in m["routing"])
    expected = ", ".join(f"{r['experts_hit_model']:.1f}" for r in m["routing"] if r.get("experts_hit_model") is not None)
    return (f"; routing drawn ({drawn} experts hit; the model expects {expected}): measured "
            f"{rb['bytes_measured'] / 1e6:.4g} MB = {rb['measured_over_model_drawn']:.3f}x the model at the drawn "
            f"experts ({rb['bytes_model_drawn_hit'] / 1e6:.4g} MB), {rb['measured_over_model_expected']:.3f}x at "
            f"the expected ({rb['bytes_model_expected_hit'] / 1e6:.4g} MB)")


def launched_by_library_op(e: dict, library: str | None) -> bool:
    """True when the trace links the in-run kernel to the very op the re-run times as its library
    baseline (`torch._scaled_grouped_mm` <-> `aten::_scaled_grouped_mm` in the entry's aten_ops): then
    the in-run kernel IS that op's kernel (CUTLASS, editable or not) and the ladder-vs-library ratio
    is like for like."""
    import re

    ops = e.get("aten_ops") or {}
    fns = re.findall(r"torch\.(\w+)", library or "")
    return bool(fns) and any(f"aten::{f}" in ops for f in fns)


def _is_library_kernel(e: dict) -> bool:
    from roofline.core.classify import is_library_kernel

    return e.get("editable") is False or is_library_kernel(e.get("name", ""))

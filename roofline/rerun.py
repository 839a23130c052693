"""Stage C for GEMM heads: re-run the head's GEMM(s) in isolation through the ladder level the
dispatch table picks (cuBLAS beside it in the same process), check it first, time it, optionally
collect counters, write the measurement back into the artifact and record predicted vs actual in
the playbook (docs/method.md sections 6 and 9).

This module holds the CPU-side pieces, pure and tested without a GPU: the problems of a head
(`gemm_problems`), the dispatch (from the ladder), the write-back and its guards. The rest:
roofline/rerun_measure.py (timing on the device), roofline/rerun_counters.py (ncu / nsight-python
counters of the work mix), roofline/playbook.py (predicted vs actual), roofline/rerun_run.py (the
whole re-run of an artifact, for the hook and the CLI).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from roofline.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT
from roofline.errors import RerunError

# The ladder owns its dispatch (shape classes, the stopping rule, the table): re-exported here for
# stage C and for the callers that import them from roofline.rerun.
from roofline.ladder.dispatch import (  # noqa: F401
    DECODE_SKINNY_MAX_M, NOISE_BAND_ISOLATED, PREFILL_ALIGN, build_dispatch_table, choose_level,
    default_dispatch_table, dispatch_order, merge_benches, shape_class)


# The GEMMs of one logical op come from the head's op class registration (roofline/opclasses/:
# dense GEMM, the expert GEMMs of an MoE; [] for other classes), re-exported for stage C.
from roofline.opclasses import Problem, gemm_problems  # noqa: E402,F401


# --------------------------------------------------------------------------- write-back
def _roof_pct(entry: dict, t_ms: float, peaks: dict) -> float | None:
    t_s = t_ms / 1e3
    if entry.get("roof_axis") == "compute":
        pf = (peaks.get("flops") or {}).get(entry.get("compute_dtype"))
        return entry["flops_est"] / t_s / pf if pf else None
    return entry["bytes_est"] / t_s / peaks["hbm_bw_bytes_s"] if peaks.get("hbm_bw_bytes_s") else None


def guard_verdict(measured_speedup: float, predicted: float | None,
                  band: float = NOISE_BAND_ISOLATED) -> tuple[str, bool]:
    """The guards of docs/method.md section 9: sub-noise-band gains are not real; a measured speedup above the predicted
    attainable one means the model was wrong (the measurement wins). `band`: the isolated band."""
    contradiction = predicted is not None and measured_speedup > predicted * (1 + band)
    if measured_speedup < 1.0 - band:
        return "no real gain: the best isolated kernel is slower than the in-run kernel", contradiction
    if measured_speedup < 1.0 + band:
        return f"no real gain (inside the {band:.1%} isolated noise band)", contradiction
    if contradiction:
        return "measured speedup exceeds the predicted attainable: the model was wrong, the measurement wins", True
    return "real gain, within the prediction", False


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
    library_in_run = _is_library_kernel(e)
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
    }
    grouped = [q for q in (meas.get("problems") or []) if q.get("routing")]
    if grouped:   # the drawn routing and the experts it hit, beside the model's expectation
        m["routing"] = [{"label": q.get("label"), "rule": q["routing"], "experts_hit_drawn": q.get("experts_hit_drawn"),
                         "experts_hit_model": q.get("experts_hit_model")} for q in grouped]
    speedup, basis = _measured_speedup(m, meas, current, lad, lib, library_in_run)
    m["speedup_basis"] = basis
    m["best"] = "ladder" if (lad and (not lib or lad < lib)) else "cublas"
    verdict, contradiction = guard_verdict(speedup, e.get("attainable_speedup"))
    if basis.startswith("ladder vs library") and speedup < 1.0 - NOISE_BAND_ISOLATED:
        verdict = "no real gain: the ladder level is slower than the library kernel (like for like)"
    m.update(measured_attainable_speedup=speedup, verdict=verdict, model_contradicted=contradiction)
    if meas.get("counters"):
        m["counters"] = meas["counters"]
    e["measured"] = m
    e["measured_attainable_speedup"] = speedup
    if contradiction:
        e["suspect_model"] = True
    e["model_contradicted"] = bool(e.get("model_contradicted")) or contradiction   # the artifact-level flag
    note = _rerun_note(m, lad, lib, speedup, basis, verdict, current)
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
    note = (f"stage C re-run ({m['l2_mode'] or 'cold'} L2): ladder L{m['ladder_level']} {lad:.4g} ms vs library "
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


def counters_record(entry: dict, mix: dict):
    """A re-run's counter mix as the KernelCounters the stage-C merge reads (per LAUNCH, named as the
    entry so it matches it exactly); None when no DRAM byte count was measured (L4)."""
    from roofline.counters.base import KernelCounters

    if not mix or mix.get("error") or not mix.get("dram_bytes"):
        return None
    n_l = entry.get("launches_per_logical_op") or 1
    flops = mix.get("flops_issued")
    return KernelCounters(
        name=entry["name"], launches=1, source=f"rerun {mix.get('source', 'ncu')} ({mix.get('target')} isolated, "
        f"L2 {mix.get('l2_mode')}, {len(mix.get('per_problem', []))} problem(s) of the work mix)",
        t_ms=mix["t_ms"] / n_l if mix.get("t_ms") else None, dram_bytes=mix["dram_bytes"] / n_l,
        tensor_flops_by_dtype={"bf16": flops / n_l} if flops else {},
        l2_bytes=mix["l2_bytes"] / n_l if mix.get("l2_bytes") else None)


def restage(art: dict, artifact_path, records: list) -> dict:
    """Write the re-run's counters back through THE stage-C merge (the one `analyze --counters`
    uses): re-analyse the Top-N behind the artifact with them, then carry each entry's re-run block
    over. Raises RerunError when the Top-N behind the artifact cannot be found."""
    from roofline import api

    inp = art.get("inputs") or {}
    here = Path(artifact_path).parent
    topn = next((Path(p) for p in (inp.get("topn"), here / "profile_topN.json") if p and Path(p).is_file()), None)
    if topn is None:
        raise RerunError(f"the Top-N behind {artifact_path} was not found (inputs.topn, or "
                                "profile_topN.json beside it)")
    env = inp.get("env") if inp.get("env") and Path(inp["env"]).is_file() else None
    cfg = inp.get("config") if inp.get("config") and Path(inp["config"]).is_file() else None
    new = api.analyze(topn, env, cfg, stage="C", counters=records,
                      head_threshold_pct=art.get("head_threshold_pct", HEAD_THRESHOLD_PCT),
                      head_cap=art.get("head_cap", HEAD_CAP))
    old = {e["name"]: e for e in art["entries"]}
    for e in new["entries"]:
        o = old.get(e["name"])
        if o and "measured" in o:
            e["measured"] = o["measured"]
            e["measured_attainable_speedup"] = o["measured_attainable_speedup"]
            if o.get("suspect_model"):
                e["suspect_model"] = True
            rn = o["notes"].rsplit("; stage C re-run", 1)
            if len(rn) == 2:
                e["notes"] = (e.get("notes", "") + "; stage C re-run" + rn[1]).lstrip("; ")
    return new


def _is_library_kernel(e: dict) -> bool:
    from roofline.classify import is_library_kernel

    return e.get("editable") is False or is_library_kernel(e.get("name", ""))


if __name__ == "__main__":  # pragma: no cover - the table builder
    if len(sys.argv) >= 4 and sys.argv[1] in ("--build-dispatch", "--build-fp8-dispatch"):
        benches = [json.loads(Path(p).read_text()) for p in sys.argv[2:-1]]
        tbl = build_dispatch_table(merge_benches(benches), dtype="fp8" if "fp8" in sys.argv[1] else "bf16")
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    elif len(sys.argv) == 4 and sys.argv[1] == "--build-grouped-dispatch":
        from roofline.ladder.dispatch import build_grouped_table
        tbl = build_grouped_table(json.loads(Path(sys.argv[2]).read_text()))
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    else:
        sys.exit("usage: python -m roofline.rerun --build-dispatch|--build-fp8-dispatch BENCH.json [BENCH.json ...] OUT.json\n"
                 "       python -m roofline.rerun --build-grouped-dispatch BENCH_MOE.json OUT.json")

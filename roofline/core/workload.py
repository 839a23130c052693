"""The e2e gain of a workload: the regimes' per-step times projected onto the workload a user
describes (isl input tokens and osl output tokens per request, conc requests at a time), instead of
the mix of prefill and decode steps that happened to be profiled (docs/method.md section 4,
"The workload").

Per batch of `conc` concurrent requests (the unit the workload repeats):
  prefill: conc x isl tokens. Prefill GPU time is taken as linear in the tokens, per token from the
           profiled prefill step: one profiled step processed P tokens (the M of its GEMMs, the
           launch-weighted mode), so the batch costs n_prefill = conc x isl / P profiled prefill
           steps. Assumed: attention's quadratic part in isl is ignored (linear in tokens).
  decode:  osl steps at batch conc: n_decode = osl profiled decode steps. Assumed: a decode step's
           time does not change with the batch (it reads the weights once per step); when conc
           differs from the profiled batch B (the M of the decode GEMMs) the projection says so.
  G_r      = one profiled step's GPU time in regime r: the sum over every Top-N entry of
           launches_per_step x base_latency_ms in r, divided by the share of the window the Top-N
           lists (a Top-N listing under MIN_COVERAGE_PCT of it is not projected).
  T        = n_prefill x G_prefill + n_decode x G_decode          (the workload's GPU time per batch)
  S(e)     = sum over e's verdicts v (one per regime) of n_{r(v)} x t_ms(v) x launches_per_step(v)
             x (1 - 1/attainable_speedup(v))                       (what a good kernel saves per batch)
  expected_workload_gain_pct(e) = 100 x S(e) / T
A regime the workload needs (osl > 0 needs decode; isl > 0 needs prefill) that the trace did not
profile has no measured step time: then nothing is projected, and `reason` says why.
Pure: artifact entries and the Top-N in, fields out.
"""
from __future__ import annotations

from roofline.core.entry import with_workload_gain
from roofline.io.values import UNKNOWN

import math
from collections import Counter

MIN_COVERAGE_PCT = 90.0     # the Top-N must list at least this share of the window's GPU time


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def step_gpu_ms(topn) -> tuple[dict[str, float], float]:
    """({regime: GPU time of one profiled step, ms}, % of the window's GPU time the Top-N lists).
    The listed time is scaled up by that share (the unlisted kernels assumed to split like it)."""
    g: dict[str, float] = {}
    cov = 0.0
    for e in topn.entries:
        if not _num(e.pct_gpu_time):
            continue
        cov += e.pct_gpu_time
        for r, reg in e.regimes.items():
            if _num(reg.base_latency_ms) and _num(reg.launches_per_step):
                g[r] = g.get(r, 0.0) + reg.base_latency_ms * reg.launches_per_step
    scale = 100.0 / cov if cov > 0 else 0.0
    return {r: v * scale for r, v in g.items()}, min(cov, 100.0)


def gemm_m(topn, regime: str) -> int | None:
    """The profiled step's token count (prefill) or batch (decode): the launch-weighted mode of the
    M of the regime's dense GEMM shapes (M, N, K; no batch of matrices), None without one."""
    votes: Counter = Counter()
    for e in topn.entries:
        raw = e.raw if isinstance(e.raw, dict) else {}
        regs, launches = raw.get("shape_regimes") or [], raw.get("shape_launches") or []
        for i, sh in enumerate(e.shapes or []):
            if not (isinstance(sh, dict) and all(_num(sh.get(k)) for k in ("M", "N", "K"))
                    and sh.get("batch", 1) == 1 and "E" not in sh):
                continue
            reg = regs[i] if i < len(regs) else (next(iter(e.regimes)) if len(e.regimes) == 1 else None)
            if reg == regime and sh["M"] > 0:
                n = launches[i] if i < len(launches) and _num(launches[i]) else 1
                votes[int(sh["M"])] += n
    return votes.most_common(1)[0][0] if votes else None


def _verdicts(e: dict) -> list[dict]:
    """The entry's verdicts with a gain (medium/high confidence), one per regime."""
    return [v for v in (e.get("regime_verdicts") or [e])
            if v.get("headroom_class") not in (None, UNKNOWN) and v.get("confidence") in ("medium", "high")
            and v.get("expected_e2e_gain_pct") is not None and _num(v.get("attainable_speedup"))
            and v["attainable_speedup"] >= 1 and _num(v.get("t_ms")) and _num(v.get("launches_per_step"))]


def project(art: dict, topn, wl: dict | None, source: str | None) -> dict:
    """Fill `workload_projection` (top level) and `expected_workload_gain_pct` (each entry and
    regime verdict) of the artifact, in place; returns the projection."""
    steps = {"decode": topn.n_decode_steps, "prefill": topn.n_prefill_steps}
    mix = " + ".join(f"{steps[r]:g} {r}" for r in ("prefill", "decode") if steps[r]) or "the window as one step"
    out: dict = {"basis": "profiled mix", "workload": None, "source": None, "profiled_steps": mix,
                 "step_gpu_ms": None, "prefill_tokens_per_step": None, "decode_batch": None,
                 "steps_per_batch": None, "how": None, "reason": None}
    for e in art["entries"]:
        for v in [e] + list(e.get("regime_verdicts") or []):
            with_workload_gain(v, None)
    art["workload_projection"] = out
    if not wl or not all(_num(wl.get(k)) and wl[k] > 0 for k in ("isl", "osl", "conc")):
        out["reason"] = "no workload given (isl, osl, conc): the gains are shares of the profiled mix"
        return out
    isl, osl, conc = (wl[k] for k in ("isl", "osl", "conc"))
    out.update(basis="workload", workload={"isl": isl, "osl": osl, "conc": conc}, source=source)
    g, cov = step_gpu_ms(topn)
    p, b = gemm_m(topn, "prefill"), gemm_m(topn, "decode")
    out.update(step_gpu_ms=g or None, prefill_tokens_per_step=p, decode_batch=b)
    missing = [r for r in ("prefill", "decode") if not (steps[r] and g.get(r, 0) > 0)]
    if missing:
        out["reason"] = (f"the trace has no {' and no '.join(missing)} step with GPU time, so the workload's "
                         + " and ".join({"prefill": f"prefill ({isl:g} tokens per request)",
                                         "decode": f"decode ({osl:g} step(s) per request)"}[r] for r in missing)
                         + " has no measured time")
        return out
    if cov < MIN_COVERAGE_PCT:
        out["reason"] = (f"the Top-N lists {cov:.1f}% of the window's GPU time (under {MIN_COVERAGE_PCT:g}%): "
                         "a regime's step time needs every kernel (roofline topn --top N with a larger N)")
        return out
    if p is None:
        out["reason"] = ("the profiled prefill's token count is unknown (no prefill GEMM shape gives its M): "
                         "prefill time cannot be scaled to isl tokens")
        return out
    n = {"prefill": conc * isl / p, "decode": float(osl)}
    out["steps_per_batch"] = n
    total = sum(n[r] * g[r] for r in n)
    for e in art["entries"]:
        vs = _verdicts(e)
        if not vs:
            continue
        saved = {v["regime"]: n.get(v["regime"], 0.0) * v["t_ms"] * v["launches_per_step"]
                 * (1.0 - 1.0 / v["attainable_speedup"]) for v in vs}
        for v in vs:
            with_workload_gain(v, 100.0 * saved[v["regime"]] / total)
        with_workload_gain(e, 100.0 * sum(saved.values()) / total)
    dec = (f"{osl:g} decode steps at batch {conc:g}, each {g['decode']:.4g} ms as profiled"
           + ("" if b is None or b == conc else f" at batch {b} (assumed constant in the batch: a decode step "
                                                 "reads the weights once)"))
    out["how"] = (f"per batch of {conc:g} request(s): prefill of {conc:g} x {isl:g} tokens = {n['prefill']:.4g} "
                  f"profiled prefill step(s) of {p} tokens ({g['prefill']:.4g} ms GPU each, linear in tokens); "
                  f"{dec}; {cov:.1f}% of the window's GPU time listed"
                  + ("" if cov >= 99.95 else ", scaled up to all of it"))
    return out


def table_line(art: dict) -> str | None:
    """The line under the table: which mix the gains use, and how a workload was projected."""
    w = art.get("workload_projection")
    if not isinstance(w, dict):
        return None
    if w.get("basis") != "workload":
        return (f"gains: shares of the profiled mix ({w.get('profiled_steps')} steps); a workload "
                "(--isl/--osl/--conc) projects them onto its own")
    wl = w["workload"]
    head = f"workload gain: isl {wl['isl']:g}, osl {wl['osl']:g}, conc {wl['conc']:g} ({w.get('source')})"
    if w.get("how"):
        return f"{head}: {w['how']}"
    return f"{head}: not projected: {w.get('reason')}"

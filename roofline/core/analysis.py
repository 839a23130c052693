"""The procedure of docs/method.md: head scoping, regime, byte/FLOP model, utilizations, roof,
bound type, verdict, routing, rankings (one entry's steps: roofline.core.procedure). Pure: it never prints, plots or writes files.

Units: times in ms (per launch unless named *_logical_*), bytes, FLOPs, bytes/s, FLOP/s.
"""
from __future__ import annotations

import datetime as _dt
import traceback
from typing import Any

from roofline.core import contract, multirank, opclasses, routing
from roofline.core.contract import gain_order_key, gain_rank_key, rankings  # noqa: F401  (the two rankings: the artifact contract)
from roofline.core.classify import classify, short_name as _short_name
from roofline.core.entry import with_note, with_run_context
from roofline.core.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT, SKILL, SKILL_VERSION, empty_artifact  # noqa: F401  (SKILL, SKILL_VERSION re-exported)
from roofline.io.errors import EntryError
from roofline.core.hints import with_fix
from roofline.core.inputs import Entry, Env, TopN
from roofline.peaks import Peaks
from roofline.core.writeback import merge_reruns
from roofline.counters import measurement
from roofline.core.procedure import (  # noqa: F401  (re-exported: the per-entry steps live in roofline.core.procedure)
    BOUND_TYPES, DISPATCH_FLOOR_MS, HEADROOM_CLASSES, LATENCY_UTIL, SUSPECT_LOW, _compute_peak, _feasible, _finite,
    REAL_TIME_PCT, _metrics, _min_conf, _verbatim_lps, _verbatim_pct, analyze_entry, pick_regime, regime_shares,
    resolve_dtypes)


def _light(e: Entry) -> dict:
    kind = classify(e.name, e.classification)
    raw = e.raw if isinstance(e.raw, dict) else {}
    nb = raw.get("launch_neighbours") if isinstance(raw.get("launch_neighbours"), dict) else {}
    adj = {n for side in ("before", "after") if isinstance(nb.get(side), dict) for n in nb[side]}
    ops = raw.get("aten_ops") if isinstance(raw.get("aten_ops"), dict) else {}
    return {"name": e.name, "short_name": e.short_name or _short_name(e.name),
            "op_class": opclasses.seed_class(kind), "op_kind": kind, "pct_gpu_time": e.pct_gpu_time,
            "adjacent": adj, "has_neighbours": bool(nb), "aten_ops": set(ops),
            "dataflow": raw.get("dataflow") if isinstance(raw.get("dataflow"), dict) else None,
            "n_shapes": len(e.shapes or [])}


def analyze(topn: TopN, env: Env, config: dict | None, peaks: Peaks, *, stage: str | None = None,
            counters: list | None = None, head_threshold_pct: float = HEAD_THRESHOLD_PCT, head_cap: int = HEAD_CAP,
            inputs_meta: dict | None = None, head_shares: dict | None = None) -> dict:
    """Run the section-3 procedure and return the artifact (a JSON-ready dict). Never raises for a
    problem inside one entry (L2/L5 per entry); raises only on programming errors outside the loop,
    which the hook turns into skill_errors[]."""
    art: dict[str, Any] = empty_artifact(None, [], gpu_name=env.gpu_name)   # the one skeleton, filled in
    art.update({
        "gfx": env.gfx, "peaks": peaks.to_artifact(), "stage": None,
        "head_threshold_pct": head_threshold_pct, "head_cap": head_cap,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs": inputs_meta or {"topn": topn.path, "env": env.path},
    })
    if topn.round is not None:
        art["round"] = topn.round
    order, head, nonfinite = _scope_head(topn, art, head_threshold_pct, head_cap, head_shares)
    all_light = [_light(e) for e in topn.entries if _finite(e.pct_gpu_time)]
    # counters (stage C): match once
    matched: dict[str, Any] = {}
    if counters is not None:
        matched, art["unmatched_counters"] = _match_counters(head, order, counters)
    # one Measurement per matched entry (roofline/counters/measurement.py): its counter reading
    # (None for a re-run that carries its timing only) and a re-run's isolated timing, written last
    meas = measurement.measurements(matched)
    any_captured = any(e.shapes for e in head)
    art["stage"] = stage or ("C" if matched else ("B" if any_captured else "A"))
    for e in nonfinite:
        art["degraded"].append({"name": e.name, "reason": "; ".join(e.problems) or "pct_gpu_time is not a number"})
    for e in head:
        light = next(x for x in all_light if x["name"] == e.name and x["pct_gpu_time"] == e.pct_gpu_time)
        try:
            ent, _info = analyze_entry(e, topn, env, config, peaks, art["stage"], _reading(meas, e.name), all_light)
        except EntryError as exc:
            why = with_fix(str(exc), bool(e.shapes))    # what would give it a verdict (roofline.core.hints)
            ent = _degraded_entry(e, light, why)
            art["degraded"].append({"name": e.name, "reason": why})
        except Exception as exc:  # L5 inside one entry: degrade it, record the error, go on
            ent = _degraded_entry(e, light, f"internal error: {exc.__class__.__name__}: {exc}")
            art["degraded"].append({"name": e.name, "reason": f"internal error: {exc.__class__.__name__}: {exc}"})
            art["skill_errors"].append({"where": f"entry {e.name}", "error": f"{exc.__class__.__name__}: {exc}",
                                        "traceback": traceback.format_exc(limit=4)})
        others = _other_regimes(ent, e, topn, env, config, peaks, art, all_light) if ent.get("modeled") else None
        ranks, coll = multirank.annotate(ent, e)     # a Top-N of several ranks: each rank's figures
        art["entries"].append(contract.complete_entry(with_run_context(ent, others, ranks, coll, _aten_ops(e))))
    if stage is None and art["stage"] == "C" and not any(_counters_used(x) for x in art["entries"]):
        # matched counters that no entry used (L4: implausible or unreadable) leave the stage the shapes give
        art["stage"] = "B" if any_captured else "A"
    art["ranking_by_pct"], art["ranking_by_expected_gain"] = rankings(art["entries"])
    art["ranking_by_larger_gain"] = ranking_by_larger_gain(art["entries"])
    _run_fields(art, topn)
    _after_entries(art, topn, meas)
    return art


def _scope_head(topn: TopN, art: dict, head_threshold_pct: float, head_cap: int,
                head_shares: dict | None = None) -> tuple[list, list, list]:
    """0. scope to the head: biggest first, >= threshold, capped; the rest is absent, not degraded.
    With a projected workload (head_shares: roofline.core.workload.workload_shares), "biggest" is the
    larger of the share of the profiled window and the share of the workload's GPU time, so the regime
    that dominates the described workload shows its heads beside the profiled mix's.
    -> (every entry in that order, the head, the entries whose share is no number)."""
    by = head_shares["entries"] if head_shares else {}
    share = lambda e: max(e.pct_gpu_time, by.get(e.index, 0.0)) if by else e.pct_gpu_time     # noqa: E731
    order = sorted(topn.entries, key=lambda e: (-(share(e) if _finite(e.pct_gpu_time) else -1.0), e.index))
    head, nonfinite = [], []
    for e in order:
        if not _finite(e.pct_gpu_time):
            nonfinite.append(e)
        elif share(e) >= head_threshold_pct:
            head.append(e)
    art["skipped"] = {"below_threshold": sum(1 for e in topn.entries if _finite(e.pct_gpu_time)
                                             and share(e) < head_threshold_pct),
                      "over_cap": [e.name for e in head[head_cap:]]}
    art["head_basis"] = ({"basis": "workload", "regime_pct_of_workload": head_shares["regimes"],
                          "entry_pct_of_workload": {e.name: by[e.index] for e in head[:head_cap] if e.index in by}}
                         if by else {"basis": "profiled mix"})
    return order, head[:head_cap], nonfinite


def _counters_used(ent: dict) -> bool:
    """An entry whose figures rest on stage-C counters (matched and believed, not L4)."""
    c = ent.get("counters")
    return isinstance(c, dict) and not c.get("implausible") and bool(ent.get("modeled"))


def _other_regimes(ent: dict, e: Entry, topn: TopN, env: Env, config, peaks: Peaks, art: dict,
                   all_light) -> list[dict] | None:
    """A kernel that runs in both regimes gets a verdict per regime that carries real time (at least
    REAL_TIME_PCT of the GPU time), each on its own launches, shapes and share of the GPU time
    (`regime_verdicts`, the entry's own regime first). Counters from one step are not split by
    regime: they go to the entry's regime only."""
    shares = regime_shares(e, topn)
    others = [r for r in e.regimes if r != ent["regime"] and shares.get(r, 0.0) >= REAL_TIME_PCT]
    if not others:
        return None
    out = [{k: v for k, v in ent.items() if k != "regime_verdicts"}]
    for r in sorted(others, key=lambda r: -shares[r]):
        try:
            v, _ = analyze_entry(e, topn, env, config, peaks, art["stage"], None, all_light, regime=r)
            out.append(contract.complete_entry(v))
        except EntryError as exc:
            out.append({"regime": r, "regime_pct_gpu_time": shares[r], "modeled": False,
                        "headroom_class": "unknown", "notes": f"degraded (L2): {with_fix(str(exc), bool(e.shapes))}"})
    return out


def _match_counters(head: list[Entry], order: list[Entry], counters: list) -> tuple[dict, list[str]]:
    """Counter records matched over EVERY entry (a record of a kernel below the head threshold is
    not "unmatched"; a folded split-K reduce joins its GEMM), applied to the head.
    -> ({head entry name: record}, [names of records matched to no entry])."""
    from roofline.counters import match

    in_head = {id(e) for e in head}
    everyone = head + [e for e in order if id(e) not in in_head]
    matched, unmatched = match([{"name": e.name, "short_name": e.short_name,
                                 "folded_kernels": e.raw.get("folded_kernels"), "launches": e.raw.get("launches")}
                                for e in everyone], counters)
    return {e.name: matched[e.name] for e in head if e.name in matched}, list(unmatched)


def _run_fields(art: dict, topn: TopN) -> None:
    """The run's ranks (a Top-N of several ranks), and the link roof only where a collective is
    judged against it."""
    if not any(opclasses.on_interconnect(opclasses.kind_of(e)) for e in art["entries"]):
        art["peaks"].pop("interconnect_bw_bytes_s", None)
        art["peaks"].get("sources", {}).pop("interconnect_bw_bytes_s", None)
    r = multirank.run_ranks(topn)
    if r is not None:
        art["ranks"] = r


def _reading(meas: dict, name: str):
    """The counter reading of entry `name`'s measurement; None without one."""
    m = meas.get(name)
    return m.reading if m else None


def _after_entries(art: dict, topn: TopN, meas: dict) -> None:
    """What needs every entry: the step wall-time shares (roofline/core/wall.py), the counter-time check;
    last, stage C's re-run timings (roofline/counters/records.py) onto their entries."""
    from roofline.core import wall

    art["wall_time"] = wall.read_wall_time(topn.raw.get("wall_time"))
    wall.add_wall_shares(art["entries"], art["wall_time"])
    for ent in art["entries"]:
        check_counter_time(ent)
    merge_reruns(art, measurement.isolated_timings(meas))


# Counters are matched to entries by kernel name. An isolated counter run of the same work times
# within 0.986-1.106x of the trace on the H200 (fixtures/rerun_real, fixtures/ladder/levels7_10_h200:
# clocks, cold L2); a larger gap says the counters measured other work (another run, other shapes).
COUNTER_TIME_BAND = 0.25


def check_counter_time(ent: dict) -> None:
    """Stage C: the counters' time per launch against the trace's; beyond COUNTER_TIME_BAND the
    entry says so (counters.t_ms_over_trace, a note; the CLI warns)."""
    c, t = ent.get("counters"), ent.get("t_ms")
    if not isinstance(c, dict) or not c.get("t_ms") or not t:
        return
    r = c["t_ms"] / t
    c["t_ms_over_trace"] = r
    if not 1 / (1 + COUNTER_TIME_BAND) <= r <= 1 + COUNTER_TIME_BAND:
        with_note(ent, f"stage C: the counters time one launch at {c['t_ms']:.4g} ms, {r:.2f}x the trace's {t:.4g} "
                       f"ms, beyond the {COUNTER_TIME_BAND:.0%} an isolated run of the same work differs by: they may "
                       "measure other work (another run, other shapes); matched by name only")


def _aten_ops(e: Entry) -> dict[str, int]:
    """The aten ops `roofline topn` linked to the kernel's launches (op -> launches), most first; {}
    when the Top-N says none (what tells a reader which source line launched it)."""
    ops = e.raw.get("aten_ops") if isinstance(e.raw, dict) else None
    if not isinstance(ops, dict):
        return {}
    ok = {k: v for k, v in ops.items() if isinstance(k, str) and k and isinstance(v, int)
          and not isinstance(v, bool) and v > 0}
    return dict(sorted(ok.items(), key=lambda kv: -kv[1]))


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


def larger_gain_key(e: dict) -> tuple[float, bool]:
    """What ranking_by_larger_gain sorts on: the larger of the tuning gain (gain_rank_key) and the
    avoidable gain (docs/method.md section 12; of a kernel with verdicts in both regimes, the largest)."""
    g, has = gain_rank_key(e)
    avoid = [float(v["avoidable_gain_pct"]) for v in (e.get("regime_verdicts") or [e])
             if v.get("avoidable_gain_pct") is not None]
    if avoid and (not has or max(avoid) > g):
        return max(avoid), True
    return g, has


def ranking_by_larger_gain(entries: list[dict]) -> list[str]:
    """A third ordering beside ranking_by_pct and ranking_by_expected_gain (which stay as they are):
    by the larger of the tuning and the avoidable gain, entries with a gain first (as ranking_by_expected_gain);
    ties go to the larger pct_gpu_time."""
    return [e["name"] for e in sorted(entries, key=lambda e: (not larger_gain_key(e)[1], -larger_gain_key(e)[0],
                                                              -e["pct_gpu_time"]))]

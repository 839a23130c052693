"""Stage C's whole re-run of an artifact's GEMM heads (docs/method.md sections 6 and 9), outside the
CLI layer: the pipeline hook (`roofline.hook.rerun`) and the click command (`roofline rerun`,
roofline/commands/rerun.py) both call `rerun_artifact`. In order:

1. plan: the GEMM / MoE heads, their problems (roofline.opclasses.gemm_problems) and the ladder
   level the dispatch table picks (roofline.ladder.dispatch);
2. measure each head: check, then time the level beside the library kernel
   (roofline/stagec/timing.py) and, with counters, profile the work mix, the same problems on
   the same operands (a grouped head on the routing its timing drew), dense bf16, grouped bf16 and
   fp8 alike (roofline/stagec/profiler.py -> roofline/stagec/measurement.py);
3. with measured bytes: the Top-N behind the artifact is analysed ONCE with them (the same
   analysis and stage-C merge as `analyze --counters`, roofline/stagec/merge.py);
4. each head's timing is written onto that artifact's entry (roofline/stagec/writeback.py) and
   one playbook record per head appended (roofline/stagec/playbook.py)."""
from __future__ import annotations

import json
from pathlib import Path

from roofline.errors import CounterCollectError, RerunError


def rerun_artifact(artifact: Path, entries=(), counters: bool = False, dispatch: Path | None = None,
                   playbook_dir: Path | None = None, progress=None, level: int | None = None,
                   l2: str = "auto") -> dict:
    """The whole re-run, also used by the hook. Returns {"rerun": [names], "skipped": {name: why},
    "playbook": path|None}. Raises RerunError (a RooflineError and a RuntimeError) with one line
    when the machine cannot do it; a failed counter run is L4, recorded in the entry.
    With counters, the measured work mix goes back through the stage-C merge of `analyze
    --counters` (reanalyse): measured bytes on the memory axis, confidence high only there."""
    from roofline.stagec import measurement, profiler, timing
    from roofline.stagec.writeback import _is_library_kernel

    try:
        art = json.loads(artifact.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RerunError(f"{artifact}: not a JSON artifact ({exc.__class__.__name__}): nothing re-run") from None
    if not isinstance(art, dict) or not isinstance(art.get("entries"), list):
        raise RerunError(f"{artifact}: $.entries: expected a profile_roofline.json artifact with a list of entries")
    table = _tables(json.loads(dispatch.read_text()) if dispatch else None)
    arch = timing.device_arch()
    if arch is None:
        raise RerunError(f"{timing.no_gpu_reason()}: nothing re-run, artifact unchanged")
    work, skipped = _plan(art, entries, table, arch, level)
    measured = []
    it = progress(work) if progress else work
    records = []
    for e, probs, lvl, why in it:
        mode, mode_why = timing.l2_mode_for(probs, l2, (art.get("peaks") or {}).get("device"))
        kind = _contract(probs[0])
        if kind.startswith("grouped"):
            meas = timing.measure_grouped(probs, lvl, l2=mode, contract=kind)
        else:
            meas = {"gemm-fp8": timing.measure_fp8}.get(kind, timing.measure_problems)(probs, lvl, l2=mode)
        meas["dispatch_reason"], meas["l2_mode_reason"] = why, mode_why
        if not meas["check_ok"]:
            skipped[e["name"]] = f"level {lvl} failed the correctness check; not timed"
            continue
        if counters:
            # the library kernel is what ran in the run: its counters describe the in-run work; a
            # grouped problem runs again on the routing its timing drew (one draw, measure_grouped's)
            target = _counter_target(e)
            routings = [q.get("routing_counts") for q in meas["problems"]] if kind.startswith("grouped") else None
            try:
                meas["counters"] = profiler.collect_mix_counters(probs, lvl, target=target, l2=mode, contract=kind,
                                                                 routings=routings)
            except CounterCollectError as exc:   # L4: the re-run stays, the error is recorded in it
                meas["counters"] = {"error": str(exc)}
            rec = measurement.counters_record(e, meas["counters"])
            if rec is not None:
                records.append(rec)
        measured.append((e["name"], meas))
    pb = _merge_and_write(art, artifact, records, measured, playbook_dir)
    done = [name for name, _ in measured]
    return {"rerun": done, "skipped": skipped, "playbook": str(pb) if pb else None}


_ATEN_BUILT = ("at::cuda::detail", "N2at4cuda6detail", "at::native::", "N2at6native")


def _counter_target(e: dict) -> str:
    """Whose counters describe the in-run work: "cublas" (the library side of the re-run) where the
    run's kernel was a library one, or one compiled into PyTorch itself (torch._grouped_mm's
    CUTLASS kernel, `cutlass::device_kernel<at::cuda::detail::...>`: the run launched torch's own
    kernel, which the library side of the re-run launches again); else "ladder"."""
    from roofline.stagec.writeback import _is_library_kernel

    name = e.get("name", "")
    return "cublas" if _is_library_kernel(e) or any(t in name for t in _ATEN_BUILT) else "ladder"


def _plan(art: dict, entries, table: dict, arch, level: int | None) -> tuple[list, dict]:
    """The GEMM / MoE heads to re-run with their problems and ladder level, and the ones skipped
    (with why)."""
    from roofline.opclasses import gemm_problems, rerunnable

    heads = [e for e in art["entries"] if e.get("modeled") and rerunnable(e.get("op_class"))
             and (not entries or e["name"] in entries or e.get("short_name") in entries)]
    skipped = {}
    work = []
    for e in heads:
        probs = gemm_problems(e)
        if not probs:
            skipped[e["name"]] = "no GEMM shape to re-run (stage A without N/K?)"
            continue
        lvl, why = (level, f"level {level} forced") if level else _choose(table, probs[0], arch)
        if lvl is None:
            skipped[e["name"]] = why
            continue
        work.append((e, probs, lvl, why))
    return work, skipped


def _contract(p) -> str:
    """The ladder contract of a problem (registry.CONTRACTS)."""
    if p.grouped:
        return "grouped-bf16" if p.dtype == "bf16" else f"grouped-{p.dtype}"
    return "gemm-fp8" if p.dtype == "fp8" else "gemm-bf16"


def _tables(given: dict | None) -> dict:
    """One dispatch table per contract: the shipped ones, the one given (--dispatch) in its
    contract's place."""
    from roofline.ladder.dispatch import TABLE_FILES, default_dispatch_table, table_contract

    out = {c: default_dispatch_table(c) for c in TABLE_FILES}
    if given is not None:
        out[table_contract(given)] = given
    return out


def _choose(tables: dict, p, arch) -> tuple[int | None, str]:
    """The level for a head's first problem, from its contract's table."""
    from roofline.ladder.dispatch import choose_grouped_level, choose_level

    kind = _contract(p)
    if p.grouped:
        from roofline.stagec.timing import draw_routing
        from roofline.ladder.routing import experts_hit

        if kind not in tables:
            return None, f"grouped {p.dtype} GEMMs are not dispatched (no {kind} table)"
        counts, rule = draw_routing(p)
        lvl, why = choose_grouped_level(tables[kind], p.M, experts_hit(counts), p.N, p.K, p.dtype, arch, E=len(counts))
        return lvl, f"{why}; routing {rule}: {experts_hit(counts)} experts hit (model {p.experts_hit_model:.1f})" \
            if p.experts_hit_model is not None else f"{why}; routing {rule}"
    return choose_level(tables.get(kind), p.M, p.N, p.K, p.dtype, arch)


# what a re-run writes onto its entry (writeback.write_back), kept for heads a later re-run skips
CARRIED = ("measured", "measured_attainable_speedup", "suspect_model", "model_contradicted")


def _merge_and_write(art: dict, artifact: Path, records: list, measured: list, playbook_dir):
    """The measured bytes through the analysis (once), each head's timing written onto its entry,
    the artifact pair rewritten, one playbook record per re-run head. Returns the playbook's path
    (None when nothing was written there)."""
    from roofline import report
    from roofline.stagec import playbook, writeback

    pb = None
    note = None
    if records:
        # an earlier re-run of a head not re-run now stays: the fresh analysis would drop it
        done = {name for name, _ in measured}
        kept = {e["name"]: {k: e[k] for k in CARRIED if k in e} for e in art["entries"]
                if e.get("measured") and e["name"] not in done}
        try:
            art = reanalyse(art, artifact, records)
        except RerunError as exc:   # the Top-N behind the artifact is gone: L4
            note = f"L4: counters recorded in measured.counters but not merged ({exc})"
        for e in art["entries"]:
            if e["name"] in kept:
                e.update(kept[e["name"]])
                e["notes"] = (e.get("notes", "") + "; measured: from an earlier re-run (not repeated by this one)")
    for name, meas in measured:
        e = writeback.write_back(art, name, meas)
        if note:
            e["notes"] += f"; {note}"
    if measured:
        report.write_artifact(art, artifact.parent)
        if playbook_dir is not False:
            d = playbook_dir or playbook.knowledge_dir(artifact.parent)
            for name, _ in measured:
                ent = next(x for x in art["entries"] if x["name"] == name)
                pb, _ = playbook.append_playbook(d, playbook.rerun_record(art, ent))
    return pb


def reanalyse(art: dict, artifact_path, records: list) -> dict:
    """The Top-N behind the artifact analysed once more, with the re-run's measured counter records:
    the same analysis and stage-C merge `analyze --counters` runs (roofline/stagec/merge.py), with
    the artifact's own head settings. Raises RerunError when the Top-N behind it cannot be found."""
    from roofline import api
    from roofline.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT

    inp = art.get("inputs") or {}
    here = Path(artifact_path).parent
    topn = next((Path(p) for p in (inp.get("topn"), here / "profile_topN.json") if p and Path(p).is_file()), None)
    if topn is None:
        raise RerunError(f"the Top-N behind {artifact_path} was not found (inputs.topn, or "
                         "profile_topN.json beside it)")
    env = inp.get("env") if inp.get("env") and Path(inp["env"]).is_file() else None
    cfg = inp.get("config") if inp.get("config") and Path(inp["config"]).is_file() else None
    return api.analyze(topn, env, cfg, stage="C", counters=records,
                       head_threshold_pct=art.get("head_threshold_pct", HEAD_THRESHOLD_PCT),
                       head_cap=art.get("head_cap", HEAD_CAP))

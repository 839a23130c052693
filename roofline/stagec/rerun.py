"""Stage C's measurement of an artifact's GEMM heads (docs/method.md sections 6 and 9), below the
re-run that uses it (`roofline.rerun.rerun_artifact`: the hook's and `roofline rerun`'s). In order:

1. plan: the GEMM / MoE heads, their problems (roofline.core.opclasses.gemm_problems) and the ladder
   level the dispatch table picks (roofline.ladder.dispatch);
2. measure each head: check, then time the level beside the library kernel
   (roofline/stagec/timing.py) and, with counters, profile the work mix, the same problems on
   the same operands (a grouped head on the routing its timing drew), dense bf16, grouped bf16 and
   fp8 alike (roofline/stagec/profiler.py -> roofline/stagec/measurement.py);
3. each head's measurement as ONE counter record (per launch, named as its entry, its timing in
   `rerun`): the form `analyze --counters` reads (roofline/counters/records.py), which the
   re-run writes and the analysis merges."""
from __future__ import annotations

from pathlib import Path

from roofline.counters.base import KernelCounters
from roofline.io.errors import CounterCollectError, RerunError


def _read_json(path: Path, what: str):
    """A JSON input of the re-run through the one bounded reader (size, depth, special files,
    UTF-8): a file problem is RerunError, one line naming the file."""
    from roofline.core.inputs import read_json
    from roofline.io.errors import InputError

    try:
        return read_json(path)
    except InputError as exc:
        raise RerunError(f"{exc}: not {what}, nothing re-run") from None


def read_artifact(artifact: Path) -> dict:
    """The artifact a re-run starts from; RerunError (one line) when it is none."""
    art = _read_json(artifact, "a JSON artifact")
    if not isinstance(art, dict) or not isinstance(art.get("entries"), list):
        raise RerunError(f"{artifact}: $.entries: expected a profile_roofline.json artifact with a list of entries")
    return art


def read_dispatch(dispatch: Path | None) -> dict | None:
    """The dispatch table given with --dispatch (None: the shipped ones); one line when it is none:
    a JSON object whose `classes` is an object of arrays of row objects."""
    if dispatch is None:
        return None
    from roofline.io.values import found

    doc = _read_json(dispatch, "a dispatch table")
    if not isinstance(doc, dict):
        raise RerunError(f"{dispatch}: expected a dispatch table (a JSON object), got {found(doc)}")
    cls = doc.get("classes")
    if not isinstance(cls, dict) or not all(isinstance(v, list) and all(isinstance(r, dict) for r in v)
                                            for v in cls.values()):
        raise RerunError(f"{dispatch}: classes: expected an object of arrays of rows, got {found(cls)}")
    for k in ("contract", "dtype", "arch"):
        if k in doc and not isinstance(doc[k], str):
            raise RerunError(f"{dispatch}: {k}: expected a string, got {found(doc[k])}")
    return doc


def measure_heads(art: dict, entries=(), counters: bool = False, dispatch: Path | None = None, progress=None,
                  level: int | None = None, l2: str = "auto") -> tuple[list[KernelCounters], dict]:
    """Measure the artifact's GEMM heads. Returns (one record per measured head, in plan order,
    {skipped name: why}). Raises RerunError without a GPU; a failed counter run is L4: the record
    keeps the timing and the error (`rerun["counters"]`), no counter reading."""
    from roofline.stagec import measurement, profiler, timing

    table = _tables(read_dispatch(dispatch))   # a bad table is said before the GPU is looked for
    arch = timing.device_arch()
    if arch is None:
        raise RerunError(f"{timing.no_gpu_reason()}: nothing re-run, artifact unchanged")
    work, skipped = _plan(art, entries, table, arch, level)
    records = []
    for e, probs, lvl, why in (progress(work) if progress else work):
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
        rec = None
        if counters:
            # the library kernel is what ran in the run: its counters describe the in-run work; a
            # grouped problem runs again on the routing its timing drew (one draw, measure_grouped's)
            routings = [q.get("routing_counts") for q in meas["problems"]] if kind.startswith("grouped") else None
            try:
                meas["counters"] = profiler.collect_mix_counters(probs, lvl, target=_counter_target(e), l2=mode,
                                                                 contract=kind, routings=routings)
            except CounterCollectError as exc:   # L4: the re-run stays, the error is recorded in it
                meas["counters"] = {"error": str(exc)}
            rec = measurement.counters_record(e, meas["counters"])
        if rec is None:   # timing only: no counter reading to merge
            rec = KernelCounters(name=e["name"], launches=1, source="rerun: isolated timing, no counters")
        rec.rerun = meas
        records.append(rec)
    return records, skipped


_ATEN_BUILT = ("at::cuda::detail", "N2at4cuda6detail", "at::native::", "N2at6native")


def _counter_target(e: dict) -> str:
    """Whose counters describe the in-run work: "cublas" (the library side of the re-run) where the
    run's kernel was a library one, or one compiled into PyTorch itself (torch._grouped_mm's
    CUTLASS kernel, `cutlass::device_kernel<at::cuda::detail::...>`: the run launched torch's own
    kernel, which the library side of the re-run launches again); else "ladder"."""
    from roofline.core.writeback import _is_library_kernel

    name = e.get("name", "")
    return "cublas" if _is_library_kernel(e) or any(t in name for t in _ATEN_BUILT) else "ladder"


def _plan(art: dict, entries, table: dict, arch, level: int | None) -> tuple[list, dict]:
    """The GEMM / MoE heads to re-run with their problems and ladder level, and the ones skipped
    (with why)."""
    from roofline.core.opclasses import gemm_problems, rerunnable

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

"""What `roofline topn` does with one trace and what several ranks share with it (commands/topn.py
the command, commands/topn_ranks.py several ranks): read a trace into a Top-N, write it, write a
starter env report beside it, and fail with one line on unusable input."""
from __future__ import annotations

import json
import os
import re
import sys

import click

from roofline.core import opclasses

_FLAG_FIELD = {"isl": "workload.isl", "osl": "workload.osl", "conc": "workload.conc", "gfx": "gfx",
               "model_dtype": "model_dtype", "model_arch_class": "model_arch_class", "framework": "framework"}


_ROUND_RE = re.compile(r"round_(\d+)")



def _fail(path: str, problem: str) -> None:
    click.echo(f"roofline topn: {path}: {problem}", err=True)
    sys.exit(2)



def _write_atomic(path: str, doc: dict) -> None:
    from roofline.report.artifact import atomic_write

    d = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(d, exist_ok=True)
    try:
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError:  # a NaN/inf (times that overflow): never write a file the tool would refuse
        raise OSError("the times add up to a non-finite number (corrupt durations in the source)") from None
    atomic_write(path, text)



def _config_or_exit(config_file):
    """The model config given with --config (None without); a bad one is one line and exit 2."""
    if config_file is None:
        return None
    from roofline.io.errors import InputError
    from roofline.core.inputs import load_config
    try:
        return load_config(config_file)
    except InputError as exc:
        click.echo(f"roofline topn: {exc}", err=True)
        sys.exit(2)



def _topn_of_trace(source, decode_steps, prefill_steps, regime, decode_range, prefill_range, workers, top, min_pct,
                   round_no, collectives: list | None = None, world_size: int | None = None) -> dict:
    """The Top-N of a PyTorch profiler trace (steps, shapes, CUDA-graph replays, device record).
    Collective kernels get their message sizes (roofline.ingest.collectives); ``collectives``, when
    given, receives every collective the trace holds."""
    from roofline.ingest.topn import StepPlan, aggregate_trace, build_topn
    from roofline.ingest.torch_trace import TraceError, parse_trace

    plan = StepPlan(decode_steps, prefill_steps, regime, decode_range, prefill_range)
    try:
        pt = parse_trace(source, range_regex=[decode_range, prefill_range], workers=workers)
        gl = _scan_graphs(source, pt)
        aggs, steps, notes = aggregate_trace(pt, plan, graph_corr=gl.corr if gl else None)
    except TraceError as exc:
        _fail(source, str(exc))
    src = {"kind": "torch_trace", "path": os.path.basename(source), "kernel_launches": pt.n_kernels,
           "events": pt.n_events, "parser": pt.engine}
    if pt.engine.startswith("ijson") and "yajl2_c" not in pt.engine:
        notes.append(f"parsed with {pt.engine}: install ijson's C backend (yajl2_c) for speed")
    if pt.device_names:
        src["devices"] = sorted(set(pt.device_names))
    graph = _graph_replays(pt, gl, notes)
    if graph:
        src["cuda_graph"] = {k: v for k, v in graph.items() if k != "replayed_only"}
    doc = build_topn(aggs, steps, notes, sigs=pt.sigs, top=top, min_pct=min_pct,
                     round_no=round_no, source=src)
    _trace_evidence(doc, pt, plan, aggs)
    _wall_time(doc, source, pt, plan, gl, notes)
    if pt.device_properties:   # SM count, compute capability: level-L1 peaks for an unknown GPU
        doc["device_properties"] = pt.device_properties
    if collectives is not None or any(opclasses.on_interconnect(e.get("op_class")) for e in doc["entries"]):
        _comm_shapes(source, doc, collectives, world_size)
    if graph:
        only = set(graph["replayed_only"])
        for e in doc["entries"]:
            if e["name"] in only and not e.get("shapes"):
                e["cuda_graph_replayed"] = True
    return doc


def _trace_evidence(doc: dict, pt, plan, aggs) -> None:
    """What the op classes read beside the kernels (docs/topn.md `trace_evidence`): the KV caches the
    trace writes, the fused / reference Mamba kernels, eager attention's score chains."""
    from roofline.ingest.evidence import kv_caches
    from roofline.ingest.score_chains import score_chains
    from roofline.ingest.topn import step_ranges

    caches = kv_caches(pt)
    if caches:   # what says whether the attention's bytes are necessary (docs/topn.md)
        doc["trace_evidence"] = {"kv_caches": caches}
    # what the op classes read from every kernel name of the trace (a fused Mamba2 chunk scan or not)
    ev = opclasses.kernel_evidence({a.name: a.all_count for a in aggs})
    if ev:
        doc.setdefault("trace_evidence", {}).update(ev)
    # eager attention's score matrix, written to HBM and read back op by op (docs/method.md section 12)
    chains = score_chains(pt, *step_ranges(pt, plan)[:2], {e["name"]: e["op_class"] for e in doc["entries"]})
    if chains:
        doc.setdefault("trace_evidence", {})["score_chains"] = chains
    from roofline.ingest.gathers import gather_records
    gathers = gather_records(pt)    # aten::index calls sized from their consumer (docs/method.md section 13)
    if gathers:
        doc.setdefault("trace_evidence", {})["expert_gathers"] = gathers


def _wall_time(doc: dict, source, pt, plan, gl, notes: list) -> None:
    """The steps' wall time (GPU busy / memcpy / idle), CUDA-graph steps, and for host-bound steps
    what the host did while the GPU idled (docs/topn.md `wall_time`)."""
    from roofline.ingest import walltime
    from roofline.ingest.hostcause import add_host_causes as walltime_host
    from roofline.ingest.topn import step_ranges

    gpu_ranges = step_ranges(pt, plan)[1]
    wall = walltime.wall_time(pt, gpu_ranges)
    if wall:   # the steps' wall time: GPU busy / memcpy / idle (docs/topn.md)
        if gl:
            for reg, n in walltime.graph_steps(pt, gpu_ranges, gl.corr).items():
                wall[reg]["graph_steps"] = n
        # host-bound steps: what the host did while the GPU idled (a pass over their CPU events)
        walltime_host(source, pt, gpu_ranges, wall, notes)
        doc["wall_time"] = wall


def _comm_shapes(source, doc, collectives, world_size) -> None:
    """Message sizes of the collective kernels (a second streaming pass, roofline.ingest.collectives)."""
    from roofline.ingest.collectives import comm_shapes, scan_collectives

    try:
        evs = scan_collectives(source, world_size)
    except (OSError, EOFError, ValueError) as exc:
        doc["notes"].append(f"collectives not read ({exc.__class__.__name__}): their entries have no message size")
        return
    if collectives is not None:
        collectives.extend(evs)
    n = comm_shapes(doc, evs)
    if n:
        doc["notes"].append(f"{n} collective kernel name(s) given their message sizes from the collective record "
                            "Kineto attaches to them (op class comm, judged on the interconnect roof)")



def _scan_graphs(source, pt):
    """The trace's CUDA-graph launches (roofline.ingest.graphs), scanned only when some kernels
    have no op link; None when not scanned or unreadable."""
    from roofline.ingest import graphs

    if not graphs.needs_scan(pt):
        return None
    try:
        return graphs.scan_graph_launches(source)
    except (OSError, EOFError):
        return None



def _graph_replays(pt, gl, notes: list) -> dict | None:
    """CUDA-graph replays: when some kernels have no op link and the trace has graph-launch events,
    their note replaces the generic 'no record_shapes' one (rewrites `notes` in place). Returns the
    summary, or None."""
    from roofline.ingest import graphs

    if gl is None and not graphs.needs_scan(pt):
        return None
    s = graphs.graph_replay_summary(pt, gl) if gl is not None else None
    generic = [i for i, n in enumerate(notes) if n.startswith("the trace has no record_shapes data")]
    if s is None:
        if generic and pt.record_shapes:
            notes[generic[0]] = ("record_shapes was on (the trace header says so), but no op that launches a "
                                 "kernel carries Input Dims in the window: no shapes/dtypes filled")
        return None
    for i in reversed(generic):
        del notes[i]
    notes.append(graphs.graph_note(s))
    return s



def _starter_env(source, kind, doc, out_path, env_out, force, config, config_file, flags) -> list[str]:
    """Write the starter env report (roofline.ingest.env_starter), or fill the one topn wrote
    earlier (generated_by says so); never overwrite a user's env report without --force.
    Returns the lines to print."""
    from pathlib import Path

    from roofline.ingest.env_starter import is_starter
    from roofline.core.inputs import find_upwards

    dest = Path(env_out) if env_out else Path(out_path).parent / "env_report.json"
    existing = dest if dest.exists() else (None if env_out else find_upwards(dest.parent, "env_report.json"))
    given = [f"--{k.replace('_', '-')}" for k, v in flags.items() if v is not None] + (["--config"] if config_file else [])
    old = _json_or_none(existing) if existing is not None and not force else None
    if existing is not None and not force and not is_starter(old):
        return [f"kept the existing env report {existing} (not rewritten"
                + (f"; {', '.join(given)} not written to it" if given else "") + "): --force replaces it with a starter"]
    where = existing if (existing is not None and not force) else dest
    env, missing, notes = _fresh_starter(source, kind, doc, where, config, config_file, flags)
    msgs = [f"note: {n}" for n in notes]
    if existing is not None and not force:   # a starter topn wrote earlier: filled, hand edits kept
        from roofline.ingest.env_starter import fill_starter

        given_fields = {_FLAG_FIELD[k] for k, v in flags.items() if v is not None and k in _FLAG_FIELD}
        given_fields |= {"config_path"} if config_file else set()
        env, changed, missing = fill_starter(old, env, given_fields)
        if not changed:
            return msgs + [f"kept the starter env report {existing} (written by roofline topn; nothing new to fill in)"] \
                + _missing_line(missing)
        _write_env(where, env)
        return msgs + [f"filled the starter env report {existing} (written by roofline topn): "
                       + ", ".join(f"{f}={_show(env, f)}" for f in changed)] + _missing_line(missing)
    _write_env(dest, env)
    same = existing is not None and existing.resolve() == dest.resolve()
    line = f"{'replaced' if same else 'wrote'} the starter env report {dest}"
    if existing is not None and not same:
        line += f" (it takes precedence over {existing} for this Top-N)"
    return msgs + [line] + _missing_line(missing)



def _fresh_starter(source, kind, doc, dest, config, config_file, flags):
    from roofline.ingest.env_starter import starter_env, trace_head

    # the device: a trace's deviceProperties head, or the report's device__attribute_* record
    head = trace_head(source) if kind == "trace" else {"deviceProperties": doc.get("device_properties") or []}
    cfg_rel = None
    if config_file:
        try:
            cfg_rel = os.path.relpath(os.path.abspath(config_file), dest.resolve().parent)
        except ValueError:  # another drive (Windows)
            cfg_rel = os.path.abspath(config_file)
    return starter_env(head, doc, config=config, config_path=cfg_rel, trace_name=os.path.basename(source), **flags)



def _json_or_none(path):
    from roofline.core.inputs import read_json   # the bounded reader
    from roofline.io.errors import RooflineError

    try:
        doc = read_json(path)
    except (RooflineError, OSError, ValueError, TypeError):
        return None
    return doc if isinstance(doc, dict) else None



def _show(env: dict, field: str):
    from roofline.ingest.env_starter import get_field

    return get_field(env, field)



def _write_env(dest, env: dict) -> None:
    try:
        _write_atomic(str(dest), env)
    except OSError as exc:
        _fail(str(dest), f"cannot write the starter env report: {exc.strerror or exc}")



def _missing_line(missing: list[str]) -> list[str]:
    from roofline.ingest.env_starter import how_to_give

    if not missing:
        return []
    why = ("; without a workload the gains are shares of the profiled mix, with one they are projected onto it"
           if any(m.startswith("workload.") for m in missing) else "")
    return [f"env report: not known from the trace: {', '.join(missing)}{how_to_give(missing, starter=True)}{why}"]

"""`roofline topn RANK0 RANK1 ...` (or a folder): one Top-N from the traces of every rank of a run.

Each trace is read exactly as `roofline topn TRACE` reads it (commands/topn.py), every kernel
kept; roofline/ingest/ranks.py merges them and roofline/ingest/skew.py aligns their collectives.
Messages and exit codes as for one trace: one line and exit 2 on unusable input."""
from __future__ import annotations

import os

import click

from roofline.commands.topn_read import _ROUND_RE, _config_or_exit, _fail, _starter_env, _topn_of_trace, _write_atomic


def _read_ranks(paths: list[str], steps: dict, round_no: int):
    """Each rank's own Top-N and collectives. -> (rank traces, notes)."""
    from roofline.io.filekinds import sniff, wrong_kind
    from roofline.ingest import ranks as rk
    from roofline.ingest.topn import TopNError

    rts = []
    for p in paths:
        from roofline.io.safeio import what_is_not_readable

        bad = what_is_not_readable(p)
        if bad:
            _fail(p, bad)
        kind = sniff(p)
        if kind != "torch_trace":
            _fail(p, wrong_kind(p, kind, "a PyTorch profiler trace").split(": ", 1)[1]
                  + " (several ranks are read from PyTorch profiler traces only)")
        try:
            rts.append(rk.identify(p))
        except TopNError as exc:
            click.echo(f"roofline topn: {exc}", err=True)
            raise SystemExit(2) from None
    try:
        notes = rk.check(rts)
    except TopNError as exc:
        click.echo(f"roofline topn: {exc}", err=True)
        raise SystemExit(2) from None
    for rt in rts:
        evs: list = []
        try:
            rt.doc = _topn_of_trace(rt.path, steps["decode_steps"], steps["prefill_steps"], steps["regime"],
                                    steps["decode_range"], steps["prefill_range"], steps["workers"], None, 0.0,
                                    round_no, collectives=evs, world_size=rt.world_size)
        except TopNError as exc:
            _fail(rt.path, str(exc))
        rt.events = evs
    return rts, notes


def run_ranks(o: dict) -> None:
    """The multi-rank `roofline topn`: read, merge, write the Top-N and the starter env report.
    ``o``: the `topn` command's arguments, by name."""
    steps = {k: o[k] for k in ("decode_steps", "prefill_steps", "regime", "decode_range", "prefill_range", "workers")}
    flags = {k: o[k] for k in ("isl", "osl", "conc", "model_arch_class", "model_dtype", "gfx", "framework")}
    _run(o["sources"], o["out_path"], steps, o["top"], o["min_pct"], o["round_no"], o["config_file"], flags,
         o["env_out"], o["no_env_report"], o["force"], o["quiet"])


def _run(sources, out_path, steps: dict, top, min_pct, round_no, config_file, flags: dict, env_out,
         no_env_report, force, quiet) -> None:
    from roofline.ingest import ranks as rk
    from roofline.ingest.topn import TopNError

    try:
        paths, found_notes = rk.expand(sources)
    except TopNError as exc:
        click.echo(f"roofline topn: {exc}", err=True)
        raise SystemExit(2) from None
    config = _config_or_exit(config_file)
    if round_no is None:
        m = _ROUND_RE.search(os.path.abspath(out_path))
        round_no = int(m.group(1)) if m else 0
    rts, notes = _read_ranks(paths, steps, round_no)
    notes = found_notes + notes
    if len(rts) == 1:
        notes.append("one trace: merged as a run of one rank")
    doc = rk.merge(rts, top=top, min_pct=min_pct, round_no=round_no, notes=notes)
    try:
        _write_atomic(out_path, doc)
    except OSError as exc:
        _fail(out_path, f"cannot write: {exc.strerror or exc}")
    first = min(rts, key=lambda rt: rt.rank)
    env_msgs = [] if no_env_report else _starter_env(first.path, "trace", doc, out_path, env_out, force, config,
                                                      config_file, flags)
    if quiet:
        return
    for n in doc["notes"]:
        click.echo(f"roofline topn: note: {n}", err=True)
    st = doc["ranks"]["straggler"]
    click.echo(f"roofline topn: wrote {out_path}: {len(doc['entries'])} kernels from {len(rts)} ranks, "
               f"{doc['total_gpu_time_ms']:.3f} ms GPU time per rank (mean), steps decode="
               f"{doc['serving']['n_decode_steps']} prefill={doc['serving']['n_prefill_steps']}; straggler: rank "
               f"{st['rank']}", err=True)
    for m in env_msgs:
        click.echo(f"roofline topn: {m}", err=True)

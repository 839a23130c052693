"""`roofline analyze TRACE`: a PyTorch profiler trace given where a Top-N is expected is turned
into one in the same process (the `roofline topn` command, invoked in place: one interpreter start
instead of two), into a folder beside the trace, and analysed there."""
from __future__ import annotations

from pathlib import Path

import click


def is_trace(path: Path) -> bool:
    """A PyTorch profiler trace (.json or .json.gz, by its content)."""
    from roofline.io.filekinds import sniff

    try:
        return path.is_file() and sniff(path) == "torch_trace"
    except OSError:
        return False


def out_dir_for(trace: Path) -> Path:
    """Where a trace's files go: TRACE_roofline/ beside it (trace.json.gz -> trace_roofline/)."""
    stem = trace.name
    for suffix in (".gz", ".json"):
        stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    return trace.parent / f"{stem}_roofline"


def topn_of_trace(trace: Path, out_dir, opts: dict) -> Path:
    """Build TRACE's Top-N (and, without --env, its starter env report) in out_dir or beside the
    trace; the path of the Top-N. A trace topn refuses is one line and exit 2, as `roofline topn`."""
    from roofline.commands.topn import topn as topn_cmd

    dest = Path(out_dir) if out_dir is not None else out_dir_for(trace)
    out = dest / "profile_topN.json"
    ctx = click.get_current_context()
    ctx.invoke(topn_cmd, sources=(str(trace),), out_path=str(out), isl=opts.get("isl"), osl=opts.get("osl"),
               conc=opts.get("conc"), config_file=str(opts["config"]) if opts.get("config") else None,
               no_env_report=opts.get("env") is not None, quiet=bool(opts.get("quiet")))
    if not opts.get("quiet"):
        click.echo(f"roofline analyze: {trace} is a PyTorch profiler trace: its Top-N and starter env report are "
                   f"in {dest}/ (beside the trace), the artifact goes there too", err=True)
    return out

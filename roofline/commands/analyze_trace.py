"""`roofline analyze TRACE`: a PyTorch profiler trace given where a Top-N is expected is turned
into one in the same process (the `roofline topn` command, invoked in place: one interpreter start
instead of two), into a folder beside the trace, and analysed there.

A refused run stays one line and leaves nothing behind: --env and --config are read before the
trace is converted; what `topn` prints is held back until the analysis succeeded; and a run that
fails after the conversion removes the files it wrote (restoring the ones it replaced)."""
from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import click

_META = "roofline.analyze_trace"


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

    _check_given_files(opts)
    dest = Path(out_dir) if out_dir is not None else out_dir_for(trace)
    out = dest / "profile_topN.json"
    ctx = click.get_current_context()
    state = ctx.meta.setdefault(_META, {"dest": dest, "made_dir": not dest.exists(), "before": {}, "lines": []})
    for name in ("profile_topN.json", "env_report.json"):
        f = dest / name
        state["before"][f] = f.read_bytes() if f.is_file() else None
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            ctx.invoke(topn_cmd, sources=(str(trace),), out_path=str(out), isl=opts.get("isl"), osl=opts.get("osl"),
                       conc=opts.get("conc"), config_file=str(opts["config"]) if opts.get("config") else None,
                       no_env_report=opts.get("env") is not None, quiet=bool(opts.get("quiet")))
    except SystemExit:   # topn refused the trace: its one line, nothing of the notes before it
        lines = [ln for ln in held.getvalue().splitlines() if ln.strip()]
        if lines:
            click.echo(lines[-1], err=True)
        raise
    state["lines"] = held.getvalue().splitlines()
    if not opts.get("quiet"):
        state["lines"].append(f"roofline analyze: {trace} is a PyTorch profiler trace: its Top-N and starter env "
                              f"report are in {dest}/ (beside the trace), the artifact goes there too")
    return out


def _check_given_files(opts: dict) -> None:
    """--env and --config, read before the trace is converted: a bad one is one line, nothing written."""
    from roofline.core import inputs
    from roofline.io.errors import InputError

    for key, load in (("env", inputs.load_env), ("config", inputs.load_config)):
        if opts.get(key) is None:
            continue
        try:
            load(opts[key])
        except InputError as exc:
            click.echo(f"roofline analyze: {exc}", err=True)
            sys.exit(2)


@contextlib.contextmanager
def outputs_kept_on_success():
    """Around the analysis of a trace's Top-N: on success, what `topn` said is printed (first); on
    failure (exit != 0, or an exception) the files the conversion wrote are removed and the ones it
    replaced put back, so that a refused run leaves the folder as it was."""
    ctx = click.get_current_context()
    try:
        yield
    except SystemExit as exc:
        if exc.code not in (0, None):
            _undo(ctx.meta.get(_META))
        raise
    except BaseException:
        _undo(ctx.meta.get(_META))
        raise


def held_lines() -> list[str]:
    """What the trace's conversion said, held back until the analysis succeeded (printed once)."""
    st = click.get_current_context().meta.get(_META) or {}
    lines, st["lines"] = st.get("lines") or [], []
    return lines


def _undo(state: dict | None) -> None:
    if not state:
        return
    for f, old in state["before"].items():
        try:
            if old is None:
                f.unlink(missing_ok=True)
            else:
                f.write_bytes(old)
        except OSError:
            pass
    d = state["dest"]
    if state["made_dir"]:
        try:
            for tmp in d.glob(".*"):   # a pair write's stage left by the failed run
                if tmp.is_file():
                    tmp.unlink()
            d.rmdir()
        except OSError:
            pass

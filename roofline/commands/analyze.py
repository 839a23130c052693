"""`roofline analyze`: the pipeline's main entry on the command line."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from roofline.core.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT
from roofline.commands.paths import Count, FiniteFloat
from roofline.io.errors import InputError, RooflineError

EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "example" / "profile" / "round_1" / "profile_topN.json"


def _warn_ignored(topn: Path, counters, art: dict) -> None:
    """One line on stderr per thing the analysis ignored (roofline.core.lint), and for a counter report
    that matched no head entry."""
    from roofline.api import loaded_topn
    from roofline.core import lint

    try:
        t = loaded_topn(topn)   # the parse the analysis made: a large Top-N is not parsed twice
        lines = lint.topn_warnings(t)
    except RooflineError:
        t, lines = None, []
    for line in lines:
        click.echo(f"roofline analyze: warning: {line}", err=True)
    for e in art.get("entries", []):
        r = (e.get("counters") or {}).get("t_ms_over_trace")
        if r and "the counters time one launch at" in (e.get("notes") or ""):
            click.echo(f"roofline analyze: warning: --counters {counters}: {e.get('short_name') or e['name']}: the "
                       f"counters' time per launch is {r:.2f}x the trace's: they may measure other work (another run, "
                       "other shapes); its notes say more", err=True)
    if counters is None:
        return
    um = art.get("unmatched_counters") or []
    if um:
        from roofline.core.classify import short_name

        from roofline.counters.match import folded_into

        def said(n):
            many = folded_into([e.raw for e in t.entries], n) if t is not None else []
            return repr(short_name(n)[:60]) + (f" (folded into {len(many)} GEMM entries as their split-K reduce: its "
                                               "launches cannot be shared out)" if len(many) > 1 else "")

        shown = ", ".join(said(n) for n in um[:6]) + (f", and {len(um) - 6} more" if len(um) > 6 else "")
        click.echo(f"roofline analyze: warning: --counters {counters}: {len(um)} kernel(s) matched no Top-N entry "
                   f"and were not used (names compared exactly, then demangled and normalised, then by a unique "
                   f"short name): {shown}", err=True)
    if not any(e.get("counters") for e in art.get("entries", [])):
        click.echo(f"roofline analyze: warning: --counters {counters}: no head entry got counters, so stage C was "
                   "not applied", err=True)


def _how_to_give(exc: InputError) -> str:
    """For fields missing from an env report, the way to give them: `roofline topn` fills a starter
    it wrote; a user's file is edited."""
    fields = getattr(exc, "missing", None) or ([exc.path] if exc.path else [])
    if not fields:
        return ""
    from roofline.ingest.env_starter import FLAGS, how_to_give, is_starter

    if not all(f in FLAGS for f in fields):   # not env-report fields (a Top-N or config path)
        return ""
    return how_to_give(fields, starter=is_starter(_json_or_none(exc.file)), missing="missing" in exc.expected)


def _json_or_none(path):
    from roofline.core.inputs import read_json   # the bounded reader
    from roofline.io.errors import RooflineError

    try:
        return read_json(path)
    except (RooflineError, OSError, ValueError, TypeError):
        return None


def _warn_env_missing(art: dict) -> None:
    """One line for the env-report fields left out: what degraded for them, how to give them."""
    inp = art.get("inputs") or {}
    missing = inp.get("env_missing") or []
    if not missing:
        return
    from roofline.ingest.env_starter import how_to_give, is_starter

    need = [f for f in missing if any(f in d["reason"] for d in art.get("degraded", []))]
    n = sum(1 for d in art.get("degraded", []) if any(f in d["reason"] for f in missing))
    if not n:   # nothing depends on them: no warning (the table says which mix the gains use)
        return
    what = f"{n} entr{'y that needs' if n == 1 else 'ies that need'} {', '.join(need)} degraded, the others are analysed"
    click.echo(f"roofline analyze: warning: {inp.get('env')}: not given: {', '.join(missing)} ({what})"
               f"{how_to_give(need or missing, starter=is_starter(_json_or_none(inp.get('env'))))}", err=True)


@click.command("analyze")
@click.argument("topn", required=False, type=click.Path(path_type=Path))
@click.option("--env", "env", type=click.Path(dir_okay=False, path_type=Path),
              help="env_report.json (default: beside the Top-N, then each parent up to the run root).")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path),
              help="The model's Hugging Face config.json (optional; same search as --env).")
@click.option("--counters", type=click.Path(dir_okay=False, path_type=Path),
              help="Stage C: an .ncu-rep, the CSV of `ncu --import R --csv --page raw`, or a rocprofv3 counter CSV.")
@click.option("--stage", type=click.Choice(["A", "B", "C"]), default=None,
              help="Force the stage label (default: C with counters, B when captured shapes are present, else A).")
@click.option("--head-threshold", "head_threshold", type=FiniteFloat(0, 100), default=HEAD_THRESHOLD_PCT, show_default=True,
              help="Analyse only entries with pct_gpu_time >= this (HEAD_THRESHOLD_PCT).")
@click.option("--head-cap", type=Count(), default=HEAD_CAP, show_default=True,
              help="At most this many head entries.")
@click.option("--analysis-skill", type=click.Choice(["roofline", "none"]), default="roofline", show_default=True,
              help="`none` = level L0: emit nothing at all.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the artifact here (default: beside the Top-N).")
@click.option("--format", "fmt", type=click.Choice(["json", "md", "table"]), default="table", show_default=True,
              help="What to print on stdout after writing the artifact.")
@click.option("--peaks", "peaks_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The pipeline's peaks.md (a markdown table keyed by gfx or GPU name, one column per roof "
                   "with its unit) or a YAML peak table (the format of `roofline peaks show`); default: a "
                   "peaks.md beside the env report, then the built-in tables.")
@click.option("--no-write", is_flag=True, help="Print only; write no artifact.")
@click.option("--isl", type=Count(), default=None,
              help="Workload: input tokens per request; with --osl and --conc the gains are projected onto "
                   "this workload (default: the env report's workload).")
@click.option("--osl", type=Count(), default=None, help="Workload: output tokens per request.")
@click.option("--conc", type=Count(), default=None, help="Workload: concurrent requests.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (the artifact is still written).")
def analyze(topn, env, config, counters, stage, head_threshold, head_cap, analysis_skill, out_dir, fmt,
            peaks_file, no_write, isl, osl, conc, quiet):
    """Analyse TOPN (profile_topN.json, or the round folder holding it) into profile_roofline.json
    and profile_roofline.md. TOPN may also be a PyTorch profiler trace (.json or .json.gz): its
    Top-N is built in the same process (as `roofline topn` would) into a folder beside the trace,
    TRACE_roofline/ (or --out), with a starter env report, and analysed there.

    For each head kernel: its byte/FLOP model, achieved bandwidth and FLOP/s against the device's
    roofs, the bound type (memory | compute | latency | unknown), a headroom verdict against what a
    good kernel of its class reaches (target_eff), the attainable speedup and the expected
    end-to-end gain, the route (which kind of fix), and both rankings: by % of GPU time and by
    expected gain. Entries that cannot be modelled degrade one by one; the run does not fail.

    Without TOPN, the bundled worked example (roofline/data/example/) is analysed and nothing is written.
    Formats and method: docs/ in the repository.

    Exit codes: 0 on success (degraded entries included), 2 on unusable input.
    """
    if analysis_skill == "none":
        return  # L0: emit nothing; the caller behaves as before this feature existed
    import roofline.io.schema

    roofline.io.schema.LEAN_JSONSCHEMA = True     # a command: jsonschema without its format plug-ins (start-up)
    _check_kinds(env, config)
    wl = _workload_flags(isl, osl, conc)
    topn, no_write = _topn_or_example(topn, out_dir, no_write, dict(env=env, config=config, isl=isl, osl=osl,
                                                                      conc=conc, quiet=quiet))
    from roofline.commands.analyze_trace import held_lines, outputs_kept_on_success

    with outputs_kept_on_success():   # analyze TRACE: a refused run removes what the conversion wrote
        art = _run_api(topn, env, config, stage, counters, head_threshold, head_cap, peaks_file, wl)
        _check_schema(art)
        for line in held_lines():   # what the conversion said, once the analysis went through
            click.echo(line, err=True)
        if not quiet:
            for se in art.get("skill_errors", []):
                if se.get("where") == "peaks":  # e.g. a malformed peaks.md: one line, not a failed run
                    click.echo(f"roofline analyze: warning: {se['error']}", err=True)
            _warn_ignored(topn, counters, art)
            _warn_env_missing(art)
        _write_and_print(art, None if no_write else (out_dir or topn.parent), fmt, quiet)
    if not quiet and (art.get("inputs") or {}).get("config_mismatch"):   # after the write: an error stays one line
        click.echo(f"roofline analyze: warning: {art['inputs']['config_mismatch']}", err=True)


def _workload_flags(isl, osl, conc) -> dict | None:
    """--isl/--osl/--conc: all three or none (a workload needs each; one line, exit 2 otherwise)."""
    given = {k: v for k, v in (("isl", isl), ("osl", osl), ("conc", conc)) if v is not None}
    if given and len(given) < 3:
        lack = [f"--{k}" for k in ("isl", "osl", "conc") if k not in given]
        click.echo(f"roofline analyze: a workload needs --isl, --osl and --conc: {', '.join(lack)} not given",
                   err=True)
        sys.exit(2)
    return given or None


def _topn_or_example(topn, out_dir, no_write, opts):
    """The Top-N to analyse (the bundled example without one, then written nowhere; a trace's,
    built here: commands/analyze_trace.py), refused (exit 2) when it is another kind of file."""
    if topn is None:
        if out_dir is not None:
            click.echo(f"roofline analyze: --out {out_dir} ignored: no TOPN given, so the bundled example is "
                       "analysed and nothing is written", err=True)
        click.echo(f"(no TOPN given: analysing the bundled example "
                   f"{EXAMPLE.relative_to(EXAMPLE.parents[5]).as_posix()})", err=True)
        return EXAMPLE, True
    from roofline.commands.paths import in_round
    from roofline.io.filekinds import check

    topn = in_round(topn, "profile_topN.json", "analyze", "a Top-N (profile_topN.json)")
    from roofline.commands.analyze_trace import is_trace, topn_of_trace

    if is_trace(topn):
        return topn_of_trace(topn, out_dir, opts), no_write
    wrong = check(topn, ("topn",), "a Top-N (profile_topN.json)")
    if wrong:
        click.echo(f"roofline analyze: {wrong}", err=True)
        sys.exit(2)
    return topn, no_write


def _check_kinds(env, config) -> None:
    """--env / --config given a file of another kind (a Top-N, a trace, ...): say which, exit 2."""
    from roofline.io.filekinds import check

    for opt, path, kind, wanted in (("--env", env, "env_report", "an env report (env_report.json)"),
                                    ("--config", config, "config", "a model config.json")):
        wrong = check(path, (kind,), wanted) if path is not None else None
        if wrong:
            click.echo(f"roofline analyze: {opt} {wrong}", err=True)
            sys.exit(2)


def _run_api(topn, env, config, stage, counters, head_threshold, head_cap, peaks_file, wl=None) -> dict:
    """The API's artifact; an unusable input is one line on stderr and exit 2."""
    from roofline.api import analyze as api_analyze

    try:
        return api_analyze(topn, env, config, stage=stage, counters=counters, head_threshold_pct=head_threshold,
                           head_cap=head_cap, peaks_file=peaks_file, workload=wl)
    except InputError as exc:
        click.echo(f"roofline analyze: {exc}{_how_to_give(exc)}", err=True)
        sys.exit(2)
    except RooflineError as exc:  # PeaksError, CounterReadError (an unreadable --counters report), ...
        click.echo(f"roofline analyze: {exc}", err=True)
        sys.exit(2)


def _check_schema(art: dict) -> None:
    from roofline.io.schema import validate_artifact

    try:
        validate_artifact(art)  # what is printed or written is a schema-valid artifact, or nothing
    except Exception as exc:  # noqa: BLE001 - jsonschema.ValidationError: a bug, said in one line
        where = "$." + ".".join(str(p) for p in getattr(exc, "absolute_path", []))
        click.echo(f"roofline analyze: internal error: the artifact breaks its schema at {where}: "
                   f"{' '.join(str(getattr(exc, 'message', exc)).split())[:200]} (a bug: please report it)", err=True)
        sys.exit(2)


def _write_and_print(art: dict, dest, fmt: str, quiet: bool = False) -> None:
    """Write the artifact pair into dest (None: nowhere), then print it in fmt on stdout (nothing
    with quiet)."""
    from roofline.report import artifact as report

    if dest is not None:
        try:
            pj, pm = report.write_artifact(art, dest)
        except OSError as exc:
            click.echo(f"roofline analyze: cannot write the artifact in {dest}: {exc.strerror or exc}", err=True)
            sys.exit(2)
        if not quiet:
            click.echo(f"wrote {pj} and {pm.name}", err=True)
    if quiet:
        return
    if fmt == "json":
        click.echo(report.to_json(art), nl=False)
    elif fmt == "md":
        click.echo(report.to_markdown(art), nl=False)
    else:
        click.echo(report.render_table(art), nl=False)
        if art["degraded"]:
            click.echo(f"{len(art['degraded'])} degraded: " + "; ".join(f"{d['name']}: {d['reason']}"
                                                                      for d in art["degraded"]), err=True)

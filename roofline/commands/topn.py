"""`roofline topn`: a profile_topN.json from a PyTorch trace or an Nsight Compute report."""
from __future__ import annotations

import os
import re
import sys

import click

from roofline.commands.paths import Count, FiniteFloat
from roofline.commands.topn_read import (  # the one-trace steps, shared with commands/topn_ranks.py
    _ROUND_RE, _config_or_exit, _fail, _starter_env, _topn_of_trace, _write_atomic)


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(".ncu-rep") or low.endswith(".ncu-rep.gz"):
        return "ncu-rep"
    if low.endswith(".csv") or low.endswith(".csv.gz"):
        return "ncu-csv"
    return "trace"


def _topn_of_ncu(source, kind, decode_steps, prefill_steps, regime, top, min_pct, round_no) -> dict:
    """The Top-N of an Nsight Compute report or its raw CSV (one regime, steps given or one)."""
    from roofline.ingest.ncu import NcuError, attach, ncu_steps, read_ncu_full
    from roofline.ingest.topn import build_topn

    reg = "prefill" if (prefill_steps is not None and decode_steps is None) else regime
    if decode_steps is not None and prefill_steps is not None:
        _fail(source, "an ncu report has no step ranges: give --decode-steps or --prefill-steps, not both")
    n_steps = decode_steps if reg == "decode" else prefill_steps
    try:
        read = read_ncu_full(source, reg)
    except NcuError as exc:
        _fail(source, str(exc))
    steps, notes = ncu_steps(read.aggs, reg, n_steps)
    if read.bad:
        notes.append(f"{read.bad} CSV rows without a usable duration skipped")
    src = {"kind": kind, "path": os.path.basename(source),
           "kernel_launches": sum(a.all_count for a in read.aggs)}
    names = sorted({d["name"] for d in read.devices if d.get("name")})
    if names:
        src["devices"] = names
    doc = build_topn(read.aggs, steps, notes, top=top, min_pct=min_pct, round_no=round_no, source=src)
    doc["notes"] += attach(doc, read)   # each entry's measured counters, the report's device
    return doc


ACCEPTS = ("a PyTorch profiler Chrome trace (.json, .json.gz), an Nsight Compute report (.ncu-rep) or its "
           "raw-page CSV")


def _refuse_other_kinds(source: str) -> None:
    """A file topn cannot read (missing, a FIFO, a device) or that is none of the kinds it reads (an
    image, a Top-N, an artifact, ...): one line saying what it is and what topn reads, exit 2."""
    from roofline.io.filekinds import sniff, what_is, wrong_kind
    from roofline.io.safeio import what_is_not_readable

    bad = what_is_not_readable(source)   # missing, a FIFO, a device (/dev/zero), unreadable: said as such
    if bad:
        _fail(source, bad)
    what = what_is(source)
    if what:
        _fail(source, f"this is {what}, not a profile: roofline topn reads {ACCEPTS}")
    k = sniff(source)
    if k in ("topn", "artifact", "env_report", "config", "ladder_bench"):
        click.echo(f"roofline topn: {wrong_kind(source, k, 'a profile (roofline topn reads ' + ACCEPTS + ')')}",
                   err=True)
        sys.exit(2)
    if k == "not_json" and _kind(source) == "trace":
        _fail(source, f"not JSON, so not a PyTorch profiler trace: roofline topn reads {ACCEPTS}")


@click.command(name="topn")
@click.argument("sources", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--out", "out_path", default="profile_topN.json", show_default=True,
              type=click.Path(dir_okay=False), help="Where to write the Top-N JSON.")
@click.option("--decode-steps", type=Count(), default=None,
              help="Decode steps in the profiled window (launches_per_step = launches / steps).")
@click.option("--prefill-steps", type=Count(), default=None,
              help="Prefill steps in the profiled window.")
@click.option("--regime", type=click.Choice(["decode", "prefill"]), default="decode", show_default=True,
              help="Regime of all kernels when neither step counts nor step ranges tell.")
@click.option("--decode-range", default="decode", show_default=True,
              help="Regex (case-insensitive) of record_function range names that mark one decode step.")
@click.option("--prefill-range", default="prefill", show_default=True,
              help="Regex (case-insensitive) of range names that mark one prefill step.")
@click.option("--top", type=Count(), default=30, show_default=True,
              help="Keep at most this many kernel names (by GPU time).")
@click.option("--min-pct", type=FiniteFloat(0, 100), default=0.0, show_default=True,
              help="Drop kernels below this share of GPU time (percent).")
@click.option("--round", "round_no", type=Count(0), default=None,
              help="Round number (default: from a round_<R> folder in the -o path, else 0).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes for parsing a large uncompressed trace (default: 2 where there are 2 CPUs).")
@click.option("--isl", type=Count(), default=None,
              help="Starter env report: input tokens per request (workload.isl).")
@click.option("--osl", type=Count(), default=None,
              help="Starter env report: output tokens per request (workload.osl).")
@click.option("--conc", type=Count(), default=None,
              help="Starter env report: concurrent requests (workload.conc).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="The model's Hugging Face config.json: recorded in the env report (analyze reads it).")
@click.option("--model-arch-class", type=click.Choice(["dense", "moe"]), default=None,
              help="Starter env report: model_arch_class (default: from --config, else from the kernel names).")
@click.option("--model-dtype", default=None, help="Starter env report: model_dtype (default: the captured dtypes).")
@click.option("--gfx", default=None, help="Starter env report: device key, e.g. sm_90 (default: the trace's "
              "compute capability).")
@click.option("--framework", default=None, help="Starter env report: serving framework (vllm, sglang, ...).")
@click.option("--env-report", "env_out", type=click.Path(dir_okay=False), default=None,
              help="Where to write the starter env report (default: env_report.json beside the Top-N).")
@click.option("--no-env-report", is_flag=True, help="Write no starter env report.")
@click.option("--force", is_flag=True, help="Replace an existing env report with the starter.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def topn(sources, out_path, decode_steps, prefill_steps, regime, decode_range, prefill_range, top, min_pct,
         round_no, workers, isl, osl, conc, config_file, model_arch_class, model_dtype, gfx, framework, env_out,
         no_env_report, force, quiet):
    """Build a profile_topN.json from SOURCES: a PyTorch profiler Chrome trace (.json or .json.gz,
    export_chrome_trace; record_shapes=True fills shapes/dtypes), an Nsight Compute report
    (.ncu-rep, optionally .gz) or its raw-page CSV (ncu --import R --csv --page raw). Several
    traces (or a folder): the ranks of one run, merged into one Top-N (docs/topn.md, several ranks).

    Times in the output are milliseconds; pct_gpu_time is percent of all kernel time in the window.
    Without --decode-steps/--prefill-steps, steps come from step ranges in the trace (range names
    matching --decode-range/--prefill-range, or ProfilerStep#N), else the window is one step; the
    assumption is written to 'notes' and to stderr. Exit 2 on unusable input, with one line on stderr.

    Beside the Top-N it writes a starter env_report.json (device and dtypes from the trace, the
    workload from --isl/--osl/--conc, the model config from --config), so that `roofline analyze`
    can run next; an existing env report is kept unless --force. CUDA-graph replays are detected
    and reported (replayed kernels carry no shapes).
    """
    from roofline.ingest.topn import TopNError

    source = sources[0]
    for rx in (decode_range, prefill_range):
        try:
            re.compile(rx)
        except re.error as exc:
            _fail(source, f"bad range regex {rx!r}: {exc}")
    if len(sources) > 1 or os.path.isdir(source):   # the ranks of one run: commands/topn_ranks.py
        return _ranks(dict(locals()))
    _refuse_other_kinds(source)
    config = _config_or_exit(config_file)
    if round_no is None:
        m = _ROUND_RE.search(os.path.abspath(out_path))
        round_no = int(m.group(1)) if m else 0
    kind = _kind(source)
    try:
        if kind == "trace":
            doc = _topn_of_trace(source, decode_steps, prefill_steps, regime, decode_range, prefill_range,
                                 workers, top, min_pct, round_no)
        else:
            doc = _topn_of_ncu(source, kind, decode_steps, prefill_steps, regime, top, min_pct, round_no)
    except TopNError as exc:
        _fail(source, str(exc))
    try:
        _write_atomic(out_path, doc)
    except OSError as exc:
        _fail(out_path, f"cannot write: {exc.strerror or exc}")
    env_msgs = [] if no_env_report else _starter_env(
        source, kind, doc, out_path, env_out, force, config, config_file,
        dict(isl=isl, osl=osl, conc=conc, model_arch_class=model_arch_class, model_dtype=model_dtype, gfx=gfx,
             framework=framework))
    if not quiet:
        for n in doc["notes"]:
            click.echo(f"roofline topn: note: {n}", err=True)
        click.echo(f"roofline topn: wrote {out_path}: {len(doc['entries'])} kernels, "
                   f"{doc['total_gpu_time_ms']:.3f} ms GPU time, steps decode={doc['serving']['n_decode_steps']} "
                   f"prefill={doc['serving']['n_prefill_steps']}", err=True)
        for m in env_msgs:
            click.echo(f"roofline topn: {m}", err=True)


def _ranks(o: dict) -> None:
    from roofline.commands.topn_ranks import run_ranks

    run_ranks(o)

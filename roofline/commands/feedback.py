"""`roofline feedback` and `roofline compare`: the self-correction loop of docs/method.md section 9."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from roofline.commands.paths import FiniteFloat
_BANDS = [
    click.option("--isolated-band", type=FiniteFloat(), default=None,
                 help="Isolated-kernel noise band, a fraction (default 0.034: identical isolated reruns differ ~3.4%)."),
    click.option("--e2e-band", type=FiniteFloat(), default=None,
                 help="End-to-end serving noise band, in percent (default 0.5)."),
]


def _bands_opts(f):
    for o in reversed(_BANDS):
        f = o(f)
    return f


def _bands(isolated_band, e2e_band):
    from roofline.core.judge import NoiseBands

    kw = {}
    if isolated_band is not None:
        kw["isolated"] = isolated_band
    if e2e_band is not None:
        kw["e2e_pct"] = e2e_band
    return NoiseBands(**kw)


def _fail(cmd: str, msg: str):
    click.echo(f"roofline {cmd}: {msg}", err=True)
    sys.exit(2)


@click.command("feedback")
@click.argument("artifact", type=click.Path(path_type=Path))
@click.option("--kernel", required=True, help="The entry's kernel name (or its short_name).")
@click.option("--isolated-speedup", type=FiniteFloat(0, lo_open=True), required=True, help="Measured isolated speedup, e.g. 1.56 for 1.56x.")
@click.option("--e2e-delta-pct", type=FiniteFloat(), default=None, help="Measured end-to-end serving delta, % (positive = faster).")
@click.option("--source", default="kernel team", show_default=True, help="Who measured it (recorded in the playbook).")
@click.option("--playbook-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where knowledge/backend_playbook.{md,jsonl} live (default: <run root>/knowledge).")
@click.option("--no-playbook", is_flag=True, help="Record in the artifact only.")
@_bands_opts
def feedback(artifact, kernel, isolated_speedup, e2e_delta_pct, source, playbook_dir, no_playbook, isolated_band,
             e2e_band):
    """Record a measurement of one kernel of ARTIFACT (profile_roofline.json or its round directory):
    judged against the isolated noise band (and the e2e band with --e2e-delta-pct), flagged
    model_contradicted when it beats the predicted attainable_speedup (the measurement is then
    preferred), written into the artifact, and appended to knowledge/backend_playbook.md as
    predicted vs actual. Exit 0 on success, 2 on unusable input."""
    from roofline.io.errors import FeedbackError
    from roofline.stagec.feedback import record_feedback

    try:
        res = record_feedback(artifact, kernel, isolated_speedup, e2e_delta_pct, bands=_bands(isolated_band, e2e_band),
                              playbook_dir=False if no_playbook else playbook_dir, source=source)
    except FeedbackError as exc:
        _fail("feedback", str(exc))
    except OSError as exc:
        _fail("feedback", f"{artifact}: cannot write ({exc.strerror or exc})")
    fb = res["feedback"]
    pred = fb["predicted_attainable_speedup"]
    click.echo(f"{res['entry']}: measured {fb['measured_isolated_speedup']:.3f}x isolated vs predicted "
               f"{'-' if pred is None else f'{pred:.3f}x'}: {fb['isolated_verdict']}")
    if fb["measured_e2e_delta_pct"] is not None:
        pg = fb["predicted_e2e_gain_pct"]
        click.echo(f"  e2e: {fb['e2e_verdict']}; predicted {'-' if pg is None else f'{pg:+.2f}%'}")
    click.echo(f"  model_contradicted: {str(fb['model_contradicted']).lower()}")
    if res["playbook"]:
        click.echo(f"  playbook: {res['playbook']}")


@click.command("compare")
@click.argument("round_a", type=click.Path(path_type=Path))
@click.argument("round_b", type=click.Path(path_type=Path))
@click.option("--e2e-delta-pct", type=FiniteFloat(), default=None,
              help="The pipeline's measured e2e serving delta A -> B, % (default: GPU time per step of the two Top-Ns).")
@click.option("--kernel", "kernels", multiple=True, help="Also record this kernel in the playbook even if its time did not change.")
@click.option("--playbook-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where knowledge/backend_playbook.{md,jsonl} live (default: <run root of A>/knowledge).")
@click.option("--no-playbook", is_flag=True, help="Report only; write nothing.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_bands_opts
def compare(round_a, round_b, e2e_delta_pct, kernels, playbook_dir, no_playbook, fmt, isolated_band, e2e_band):
    """Compare two rounds of the same workload, before (ROUND_A) and after (ROUND_B) a change: each
    a round directory, a profile_roofline.json or a profile_topN.json. Per kernel: the measured GPU
    time change per step and what it gave end to end, against the prediction round A made; the
    run's e2e delta against the serving band. Records kernels whose time changed in the playbook
    with measured_e2e_delta_pct filled (and fills it in round A's earlier records)."""
    from roofline.io.errors import FeedbackError
    from roofline.stagec.compare import compare as _compare

    try:
        res = _compare(round_a, round_b, bands=_bands(isolated_band, e2e_band), e2e_delta_pct=e2e_delta_pct,
                       kernels=tuple(kernels), playbook_dir=False if no_playbook else playbook_dir)
    except FeedbackError as exc:
        _fail("compare", str(exc))
    if fmt == "json":
        click.echo(json.dumps(res, indent=2))
        return
    f = lambda v, s: "-" if v is None else format(v, s)  # noqa: E731
    hdr = ["kernel", "ms/step A", "ms/step B", "measured x", "predicted x", "kernel e2e", "predicted e2e", "verdict"]
    clip = lambda n: n if len(n) <= 48 else n[:47] + "~"  # noqa: E731  (the analyze table's width)
    for w in res["warnings"]:
        click.echo(f"roofline compare: warning: {w}", err=True)
    rows = [[clip(r["short_name"] or r["kernel"]), f(r["step_ms_a"], ".4g"), f(r["step_ms_b"], ".4g"),
             f(r["measured_inrun_speedup"], ".3f"), f(r["predicted_attainable_speedup"], ".3f"),
             f(r["measured_kernel_e2e_gain_pct"], "+.2f"), f(r["predicted_e2e_gain_pct"], "+.2f"),
             r["verdict"] + (" [model_contradicted]" if r.get("model_contradicted") else "")] for r in res["kernels"]]
    w = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    click.echo("  ".join(h.ljust(n) for h, n in zip(hdr, w)).rstrip())
    for x in rows:
        click.echo("  ".join(c.ljust(n) for c, n in zip(x, w)).rstrip())
    click.echo(f"e2e: {res['e2e_verdict']}" + (f" (from {res['e2e_source']})" if res["e2e_source"] else ""))
    if res.get("playbook_skipped"):
        click.echo(f"playbook: {res['playbook_skipped']}")
    if res["playbook"]:
        click.echo(f"playbook: {res['playbook_records']} record(s) appended, {res['playbook_filled']} earlier "
                   f"record(s) given measured_e2e_delta_pct: {res['playbook']}")

"""`roofline playbook`: how wrong each op class's target_eff prior has been, and a proposal."""
from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("playbook")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--isolated-band", type=float, default=None,
              help="Isolated noise band (fraction, default 0.034): speedups at or below 1 + band are not evidence.")
def playbook(path, isolated_band):
    """Summarize PATH (knowledge/, its backend_playbook.jsonl, or any folder of the run: its run
    root's knowledge/, where feedback, compare and rerun of every round append): per op class (attention per
    regime) the evidence count (real gains: measured speedups above the isolated noise band), the
    contradictions, the median measured/predicted speedup (1.00 = calibrated), the
    median e2e error (measured - predicted, % points) and a proposed target_eff: the median of
    roofline_pct x measured speedup, what the measurements show reachable. Proposals are printed,
    never applied."""
    from roofline.io.errors import FeedbackError
    from roofline.stagec import playbook as pb
    from roofline.core.judge import NoiseBands

    if path.is_dir() and not (path / "backend_playbook.jsonl").is_file():
        path = pb.knowledge_dir(path)
        if not (path / "backend_playbook.jsonl").is_file():
            click.echo(f"roofline playbook: {path}: no backend_playbook.jsonl (nothing recorded yet for this run)",
                       err=True)
            sys.exit(2)
    try:
        recs = pb.read_records(path)
        bands = NoiseBands(**({"isolated": isolated_band} if isolated_band is not None else {}))
    except (OSError, ValueError, FeedbackError) as exc:
        click.echo(f"roofline playbook: {path}: cannot read the playbook ({exc})", err=True)
        sys.exit(2)
    prop = pb.propose_priors(recs, bands)
    if not prop:
        click.echo("no measured records yet")
        return
    f = lambda v, s: "-" if v is None else format(v, s)  # noqa: E731
    click.echo(f"{'class':12s} {'evidence':>8s} {'contra':>6s} {'meas/pred':>9s} {'e2e err':>8s} {'prior':>6s} "
               f"{'proposed':>8s}")
    for cls, s in sorted(prop.items()):
        click.echo(f"{cls:12s} {s['evidence']:8d} {s['contradictions']:6d} "
                   f"{f(s['median_measured_over_predicted'], '.2f'):>9s} {f(s['median_e2e_error_pct'], '+.2f'):>8s} "
                   f"{f(s['prior'], '.2f'):>6s} {f(s['proposed_target_eff'], '.2f'):>8s}")
    for cls, s in sorted(prop.items()):
        if s["proposed_target_eff"] is not None:
            click.echo(f"proposed target_eff[{cls}] = {s['proposed_target_eff']:.2f} (prior "
                       f"{f(s['prior'], '.2f')}; evidence: {s['evidence']} record(s), {s['contradictions']} "
                       f"contradicted the model; rests on records {', '.join(f'#{i}' for i in s['records'])} of "
                       "backend_playbook.jsonl)")
        elif s.get("no_proposal"):
            click.echo(f"no proposal for target_eff[{cls}]: {s['no_proposal']} (records "
                       f"{', '.join(f'#{i}' for i in s['records'])})")
    click.echo("(proposals only, never applied: docs/method.md section 4 says where the priors live and how to "
               "adopt one)")

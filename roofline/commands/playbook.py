"""`roofline playbook`: how wrong each op class's target_eff prior has been, and a proposal."""
from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("playbook")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def playbook(path):
    """Summarize PATH (knowledge/ or its backend_playbook.jsonl): per op class, the number of
    re-runs, the median measured/predicted attainable speedup (1.00 = calibrated) and a proposed
    target_eff from what the re-runs reached. Proposals are printed, never applied."""
    from roofline import rerun, routing

    try:
        recs = rerun.read_playbook(path)
    except (OSError, ValueError) as exc:
        click.echo(f"roofline playbook: {path}: cannot read the playbook ({exc})", err=True)
        sys.exit(2)
    summ = rerun.summarize_playbook(recs)
    if not summ:
        click.echo("no measured records yet")
        return
    click.echo(f"{'class':12s} {'n':>3s} {'meas/pred':>9s} {'prior':>6s} {'proposed':>8s}")
    for cls, s in sorted(summ.items()):
        mp = s["median_measured_over_predicted"]
        prior = s["prior"] if s["prior"] is not None else routing.TARGET_EFF.get(cls)
        click.echo(f"{cls:12s} {s['n']:3d} {('-' if mp is None else f'{mp:.2f}'):>9s} "
                   f"{('-' if prior is None else f'{prior:.2f}'):>6s} {s['proposed_target_eff']:8.2f}")
    click.echo("(proposals only: edit roofline/routing.py TARGET_EFF to adopt one)")

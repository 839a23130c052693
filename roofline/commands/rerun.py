"""`roofline rerun`: stage C for GEMM heads through the ladder (GPU)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from roofline.io.errors import RooflineError
from roofline.rerun import rerun_artifact  # the work; this module is only the command


@click.command("rerun")
@click.argument("artifact", type=click.Path(exists=True, path_type=Path))
@click.option("--entry", "entries", multiple=True, help="Re-run only this entry (name or short name); repeatable.")
@click.option("--counters", is_flag=True, help="Also collect Nsight Compute counters for the isolated launch.")
@click.option("--dispatch", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A dispatch table JSON (default: the one built from the ladder's committed bench).")
@click.option("--level", type=int, default=None, help="Force a ladder level instead of the dispatch table.")
@click.option("--playbook-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where knowledge/backend_playbook.{md,jsonl} live (default: <run root>/knowledge).")
@click.option("--l2", "l2", type=click.Choice(["auto", "cold", "warm"]), default="auto", show_default=True,
              help="L2 state of the isolated timing and counters, the same for ladder and library: cold "
                   "(flushed before each launch), warm, or auto (warm when the operands fit in half the L2).")
def rerun(artifact, entries, counters, dispatch, level, playbook_dir, l2):
    """Stage C: re-run each GEMM head of ARTIFACT (profile_roofline.json, or its round folder) in isolation through the
    ladder level the dispatch table picks, cuBLAS beside it; check first, time (median, p20/p80),
    optionally collect counters; write the measurement back (stage C) and append predicted vs
    measured to the playbook. Needs an sm_90a GPU; without one, says so and changes nothing."""
    from roofline.commands.paths import in_round
    from roofline.io.filekinds import check

    artifact = in_round(artifact, "profile_roofline.json", "rerun", "an analysis artifact (profile_roofline.json)")
    wrong = check(artifact, ("artifact",), "an analysis artifact (profile_roofline.json)")
    if wrong:
        click.echo(f"roofline rerun: {wrong}", err=True)
        sys.exit(2)
    try:
        res = rerun_artifact(artifact, entries, counters, dispatch, playbook_dir,
                             progress=named_progress, level=level, l2=l2)
    except (RooflineError, RuntimeError) as exc:  # RerunError (no GPU, ...); a launch the driver refused
        click.echo(f"roofline rerun: {exc}", err=True)
        sys.exit(2)
    for name, why in res["skipped"].items():
        click.echo(f"skipped {name}: {why}", err=True)
    if not res["rerun"]:
        click.echo("roofline rerun: no GEMM head was re-run; artifact unchanged", err=True)
        return
    click.echo(f"re-ran {len(res['rerun'])} head(s); artifact now stage C; playbook {res['playbook']}")


def named_progress(work, file=None):
    """The re-run's progress bar, naming the head it is working on (a head with counters takes tens of
    seconds): yields the plan's items ((entry, problems, level, why), as measure_heads iterates them)."""
    from tqdm import tqdm

    bar = tqdm(work, desc="re-run", unit="head", file=file)
    for item in bar:
        e, lvl = item[0], item[2]
        bar.set_description(f"re-run {(e.get('short_name') or e['name'])[:40]} (level {lvl})", refresh=True)
        yield item

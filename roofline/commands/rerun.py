"""`roofline rerun`: stage C for GEMM heads through the ladder (GPU)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def _find_run_root(start: Path) -> Path:
    from roofline.inputs import find_upwards

    env = find_upwards(start, "env_report.json")
    return env.parent if env else start


def rerun_artifact(artifact: Path, entries=(), counters: bool = False, dispatch: Path | None = None,
                   playbook_dir: Path | None = None, progress=None, level: int | None = None,
                   l2: str = "auto") -> dict:
    """The whole re-run, also used by the hook. Returns {"rerun": [names], "skipped": {name: why},
    "playbook": path|None}. Raises RuntimeError with one line when the machine cannot do it.
    With counters, the measured work mix goes back through the stage-C merge of `analyze
    --counters` (rerun.restage): measured bytes on the memory axis, confidence high only there."""
    from roofline import report, rerun

    art = json.loads(artifact.read_text())
    table = json.loads(dispatch.read_text()) if dispatch else rerun.default_dispatch_table()
    arch = rerun.device_arch()
    if arch is None:
        raise RuntimeError("no GPU (CuPy cannot see a CUDA device): nothing re-run, artifact unchanged")
    heads = [e for e in art["entries"] if e.get("modeled") and e.get("op_class") in ("gemm", "moe")
             and (not entries or e["name"] in entries or e.get("short_name") in entries)]
    done, skipped = [], {}
    work = []
    for e in heads:
        probs = rerun.gemm_problems(e)
        if not probs:
            skipped[e["name"]] = "no GEMM shape to re-run (stage A without N/K?)"
            continue
        lvl, why = (level, f"level {level} forced") if level else rerun.choose_level(
            table, probs[0].M, probs[0].N, probs[0].K, probs[0].dtype, arch)
        if lvl is None:
            skipped[e["name"]] = why
            continue
        work.append((e, probs, lvl, why))
    it = progress(work) if progress else work
    records = []
    for e, probs, lvl, why in it:
        mode, mode_why = rerun.l2_mode_for(probs, l2)
        meas = rerun.measure_problems(probs, lvl, l2=mode)
        meas["dispatch_reason"], meas["l2_mode_reason"] = why, mode_why
        if not meas["check_ok"]:
            skipped[e["name"]] = f"level {lvl} failed the correctness check; not timed"
            continue
        if counters:
            # the library kernel is what ran in the run: its counters describe the in-run work
            target = "cublas" if rerun._is_library_kernel(e) else "ladder"
            meas["counters"] = rerun.collect_mix_counters(probs, lvl, target=target, l2=mode)
            rec = rerun.counters_record(e, meas["counters"])
            if rec is not None:
                records.append(rec)
        rerun.write_back(art, e["name"], meas)
        done.append(e["name"])
    pb = None
    if records:
        try:
            art = rerun.restage(art, artifact, records)
        except FileNotFoundError as exc:
            for e in art["entries"]:
                if e["name"] in done:
                    e["notes"] += f"; L4: counters recorded in measured.counters but not merged ({exc})"
    if done:
        report.write_artifact(art, artifact.parent)
        if playbook_dir is not False:
            d = playbook_dir or (_find_run_root(artifact.parent) / "knowledge")
            for name in done:
                ent = next(x for x in art["entries"] if x["name"] == name)
                pb, _ = rerun.append_playbook(d, rerun.playbook_record(art, ent))
    return {"rerun": done, "skipped": skipped, "playbook": str(pb) if pb else None}


@click.command("rerun")
@click.argument("artifact", type=click.Path(exists=True, dir_okay=False, path_type=Path))
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
    """Stage C: re-run each GEMM head of ARTIFACT (profile_roofline.json) in isolation through the
    ladder level the dispatch table picks, cuBLAS beside it; check first, time (median, p20/p80),
    optionally collect counters; write the measurement back (stage C) and append predicted vs
    measured to the playbook. Needs an sm_90a GPU; without one, says so and changes nothing."""
    from tqdm import tqdm

    try:
        res = rerun_artifact(artifact, entries, counters, dispatch, playbook_dir,
                             progress=lambda xs: tqdm(xs, desc="re-run", unit="head"), level=level, l2=l2)
    except RuntimeError as exc:
        click.echo(f"roofline rerun: {exc}", err=True)
        sys.exit(2)
    for name, why in res["skipped"].items():
        click.echo(f"skipped {name}: {why}", err=True)
    if not res["rerun"]:
        click.echo("roofline rerun: no GEMM head was re-run; artifact unchanged", err=True)
        return
    click.echo(f"re-ran {len(res['rerun'])} head(s); artifact now stage C; playbook {res['playbook']}")

"""`roofline ladder advise INPUT --level N [--shape MxNxK]`: the seed-000 "what next?" answer."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def _fail(msg: str):
    click.echo(f"roofline ladder advise: {msg}", err=True)
    sys.exit(2)


def _shape(text: str | None):
    if text is None:
        return None
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        _fail(f"--shape must be MxNxK, got {text!r}")
    if min(m, n, k) < 1:
        _fail(f"--shape: M, N, K must be >= 1, got {text!r}")
    return m, n, k


@click.command("advise")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--level", "level", type=int, required=True, help="the level the GEMM is at now")
@click.option("--shape", default=None, help="MxNxK of the GEMM (needed for a counter report, or a bench with several shapes)")
@click.option("--kernel", default=None, help="counter report: substring of the GEMM kernel's name (when it has several)")
@click.option("--evidence", "evidence", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="bench results to use as the evidence base (repeatable); default: the repository's fixtures/ladder/*.json")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def advise_cmd(source, level, shape, kernel, evidence, fmt):
    """My GEMM is at level N: what next? SOURCE is a ladder bench result (`roofline ladder bench
    --out`) or an Nsight Compute report (.ncu-rep, .ncu-rep.gz, or its raw-page CSV) of your own
    GEMM. Answers with seed 000's five outputs: one conclusion (the next level, or stop), evidence
    vs assumptions, the next level's contract (correctness, performance vs previous level /
    library / roof, resource budget), minimal validation with a falsifiable experiment, risks,
    fallback and the stopping rule (within the 3.4 % isolated band of the practical roof, or no
    stable gain from the next level: stop). Evidence: the project's recorded ladder benches."""
    from roofline.errors import RooflineError

    from . import advise as adv

    shp = _shape(shape)
    try:
        ev_files = list(evidence) if evidence else adv.default_evidence_files()
        if not ev_files:
            click.echo(f"roofline ladder advise: warning: no recorded ladder benches in {adv.RESULTS_DIR} (an "
                       "install from a wheel has none): advising without that evidence; give --evidence BENCH.json",
                       err=True)
        raw = None
        try:
            raw = json.loads(source.read_text(encoding="utf-8"))
        except FileNotFoundError:
            _fail(f"{source}: no such file")
        except (UnicodeDecodeError, json.JSONDecodeError, IsADirectoryError):
            raw = None
        if isinstance(raw, (dict, list)):
            data = adv.read_bench(source)
            if shp is None:
                shapes = sorted({(r["m"], r["n"], r["k"]) for r in data["rows"] if r["level"] == level})
                if len(shapes) != 1:
                    _fail(f"{source}: give --shape MxNxK (level {level} shapes here: "
                          f"{', '.join('x'.join(map(str, s)) for s in shapes) or 'none'})")
                shp = shapes[0]
            obs = adv.load_evidence([source, *ev_files])
            standing = adv.standing_from_bench(data, str(source), level, shp)
        else:
            from roofline.counters import CounterReadError, load

            if shp is None:
                _fail(f"{source}: a counter report does not record the GEMM's shape: give --shape MxNxK")
            try:
                recs = load(source)
            except CounterReadError as exc:
                _fail(str(exc))
            rec = adv.pick_kernel(recs, kernel, str(source))
            obs = adv.load_evidence(ev_files)
            standing = adv.standing_from_counters(rec, str(source), level, shp, obs)
        result = adv.advise(standing, level, shp, obs, str(source))
    except RooflineError as exc:
        _fail(str(exc))
    click.echo(json.dumps(result, indent=1) if fmt == "json" else adv.render_text(result))

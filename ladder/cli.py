"""`roofline ladder`: the ladder's one command-line front end: list, run, bench, render, plot and
advise (the device driver for a whole device call is device_suite.py / device.sh)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .contracts import CONTRACTS
from .registry import DENSE_LEVELS, LEVELS, get_level


def _parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"shape must be MxNxK, got {text!r}")
    if min(m, n, k) < 1:
        raise click.BadParameter("M, N, K must be >= 1")
    return m, n, k


def _need_gpu():
    from . import gpu
    if not gpu.gpu_available():
        click.echo("roofline ladder: needs an NVIDIA sm_90a GPU with CuPy (pip install 'roofline[gpu]': CuPy, "
                   "cuda-python, nsight-python and torch)", err=True)
        sys.exit(2)
    if gpu.torch_or_none() is None:
        click.echo(f"roofline ladder: note: {gpu.TORCH_MISSING}; the levels run without it", err=True)


@click.group()
def ladder():
    """The hand-written sm_90a GEMM ladder. Contract: C[M,N] = A[M,K] B[N,K]^T ("TN": both
    K-contiguous, B as an nn.Linear weight), bf16 in, fp32 accumulate, bf16 out."""


@ladder.command("list")
@click.option("--markdown", is_flag=True, help="Print the README table.")
def list_cmd(markdown):
    """The levels of the registry."""
    from .registry import render_markdown_table
    if markdown:
        click.echo(render_markdown_table())
        return
    for lv in LEVELS:
        bm, bn, bk = lv.tile_mnk
        click.echo(f"L{lv.id}  {lv.file:22s} tile {bm}x{bn}x{bk}  {lv.threads} thr  "
                   f"{lv.total_smem_bytes // 1024} KiB smem{' (dyn)' if lv.dyn_smem_bytes else ''}  "
                   f"regs<={lv.regs_max}  [{lv.domain_text()}]")
        click.echo(f"     {lv.description}")


@ladder.command("run")
@click.option("--level", "level_id", type=int, required=True)
@click.option("--shape", required=True, help="MxNxK")
@click.option("--json", "as_json", is_flag=True)
def run_cmd(level_id, shape, as_json):
    """Check one level on one shape, then time it beside cuBLAS."""
    m, n, k = _parse_shape(shape)
    try:
        lv = get_level(level_id)
    except KeyError as exc:
        raise click.BadParameter(str(exc))
    if lv.contract != "gemm-bf16":
        raise click.BadParameter(f"level {lv.id} solves {lv.contract}: run it with python3 -m roofline.ladder.device_suite "
                                 f"{CONTRACTS[lv.contract].command} --targets {lv.id}")
    if not lv.supports(m, n, k):
        raise click.BadParameter(f"level {lv.id} supports {lv.domain_text()}")
    _need_gpu()
    from . import bench
    res = bench.run_bench(levels=(lv,), shapes=((m, n, k),)).to_dict()
    click.echo(json.dumps(res, indent=1) if as_json else bench.render_table(res))
    if not all(r.get("check_ok", True) for r in res["rows"]):
        sys.exit(1)


@ladder.command("bench")
@click.option("--shape", "shapes", multiple=True, help="MxNxK (repeatable); default: the --shapes set")
@click.option("--shapes", "shape_set", default="default", show_default=True,
              help="named shape set: default | square-and-llama | serving | serving-all-levels (+ single tiles) | "
                   "serving-prefill | serving-decode | square-8192")
@click.option("--level", "level_ids", type=int, multiple=True, help="level id (repeatable); default: all")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="write results JSON here")
def bench_cmd(shapes, shape_set, level_ids, out):
    """All levels x a shape set, each checked then timed beside cuBLAS (same process)."""
    try:
        lvls = tuple(get_level(i) for i in level_ids) if level_ids else DENSE_LEVELS
    except KeyError as exc:
        raise click.BadParameter(str(exc))
    shp = tuple(_parse_shape(s) for s in shapes) if shapes else None
    from .bench import SHAPE_SETS
    if shape_set not in SHAPE_SETS:
        raise click.BadParameter(f"unknown shape set {shape_set!r}; known: {sorted(SHAPE_SETS)}")
    _need_gpu()
    from tqdm import tqdm

    from . import bench
    res = bench.run_bench(levels=lvls, shapes=shp or bench.SHAPE_SETS[shape_set],
                          progress=lambda jobs: tqdm(jobs, desc="ladder bench", unit="run", file=sys.stderr)).to_dict()
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1))
    click.echo(bench.render_table(res))
    if not all(r.get("check_ok", True) for r in res["rows"]):
        sys.exit(1)


def _bench_result(path: Path, cmd: str) -> dict:
    """The bench result JSON at `path`, or one line on stderr and exit 2 (wrong kind, not JSON)."""
    from roofline.io.filekinds import kind_of_doc, sniff, wrong_kind

    try:
        from roofline.io.safeio import load_json

        res = load_json(path)   # bounded: a FIFO, /dev/zero or a 100k-deep file is refused, not read
    except (OSError, UnicodeDecodeError, ValueError):
        k = sniff(path)
        what = wrong_kind(path, k, "a ladder bench result") if k not in ("json", "not_json") else \
            f"{path}: not a JSON ladder bench result"
        click.echo(f"roofline ladder {cmd}: {what}; `roofline ladder bench --out FILE` writes one", err=True)
        sys.exit(2)
    k = kind_of_doc(res)
    if k != "ladder_bench":
        what = wrong_kind(path, k, "a ladder bench result") if k != "json" else \
            f"{path}: not a ladder bench result (no 'meta' and 'rows')"
        click.echo(f"roofline ladder {cmd}: {what}; `roofline ladder bench --out FILE` writes one", err=True)
        sys.exit(2)
    return res


@ladder.command("render")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--peaks/--no-peaks", default=True, help="Recompute the peaks-table column from roofline.peaks.")
@click.option("--pivot", is_flag=True, help="One line per shape: cuBLAS ms and each level's % of cuBLAS.")
def render_cmd(results, peaks, pivot):
    """Render a bench results JSON (from `bench --out`) as the markdown table; no GPU needed."""
    from . import bench
    res = _bench_result(results, "render")
    try:
        if pivot:
            click.echo(bench.render_pivot(res))
            return
        if peaks:
            bench.add_roofline_columns(res, bench.table_peaks(res["meta"]["device"]))
        text = bench.render_table(res)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        click.echo(f"roofline ladder render: {results}: not a ladder bench result (a field is missing or of the "
                   f"wrong type: {exc.__class__.__name__}: {exc}); `roofline ladder bench --out FILE` writes one",
                   err=True)
        sys.exit(2)
    click.echo(text)


@ladder.command("plot")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=Path("ladder.png"),
              show_default=True, help="Picture to write (.png or .svg).")
def plot_cmd(results, out):
    """Draw the TFLOP/s of every level beside cuBLAS and the roof, from a bench JSON
    (`roofline ladder bench --out`), e.g. fixtures/ladder/h200_bench_square_llama.json. No GPU needed."""
    from .plot import plot_ladder

    res = _bench_result(results, "plot")
    try:
        d = plot_ladder(res, out)
    except (ValueError, KeyError) as exc:
        click.echo(f"roofline ladder plot: {results}: not a ladder bench result ({exc})", err=True)
        sys.exit(2)
    click.echo(f"wrote {out}: {len(d['shapes'])} shapes, {len(d['series'])} series")


# ---------------------------------------------------------------- advise
def _advise_fail(msg: str):
    click.echo(f"roofline ladder advise: {msg}", err=True)
    sys.exit(2)


def _advise_shape(text: str | None):
    if text is None:
        return None
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        _advise_fail(f"--shape must be MxNxK, got {text!r}")
    if min(m, n, k) < 1:
        _advise_fail(f"--shape: M, N, K must be >= 1, got {text!r}")
    return m, n, k


@ladder.command("advise")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--level", "level", type=int, required=True, help="the level the GEMM is at now")
@click.option("--shape", default=None, help="MxNxK of the GEMM (needed for a counter report, or a bench with several shapes)")
@click.option("--kernel", default=None, help="counter report: substring of the GEMM kernel's name (when it has several)")
@click.option("--evidence", "evidence", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="bench results to use as the evidence base (repeatable); default: the recorded H200 benches "
                   "shipped with the package (roofline/data/ladder_evidence_h200.json)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def advise_cmd(source, level, shape, kernel, evidence, fmt):
    """My GEMM is at level N: what next? SOURCE is a ladder bench result (`roofline ladder bench
    --out`) or an Nsight Compute report (.ncu-rep, .ncu-rep.gz, or its raw-page CSV) of your own
    GEMM. Answers with five outputs (ladder/README.md): one conclusion (the next level, or stop), evidence
    vs assumptions, the next level's contract (correctness, performance vs previous level /
    library / roof, resource budget), minimal validation with a falsifiable experiment, risks,
    fallback and the stopping rule (within the 3.4 % isolated band of the practical roof, or no
    stable gain from the next level: stop). Evidence: the project's recorded ladder benches."""
    from roofline.io.errors import RooflineError

    from . import evidence as ev, standing as stn
    from .advise import advise
    from .advise_text import render_text

    shp = _advise_shape(shape)
    try:
        ev_files = list(evidence)
        base = [] if evidence else ev.default_evidence()
        if not evidence and not base:
            click.echo(f"roofline ladder advise: warning: no shipped ladder evidence (roofline/data/{ev.EVIDENCE_FILE}"
                       "): advising without it; give --evidence BENCH.json", err=True)
        raw = None
        try:
            from roofline.io.safeio import UnsafeInput, load_json

            raw = load_json(source)   # bounded: a special file or deep nesting is one line
        except FileNotFoundError:
            _advise_fail(f"{source}: no such file")
        except UnsafeInput as exc:
            _advise_fail(f"{source}: {exc.problem}")
        except (UnicodeDecodeError, json.JSONDecodeError, IsADirectoryError):
            raw = None
        if isinstance(raw, (dict, list)):
            data = ev.read_bench(source)
            if shp is None:
                shapes = sorted({(r["m"], r["n"], r["k"]) for r in data["rows"] if r["level"] == level})
                if len(shapes) != 1:
                    _advise_fail(f"{source}: give --shape MxNxK (level {level} shapes here: "
                          f"{', '.join('x'.join(map(str, s)) for s in shapes) or 'none'})")
                shp = shapes[0]
            obs = ev.load_evidence([source, *ev_files], base)
            standing = stn.standing_from_bench(data, str(source), level, shp)
        else:
            from roofline.counters import CounterReadError, load

            if shp is None:
                _advise_fail(f"{source}: a counter report does not record the GEMM's shape: give --shape MxNxK")
            try:
                recs = load(source)
            except CounterReadError as exc:
                _advise_fail(str(exc))
            rec = stn.pick_kernel(recs, kernel, str(source))
            obs = ev.load_evidence(ev_files, base)
            standing = stn.standing_from_counters(rec, str(source), level, shp, obs)
        result = advise(standing, level, shp, obs, str(source))
    except RooflineError as exc:
        _advise_fail(str(exc))
    click.echo(json.dumps(result, indent=1) if fmt == "json" else render_text(result))

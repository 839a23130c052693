"""`roofline peaks list | show DEVICE | validate | measure | envelope`.

The tables in peaks/*.yaml (or $ROOFLINE_PEAKS_DIR) are the single source of every
peak number; these commands only read them (and `measure` writes a new one).
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from roofline.io.errors import PeaksError
from roofline.peaks import _pick, find_table, load_tables, peaks_dir
from roofline.peaks import measure as pm
from roofline.peaks.validate import read_tables, validate_table


def _fmt_fig(fig, scale, unit) -> str:
    val, kind, _ = _pick(fig)
    if val is None:
        return "-"
    return f"{val / scale:.0f} {unit} ({kind})" if scale >= 1e12 else f"{val / scale:.2f} {unit} ({kind})"


def _need_dir(directory, cmd: str) -> None:
    """--dir must name an existing folder: one line and exit 2 otherwise (never an empty listing)."""
    if directory is not None and not Path(directory).is_dir():
        click.echo(f"roofline peaks {cmd}: --dir {directory}: no such directory", err=True)
        sys.exit(2)


@click.group("peaks")
def peaks():
    """Hardware peak tables: list, show, validate, measure."""


@peaks.command("list")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="peak tables directory (default: the bundled tables, or $ROOFLINE_PEAKS_DIR)")
def list_cmd(directory):
    """One line per table: device, gfx, HBM roof, bf16/fp8 roofs and their kind."""
    _need_dir(directory, "list")
    tables = load_tables(directory)
    if not tables:
        click.echo(f"roofline peaks list: {directory or peaks_dir()}: no *.yaml peak table in it", err=True)
    for path, d in tables:
        hb = d.get("hbm_bw_bytes_s") or {}
        # the memory roof is the pin rate (datasheet) by convention, like roofline.peaks.from_table
        hbm = (f"{hb['datasheet']['value'] / 1e12:.2f} TB/s (datasheet)" if isinstance(hb.get("datasheet"), dict)
               else _fmt_fig(hb, 1e12, "TB/s"))
        fl = d.get("flops") or {}
        click.echo(f"{Path(path).stem:10s} {d.get('device', '?'):24s} {str(d.get('gfx', '?')):8s} "
                   f"HBM {hbm:24s} bf16 {_fmt_fig(fl.get('bf16'), 1e12, 'TFLOP/s'):24s} "
                   f"fp8 {_fmt_fig(fl.get('fp8'), 1e12, 'TFLOP/s')}")


@peaks.command("show")
@click.argument("device")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None)
def show_cmd(device, directory):
    """Print the YAML of one table, found by file stem (h200), device name or alias, or gfx."""
    _need_dir(directory, "show")
    hit = find_table(device, directory)
    if hit is None:
        names = ", ".join(Path(p).stem for p, _ in load_tables(directory))
        click.echo(f"roofline peaks show: no peak table for {device!r} (tables: {names})", err=True)
        sys.exit(2)
    click.echo(Path(hit[0]).read_text(encoding="utf-8"), nl=False)


@peaks.command("validate")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None)
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
def validate_cmd(directory, files):
    """Check every table (or FILES): required keys, positive numbers, sources, bf16 = fp16 within 5%
    (envelope to envelope), and an envelope's value = the highest median of the runs it records.
    Exit 1 when any table is bad."""
    from roofline.peaks import PeaksError, _load_yaml

    _need_dir(directory, "validate")
    items = []
    if files:
        for f in files:
            try:  # a regular file within the size limit (never blocks on a FIFO), safe YAML
                items.append((Path(f), _load_yaml(f), None))
            except PeaksError as exc:
                items.append((Path(f), None, str(exc).split(": ", 1)[-1]))
    else:
        items = read_tables(directory)
    bad = 0
    for path, data, err in items:
        errs = [err] if err else validate_table(data)
        if errs:
            bad += 1
            for e in errs:
                click.echo(f"{path}: {e}")
        else:
            click.echo(f"{path}: ok")
    if bad:
        click.echo(f"{bad} of {len(items)} table(s) bad", err=True)
        sys.exit(1)


@peaks.command("measure")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="write the measured peak table here, and the raw samples beside it (OUT.raw.json)")
@click.option("--merge", type=click.Path(dir_okay=False, exists=True), default=None,
              help="an existing envelope table: fold this run into the runs it records")
@click.option("--label", default=None, help="this run's label (default: the stem of --out, else the UTC date and time)")
@click.option("--hbm-gib", type=float, default=pm.DEFAULT_HBM_GIB, show_default=True, help="copy buffer size, GiB")
@click.option("--shapes", default=pm.DEFAULT_SHAPES_TEXT, show_default=True,
              help="GEMM shapes MxNxK, comma-separated; per dtype the best median over them (and over the "
                   "runs) is the compute roof")
@click.option("--dtypes", default=",".join(pm.GEMM_DTYPES), show_default=True)
@click.option("--layouts", default=",".join(pm.LAYOUTS), show_default=True,
              help="operand layouts per shape: nn (a @ b), linear (a @ w.t(), nn.Linear's form)")
@click.option("--rounds", type=int, default=pm.DEFAULT_ROUNDS, show_default=True,
              help="round-robin rounds over the dtypes")
@click.option("--reps", type=int, default=pm.DEFAULT_REPS, show_default=True,
              help="timed products per dtype per round (with --method burst: one burst)")
@click.option("--method", type=click.Choice(pm.METHODS), default="burst", show_default=True,
              help="burst: short bursts after an idle gap, as a prefill's GEMMs run (clocks stay high); "
                   "sustained: long back-to-back blocks (the card settles at its power-limited clock)")
def measure_cmd(out, merge, label, hbm_gib, shapes, dtypes, layouts, rounds, reps, method):
    """GPU only: one run of HBM copy bandwidth (read+write) and dense GEMM peaks per dtype through
    cuBLAS over several large shapes, with the SM clock seen while measuring; writes a peak table
    whose measured figures are envelopes (highest median over shapes and, with --merge, over runs;
    p20/p80 spread and every run kept beside). Exit 2 without a GPU. Same as
    `python3 -m roofline.commands.peaks_measure`."""
    try:
        size = pm.parse_shapes(shapes)
    except ValueError:
        click.echo(f"roofline peaks measure: --shapes {shapes!r}: expected MxNxK[,MxNxK...]", err=True)
        sys.exit(2)
    try:
        _, text = pm.measure(out, hbm_gib=hbm_gib, size=size, rounds=rounds, reps=reps, merge=merge,
                             label=label, dtypes=[d.strip() for d in dtypes.split(",") if d.strip()],
                             layouts=[x.strip() for x in layouts.split(",") if x.strip()],
                             log=lambda s: click.echo(s, err=True), method=method)
    except (pm.NoGPU, PeaksError) as exc:
        click.echo(f"roofline peaks measure: {exc}", err=True)
        sys.exit(2)
    if not out:
        click.echo(text, nl=False)


def _envelope_fail(msg):
    click.echo(f"roofline peaks envelope: {msg}", err=True)
    sys.exit(2)


def _read_table(p, what) -> dict:
    """A peak table given to `peaks envelope` (--merge / --base); one line and exit 2 when it is not one."""
    from roofline.peaks import _load_yaml   # the bounded reader (size, depth, special files, UTF-8)

    try:
        t = _load_yaml(p)
    except Exception as exc:  # noqa: BLE001 - TableFileError and an OSError: the file's problem, one line
        _envelope_fail(f"{what} {p}: {str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__}")
    if not isinstance(t, dict) or "device" not in t:
        _envelope_fail(f"{what} {p}: not a peak table (needs a 'device' key)")
    return t


def _base_table(base, mt, runs) -> dict:
    """The table giving the device block: --base, else --merge, else the bundled table of the runs' GPU."""
    if base:
        bt = _read_table(base, "--base")
    elif mt is not None:
        bt = mt
    else:
        gpu = next((r["env"].get("gpu_name") for r in runs if r["env"].get("gpu_name")), None)
        hit = find_table(gpu) if gpu else None
        if hit is None:
            _envelope_fail(f"no bundled peak table for GPU {gpu!r} of the raw runs: pass --base TABLE")
        bt = hit[1]
    return bt


@peaks.command("envelope")
@click.argument("raw_runs", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--merge", "merge", type=click.Path(dir_okay=False), default=None,
              help="an envelope table whose recorded runs are kept (a raw run with the same label replaces one)")
@click.option("--base", type=click.Path(dir_okay=False), default=None,
              help="table giving the device block and datasheet figures (default: --merge, else the bundled "
                   "table of the runs' GPU)")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None, help="write here (default: print)")
def envelope_cmd(raw_runs, merge, base, out):
    """Build a peak table whose measured figures are envelopes over RAW_RUNS (`peaks measure`
    raw.json files, one per machine start) and, with --merge, over the runs a table records:
    per dtype the highest median over runs and shapes, its spread and clock, every run beside it."""
    from roofline.peaks import envelope as pe, render

    if not raw_runs and not merge:
        _envelope_fail("give raw runs (RUN.raw.json ...) and/or --merge TABLE")
    try:
        runs = pe.load_raw_runs(raw_runs)
    except PeaksError as exc:
        _envelope_fail(str(exc))
    mt = _read_table(merge, "--merge") if merge else None
    if mt is not None:
        try:
            runs = pe.merge_runs(pe.runs_of_table(mt), runs)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            _envelope_fail(f"--merge {merge}: malformed run records ({exc.__class__.__name__}: {exc})")
    if not runs:
        _envelope_fail(f"--merge {merge}: the table records no runs and no raw run was given")
    bt = _base_table(base, mt, runs)
    gpus = {r["env"].get("gpu_name") for r in runs if r["env"].get("gpu_name")}
    if len(gpus) > 1:
        _envelope_fail(f"the runs come from different GPUs ({', '.join(sorted(gpus))}): one envelope per device")
    table = pe.build_envelope(bt, bt.get("device", "?"), runs)
    # a bf16/fp16 gap over 5% is a finding the table carries (the resolver flags that axis), not a
    # broken table: it is printed by the checks below; anything else wrong stops here
    errs = [e for e in validate_table(table) if "differ by" not in e]
    if errs:
        _envelope_fail(f"the envelope table is not valid: {errs[0]}")
    text = render.envelope_text(table)
    for line in render.envelope_lines(table):
        click.echo(line, err=True)
    for ok, line in render.checks(table):
        click.echo(f"check {'ok  ' if ok else 'FLAG'} {line}", err=True)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
        click.echo(f"roofline peaks envelope: wrote {out}: {len(runs)} run(s)", err=True)
    else:
        click.echo(text, nl=False)

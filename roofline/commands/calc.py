"""`roofline calc`: the roofline calculator for any device in the peak tables.

    roofline calc --device h200 --dtype bf16 --size 4096
    roofline calc --device b200 --dtype fp8 --mnk 64 8192 8192 --format json
    roofline calc --device h200 --dtype bf16 --sweep           # sizes 64..16384, crossover marked
    roofline calc --device b200 --dtype fp16 --size 1024 -o bars.png
    roofline calc --html calc.html                              # the self-contained page
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from roofline.core import calc as _calc
from roofline.io.errors import PeaksError


def _fail(msg: str):
    click.echo(f"roofline calc: {msg}", err=True)
    sys.exit(2)


def plot_bars(res: "_calc.CalcResult", out: Path) -> None:
    """Two horizontal bars (t_compute, t_HBM), the longer one outlined: the wall-clock bound."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.4))
    vals = [res.t_compute_s * 1e6, res.t_hbm_s * 1e6]
    cols = ["#1f77b4", "#ff7f0e"]
    bars = ax.barh(["t_compute", "t_HBM"], vals, color=cols)
    wall = 0 if res.bound == "compute" else 1
    bars[wall].set_edgecolor("#d62728")
    bars[wall].set_linewidth(3)
    for b, v in zip(bars, vals):
        ax.text(b.get_width(), b.get_y() + b.get_height() / 2, f" {_calc.fmt_time(v * 1e-6)}", va="center")
    ax.set_xlabel("time (us)")
    ax.set_xlim(0, max(vals) * 1.3)
    ax.set_title(f"{res.device} {res.dtype} GEMM {res.m}x{res.n}x{res.k}: {res.bound}-bound; "
                 f"AI {res.ai_flop_per_byte:.4g} vs ridge {res.ridge_flop_per_byte:.4g} FLOP/B", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_sweep(rows, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    r0 = rows[0]
    ns = [r.n for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.loglog(ns, [r.t_compute_s * 1e6 for r in rows], "o-", label="t_compute")
    ax.loglog(ns, [r.t_hbm_s * 1e6 for r in rows], "s-", label="t_HBM")
    ax.axvline(r0.crossover_n, color="#d62728", ls="--", label=f"crossover N* = {r0.crossover_n:.4g}")
    ax.set_xlabel("square size N")
    ax.set_ylabel("time (us)")
    ax.set_title(f"{r0.device} {r0.dtype} ({r0.roof} roofs)", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


@click.command("calc")
@click.option("--device", default="h200", show_default=True,
              help="peak table: file stem (h200, b200, mi300x, ...), device name or alias")
@click.option("--dtype", default="bf16", show_default=True, help="A and B dtype (its compute roof)")
@click.option("--out-dtype", default=None, help="C dtype (default: --dtype), e.g. bf16 for an fp8 GEMM")
@click.option("--roof", type=click.Choice(_calc.ROOF_CHOICES), default="table", show_default=True,
              help="table: the project's convention (datasheet HBM, measured compute where there is one); "
                   "datasheet or measured: that kind of figure for both roofs")
@click.option("--size", type=int, default=None, help="square GEMM N (M = N = K)")
@click.option("--mnk", type=int, nargs=3, default=None, metavar="M N K", help="a GEMM M x N x K")
@click.option("--sweep", is_flag=True, help="square sizes (64..16384, or --sizes) as a table, crossover marked")
@click.option("--sizes", default=None, help="with --sweep: comma-separated square sizes, e.g. 128,256,512,1024")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="draw the bars (or the sweep) to this .png/.svg")
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the self-contained calculator page (slider, selectors, bars) here")
def calc(device, dtype, out_dtype, roof, size, mnk, sweep, sizes, fmt, out, html_out):
    """The roofline calculator: t_compute = 2MNK / peak against t_HBM = bytes / HBM
    bandwidth (A, B, C each cross HBM once), the wall-clock bound (the longer bar), arithmetic
    intensity against the ridge (peak / bandwidth), and the square crossover size N* where the
    two bars are equal. Roofs come from peaks/*.yaml (`roofline peaks list`)."""
    if html_out is not None:
        from roofline.report.calc_html import render_page

        try:
            stem = Path(_calc._find_table(device)[0]).stem
            page = render_page(default_device=stem, default_dtype=dtype)
            html_out.write_text(page, encoding="utf-8")
        except (OSError, ValueError, PeaksError) as exc:
            _fail(f"{html_out}: {exc}")
        click.echo(f"wrote {html_out} ({len(page)} bytes, self-contained)")
        if size is None and mnk is None and not sweep:
            return
    given = sum(x is not None and x is not False for x in (size, mnk, sweep or None))
    if given != 1:
        _fail("give exactly one of --size N, --mnk M N K, --sweep (or --html FILE)")
    try:
        r = _calc.roofs(device, dtype, roof)
        if out_dtype:
            _calc.elem_bytes(out_dtype)
        if sizes is not None and not sweep:
            raise ValueError("--sizes goes with --sweep")
        if sweep:
            try:
                grid = [int(x) for x in sizes.split(",")] if sizes else _calc.SWEEP_SIZES
            except ValueError:
                raise ValueError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
            rows = _calc.sweep(r, grid, out_dtype=out_dtype)
        else:
            m, n, k = (size, size, size) if size is not None else mnk
            rows = [_calc.compute(m, n, k, r, out_dtype)]
    except (PeaksError, ValueError) as exc:
        _fail(str(exc))
    if fmt == "json":
        payload = {"sweep": [x.to_dict() for x in rows]} if sweep else rows[0].to_dict()
        click.echo(json.dumps(payload, indent=1))
    else:
        click.echo(_calc.render_sweep(rows) if sweep else _calc.render_text(rows[0]))
    if out is not None:
        try:
            (plot_sweep(rows, out) if sweep else plot_bars(rows[0], out))
        except (OSError, ValueError) as exc:
            _fail(f"{out}: {exc}")
        click.echo(f"wrote {out}", err=True)

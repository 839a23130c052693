"""The roofline picture of a profile_roofline.json: `roofline plot ARTIFACT -o roofline.png|.svg`.

A log-log plot of the device from the artifact's own `peaks` block (never a second copy of the
numbers): the memory roof (HBM pin rate), one compute roof per dtype present among the entries'
`compute_dtype`, each ridge marked. Each modeled entry is a point at (arithmetic_intensity,
achieved_flops), sized by pct_gpu_time, coloured by headroom_class, labelled by short_name. A
stage-C entry (with `bytes_measured`) also shows its stage-A/B estimate (AI from `bytes_model`)
with an arrow to the measured point.

matplotlib (Agg backend) is imported only when a picture is drawn.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import click

HEADROOM_COLORS = {
    "underperforming": "#d62728",  # red: real headroom
    "moderate": "#ff7f0e",
    "saturated": "#2ca02c",        # green: tuning has nothing left; byte reduction does
    "unknown": "#7f7f7f",
}
DTYPE_STYLES = ["-", "--", "-.", ":"]


def _num(x) -> float | None:
    """A plottable number: finite and within +-1e30 (a log axis cannot hold 1e308), else None."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) \
        and abs(x) <= 1e30 else None


def plot_points(art: dict) -> dict:
    """What the picture shows, as numbers (no matplotlib): roofs, ridges, points, stage-C arrows,
    and the entries that could not be placed (with why)."""
    pk = art.get("peaks") or {}
    bw = _num(pk.get("hbm_bw_bytes_s"))
    flops = {d: float(v) for d, v in (pk.get("flops") or {}).items() if _num(v) and _num(v) > 0}
    points, arrows, skipped = [], [], []
    for e in art.get("entries", []):
        label = e.get("short_name") or e.get("name")
        x, y = _num(e.get("arithmetic_intensity")), _num(e.get("achieved_flops"))
        if not e.get("modeled") or x is None or y is None or x <= 0 or y <= 0:
            skipped.append({"name": e.get("name"), "reason": "not modeled" if not e.get("modeled")
                            else "no positive arithmetic_intensity / achieved_flops"})
            continue
        hc = e.get("headroom_class") or "unknown"
        points.append({"name": e.get("name"), "label": label, "x": x, "y": y,
                       "pct_gpu_time": float(e.get("pct_gpu_time") or 0.0), "headroom_class": hc,
                       "color": HEADROOM_COLORS.get(hc, HEADROOM_COLORS["unknown"]),
                       "compute_dtype": e.get("compute_dtype"), "suspect": bool(e.get("suspect"))})
        bm, bmod = _num(e.get("bytes_measured")), _num(e.get("bytes_model"))
        fl = _num(e.get("flops_useful")) or _num(e.get("flops_est"))
        if bm and bmod and fl:
            # the stage-A/B estimate: same useful FLOPs and time (same y), the model's bytes
            arrows.append({"name": e.get("name"), "label": label, "from_x": fl / bmod, "from_y": y,
                           "to_x": x, "to_y": y, "bytes_model": bmod, "bytes_measured": bm})
    present = []
    for p in points:
        d = p["compute_dtype"]
        if isinstance(d, str) and d in flops and d not in present:
            present.append(d)
    if not present and flops:  # nothing says which dtype: show the widest-used tensor dtype we have
        present = [next((d for d in ("bf16", "fp8", "fp16", "fp32") if d in flops), next(iter(flops)))]
    roofs = {d: flops[d] for d in present}
    ridges = {d: flops[d] / bw for d in present} if bw else {}
    return {"device": pk.get("device"), "stage": art.get("stage"), "hbm_bw_bytes_s": bw,
            "hbm_bw_kind": pk.get("hbm_bw_kind"), "compute_roofs": roofs,
            "compute_kinds": {d: (pk.get("flops_kind") or {}).get(d) for d in roofs},
            "ridges": ridges, "points": points, "arrows": arrows, "skipped": skipped}


def plot_artifact(art: dict, path: str | Path, title: str | None = None) -> dict:
    """Draw the roofline picture of `art` into `path` (.png or .svg by suffix). Returns plot_points()
    plus "path" and "drawn": the data coordinates of each point as read back from the plotted
    artists (name, x, y, marker area), for tests and callers."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"{path}: the picture is written as .png or .svg (got {path.suffix or 'no suffix'!r})")
    info = plot_points(art)
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    bw, roofs, ridges, pts, arrows = (info["hbm_bw_bytes_s"], info["compute_roofs"], info["ridges"],
                                      info["points"], info["arrows"])
    xs = [p["x"] for p in pts] + [a["from_x"] for a in arrows] + list(ridges.values())
    ys = [p["y"] for p in pts] + list(roofs.values())
    x_lo = 10 ** math.floor(math.log10(min(xs) / 3)) if xs else 0.1
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 3)) if xs else 1e4
    y_top = max(ys) * 3 if ys else 1e15
    y_lo = 10 ** math.floor(math.log10(min(ys) / 5)) if ys else 1e9
    if bw:
        y_lo = min(y_lo, 10 ** math.floor(math.log10(bw * x_lo)))

    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max(roofs.values()) if roofs else y_top / 3
    if bw:
        xr = min(x_hi, top / bw)  # memory roof runs up to the highest compute roof
        ax.plot([x_lo, xr], [bw * x_lo, bw * xr], color="#1f77b4", lw=2.2,
                label=f"HBM {bw / 1e12:.2f} TB/s ({info['hbm_bw_kind']})")
    for i, (d, pf) in enumerate(sorted(roofs.items(), key=lambda kv: -kv[1])):
        ls = DTYPE_STYLES[i % len(DTYPE_STYLES)]
        x0 = ridges.get(d, x_lo)
        ax.plot([x0, x_hi], [pf, pf], color="black", lw=1.8, ls=ls,
                label=f"{d} {pf / 1e12:.0f} TFLOP/s ({info['compute_kinds'].get(d)})")
        if d in ridges:
            ax.axvline(ridges[d], color="black", lw=0.7, ls=":", alpha=0.6)
            ax.plot([ridges[d]], [pf], marker="D", color="black", ms=6)
            ax.annotate(f"ridge {d}: {ridges[d]:.0f} FLOP/B", (ridges[d], y_lo), textcoords="offset points",
                        xytext=(-4, 6), fontsize=8, rotation=90, ha="right", va="bottom")
    for a in arrows:
        ax.scatter([a["from_x"]], [a["from_y"]], s=60, facecolors="none", edgecolors="#333333",
                   linewidths=1.2, zorder=6)
        ax.annotate("", xy=(a["to_x"], a["to_y"]), xytext=(a["from_x"], a["from_y"]),
                    arrowprops=dict(arrowstyle="->", color="#333333", lw=1.3), zorder=6)
    drawn = []
    for p in pts:
        size = 30 + 25 * p["pct_gpu_time"]  # area grows with the share of GPU time
        art_ = ax.scatter([p["x"]], [p["y"]], s=size, color=p["color"], edgecolors="black", linewidths=0.6,
                   alpha=0.85, zorder=4, marker="X" if p["suspect"] else "o")
        ax.annotate(f"{p['label']}\n{p['pct_gpu_time']:.2f}% GPU", (p["x"], p["y"]), textcoords="offset points",
                    xytext=(8, 6), fontsize=8, zorder=5)
        (dx, dy), = art_.get_offsets().tolist()  # read back what was drawn, for callers' checks
        drawn.append({"name": p["name"], "x": float(dx), "y": float(dy), "size": float(art_.get_sizes()[0])})
    # legend: roofs, then one swatch per headroom class present
    for hc in [h for h in HEADROOM_COLORS if any(p["headroom_class"] == h for p in pts)]:
        ax.scatter([], [], s=60, color=HEADROOM_COLORS[hc], edgecolors="black", linewidths=0.6, label=hc)
    if arrows:
        ax.scatter([], [], s=60, facecolors="none", edgecolors="#555555", label="stage A/B estimate")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_top)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of HBM traffic)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.08)
    ax.set_title(title or f"{info['device']}: roofline, stage {info['stage']} (point area = % GPU time)",
                 fontsize=11)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    info["path"] = str(path)
    info["drawn"] = drawn
    return info


def _no_json_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")  # the tool never writes NaN/Infinity


MAX_PLOT_ENTRIES = 64  # points one picture can show legibly (the head is 8 by default)


@click.command("plot")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="picture to write, .png or .svg (default: roofline.png beside the artifact)")
@click.option("--link/--no-link", default=False,
              help="also rewrite profile_roofline.{json,md} beside the artifact with the picture linked")
@click.option("--title", default=None, help="title of the picture")
def plot_cmd(artifact, out, link, title):
    """Draw the roofline picture of a profile_roofline.json (log-log: memory roof, one compute roof
    per dtype present, ridges; each analysed kernel at (AI, achieved FLOP/s), area = % GPU time,
    colour = headroom class; stage-C points with an arrow from their stage-A/B estimate)."""
    from roofline import safeio

    ap = Path(artifact)
    try:  # a regular file within the size limit (never blocks on a FIFO), bounded nesting
        raw = safeio.read_bytes(ap)
        if not safeio.json_depth_ok(raw):
            raise ValueError(f"nested deeper than {safeio.MAX_JSON_DEPTH} levels")
        art = json.loads(raw.decode("utf-8"), parse_constant=_no_json_constant)
    except FileNotFoundError:
        click.echo(f"roofline plot: {ap}: no such file", err=True)
        sys.exit(2)
    except safeio.UnsafeInput as exc:
        click.echo(f"roofline plot: {ap}: {exc.problem}", err=True)
        sys.exit(2)
    except (OSError, ValueError, RecursionError) as exc:
        msg = " ".join(str(exc).split())[:200]
        click.echo(f"roofline plot: {ap}: not a JSON artifact ({exc.__class__.__name__}: {msg})", err=True)
        sys.exit(2)
    if not isinstance(art, dict) or not isinstance(art.get("entries"), list):
        click.echo(f"roofline plot: {ap}: $.entries: expected a profile_roofline.json artifact with a list of entries",
                   err=True)
        sys.exit(2)
    if not (art.get("peaks") or {}).get("hbm_bw_bytes_s") and not (art.get("peaks") or {}).get("flops"):
        click.echo(f"roofline plot: {ap}: $.peaks: no memory or compute roof to draw", err=True)
        sys.exit(2)
    from roofline.schema import validate_artifact

    try:  # what plot reads is the artifact's contract: refuse what breaks it, in one line
        validate_artifact(art)
    except Exception as exc:  # noqa: BLE001 - jsonschema.ValidationError
        where = "$." + ".".join(str(p) for p in getattr(exc, "absolute_path", []))
        click.echo(f"roofline plot: {ap}: {where}: not a valid profile_roofline.json artifact "
                   f"({' '.join(str(getattr(exc, 'message', exc)).split())[:160]})", err=True)
        sys.exit(2)
    if len(art["entries"]) > MAX_PLOT_ENTRIES:  # a picture of the head, not of a whole Top-N
        click.echo(f"roofline plot: note: {len(art['entries'])} entries: drawing the first {MAX_PLOT_ENTRIES}",
                   err=True)
        art = dict(art, entries=art["entries"][:MAX_PLOT_ENTRIES])
    dest = Path(out) if out else ap.parent / "roofline.png"
    try:
        info = plot_artifact(art, dest, title=title)
    except ValueError as exc:
        click.echo(f"roofline plot: {exc}", err=True)
        sys.exit(2)
    except ImportError as exc:  # matplotlib missing or broken
        click.echo(f"roofline plot: drawing needs matplotlib ({exc.name or exc}): pip install matplotlib", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"roofline plot: cannot write {dest}: {exc.strerror or exc}", err=True)
        sys.exit(2)
    click.echo(f"wrote {dest} ({len(info['points'])} point(s), {len(info['arrows'])} stage-C arrow(s)"
               + (f"; not placed: {', '.join(s['name'] for s in info['skipped'])}" if info["skipped"] else "") + ")")
    if link:
        from roofline import report

        art["plot"] = os.path.relpath(dest.resolve(), ap.parent.resolve())
        pj, pm = report.write_artifact(art, ap.parent)
        click.echo(f"linked it from {pm}")

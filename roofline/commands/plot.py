"""`roofline plot ARTIFACT -o roofline.png|.svg|.pdf|.jpg`: read and check the artifact (and --previous
rounds), draw it with roofline.report.plot.plot_artifact, optionally link the picture from the artifact."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from roofline.report.plot import plot_artifact


def _no_json_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")  # the tool never writes NaN/Infinity


MAX_PLOT_ENTRIES = 64  # points one picture can show legibly (the head is 8 by default)


def _read_artifact(ap: Path) -> dict:
    """The artifact to draw: a regular, bounded JSON file that is a schema-valid artifact with a
    roof to draw; anything else is one line on stderr and exit 2."""
    from roofline.io import safeio

    try:  # a regular file within the size limit (never blocks on a FIFO)
        raw = safeio.read_bytes(ap)
    except FileNotFoundError:
        click.echo(f"roofline plot: {ap}: no such file", err=True)
        sys.exit(2)
    except safeio.UnsafeInput as exc:
        click.echo(f"roofline plot: {ap}: {exc.problem}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"roofline plot: {ap}: cannot be read ({exc.__class__.__name__}: {exc})", err=True)
        sys.exit(2)
    from roofline.io.filekinds import check

    # the file is regular and bounded: now say what kind it is if it is no artifact
    wrong = check(ap, ("artifact",), "an analysis artifact (profile_roofline.json, written by `roofline analyze`)")
    if wrong:
        click.echo(f"roofline plot: {wrong}", err=True)
        sys.exit(2)
    try:  # bounded nesting
        if not safeio.json_depth_ok(raw):
            raise ValueError(f"nested deeper than {safeio.MAX_JSON_DEPTH} levels")
        art = json.loads(raw.decode("utf-8"), parse_constant=_no_json_constant)
    except (ValueError, RecursionError) as exc:   # bad UTF-8 or JSON, too deep (the bytes are read already)
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
    from roofline.io.schema import validate_artifact

    try:  # what plot reads is the artifact's contract: refuse what breaks it, in one line
        validate_artifact(art)
    except Exception as exc:  # noqa: BLE001 - jsonschema.ValidationError
        where = "$." + ".".join(str(p) for p in getattr(exc, "absolute_path", []))
        click.echo(f"roofline plot: {ap}: {where}: not a valid profile_roofline.json artifact "
                   f"({' '.join(str(getattr(exc, 'message', exc)).split())[:160]})", err=True)
        sys.exit(2)
    return art


def _read_previous(previous) -> list[dict]:
    """The earlier artifacts given with --previous (oldest first), each checked to be one."""
    from roofline.io.filekinds import check

    history = []
    for pp in previous:
        wrong = check(pp, ("artifact",), "an analysis artifact (profile_roofline.json)")
        if wrong:
            click.echo(f"roofline plot: --previous {wrong}", err=True)
            sys.exit(2)
        from roofline.core.inputs import read_json   # the bounded reader
        from roofline.io.errors import InputError

        try:
            history.append(read_json(pp))
        except InputError as exc:
            click.echo(f"roofline plot: --previous {exc}: not a JSON artifact", err=True)
            sys.exit(2)
    return history


@click.command("plot")
@click.argument("artifact", type=click.Path())
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="picture to write: .png, .svg, .pdf or .jpg, by its suffix (default: roofline.png beside "
                   "the artifact)")
@click.option("--link/--no-link", default=False,
              help="also rewrite profile_roofline.{json,md} beside the artifact with the picture linked")
@click.option("--title", default=None, help="title of the picture")
@click.option("--previous", "previous", multiple=True, type=click.Path(dir_okay=False),
              help="an earlier round's profile_roofline.json (repeatable, oldest first): arrows from each "
                   "kernel's earlier position (stage A -> B -> C)")
def plot_cmd(artifact, out, link, title, previous):
    """Draw the roofline picture of ARTIFACT, a profile_roofline.json or the round folder holding it
    (log-log: memory roof, one compute roof per dtype present, ridges; each analysed kernel at (AI,
    achieved FLOP/s), area = % GPU time, colour = headroom class; stage-C points with an arrow from
    their stage-A/B estimate)."""
    from roofline.commands.paths import in_round

    ap = in_round(Path(artifact), "profile_roofline.json", "plot", "an analysis artifact (profile_roofline.json)")
    art = _read_artifact(ap)
    if len(art["entries"]) > MAX_PLOT_ENTRIES:  # a picture of the head, not of a whole Top-N
        click.echo(f"roofline plot: note: {len(art['entries'])} entries: drawing the first {MAX_PLOT_ENTRIES}",
                   err=True)
        art = dict(art, entries=art["entries"][:MAX_PLOT_ENTRIES])
    dest = Path(out) if out else ap.parent / "roofline.png"
    history = _read_previous(previous)
    try:
        info = plot_artifact(art, dest, title=title, history=history)
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
               + (f", {len(info['stage_arrows'])} arrow(s) from earlier rounds" if history else "")
               + (f"; not placed: {', '.join(s['label'] or s['name'] for s in info['skipped'])}" if info["skipped"] else "")
               + ")")
    if link:
        from roofline.report import artifact as report

        art["plot"] = os.path.relpath(dest.resolve(), ap.parent.resolve())
        pj, pm = report.write_artifact(art, ap.parent)
        click.echo(f"linked it from {pm}")

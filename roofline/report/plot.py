"""The roofline picture of a profile_roofline.json (`roofline plot ARTIFACT -o roofline.png|.svg`,
whose click wiring is roofline/commands/plot.py).

A log-log plot of the device from the artifact's own `peaks` block (never a second copy of the
numbers): the memory roof (HBM pin rate), one compute roof per dtype present among the entries'
`compute_dtype`, each ridge marked. Each modeled entry is a point at (arithmetic_intensity,
achieved_flops), sized by pct_gpu_time, coloured by headroom_class, labelled by short_name. A
stage-C entry (with `bytes_measured`) also shows its stage-A/B estimate (AI from `bytes_model`)
with an arrow to the measured point.

matplotlib (Agg backend) is imported only when a picture is drawn.
"""
from __future__ import annotations

import math
from pathlib import Path

from roofline.io.values import UNKNOWN

HEADROOM_COLORS = {
    "underperforming": "#d62728",  # red: real headroom
    "moderate": "#ff7f0e",
    "saturated": "#2ca02c",        # green: tuning has nothing left; byte reduction does
    UNKNOWN: "#7f7f7f",
}
DTYPE_STYLES = ["-", "--", "-.", ":"]


def _num(x) -> float | None:
    """A plottable number: finite and within +-1e30 (a log axis cannot hold 1e308), else None."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) \
        and abs(x) <= 1e30 else None


def _stage_arrows(art: dict, points: list[dict], history: list[dict]) -> list[dict]:
    """Each kernel's moves from one earlier artifact of the run (oldest first) to the next."""
    stage_arrows = []
    chain = [h for h in history if isinstance(h, dict)] + [art]
    for p in points:
        pos = []
        for h in chain:
            hp = next((q for q in plot_points(h)["points"] if q["name"] == p["name"]), None) if h is not art \
                else p
            if hp is not None:
                pos.append((h.get("stage") or "?", hp["x"], hp["y"]))
        for (s0, x0, y0), (s1, x1, y1) in zip(pos, pos[1:]):
            if (x0, y0) != (x1, y1):
                stage_arrows.append({"name": p["name"], "number": p["number"], "from_stage": s0,
                                     "to_stage": s1, "from_x": x0, "from_y": y0, "to_x": x1, "to_y": y1})
    return stage_arrows


def plot_points(art: dict, history: list[dict] | None = None) -> dict:
    """What the picture shows, as numbers (no matplotlib): roofs, ridges, points (numbered by share of
    GPU time), stage-C arrows, the stage arrows from earlier artifacts of the same run (``history``,
    oldest first: each kernel's earlier position to its next one), and the entries that could not be
    placed (with why)."""
    pk = art.get("peaks") or {}
    bw = _num(pk.get("hbm_bw_bytes_s"))
    flops = {d: float(v) for d, v in (pk.get("flops") or {}).items() if _num(v) and _num(v) > 0}
    points, arrows, skipped = [], [], []
    from roofline.report.extra import op_cell

    for e in art.get("entries", []):
        label = e.get("short_name") or e.get("name")
        op = op_cell(e)     # the regime and aten op: two rows of one kernel name told apart
        x, y = _num(e.get("arithmetic_intensity")), _num(e.get("achieved_flops"))
        if not e.get("modeled") or x is None or y is None or x <= 0 or y <= 0:
            skipped.append({"name": e.get("name"), "label": label, "op": op,
                            "reason": "not modeled" if not e.get("modeled")
                            else "no positive arithmetic_intensity / achieved_flops"})
            continue
        hc = e.get("headroom_class") or "unknown"
        points.append({"name": e.get("name"), "label": label, "op": op, "x": x, "y": y,
                       "pct_gpu_time": float(e.get("pct_gpu_time") or 0.0), "headroom_class": hc,
                       "color": HEADROOM_COLORS.get(hc, HEADROOM_COLORS[UNKNOWN]),
                       "compute_dtype": e.get("compute_dtype"), "suspect": bool(e.get("suspect")),
                       "roofline_pct": _num(e.get("roofline_pct")), "bound_type": e.get("bound_type")})
        bm, bmod = _num(e.get("bytes_measured")), _num(e.get("bytes_model"))
        fl = _num(e.get("flops_useful")) or _num(e.get("flops_est"))
        if bm and bmod and fl:
            # the stage-A/B estimate: same useful FLOPs and time (same y), the model's bytes
            arrows.append({"name": e.get("name"), "label": label, "from_x": fl / bmod, "from_y": y,
                           "to_x": x, "to_y": y, "bytes_model": bmod, "bytes_measured": bm})
    # numbered as the table's #pct column (ranking_by_pct), so the picture and the table agree even
    # when an entry could not be placed
    rank = {n: i for i, n in enumerate(art.get("ranking_by_pct") or [], 1)}
    points.sort(key=lambda p: (rank.get(p["name"], 10**6), -p["pct_gpu_time"]))
    for i, p in enumerate(points, 1):
        p["number"] = rank.get(p["name"], i)
    for sk in skipped:
        sk["number"] = rank.get(sk["name"])
    stage_arrows = _stage_arrows(art, points, history) if history else []
    present = []
    for p in points:
        d = p["compute_dtype"]
        if isinstance(d, str) and d in flops and d not in present:
            present.append(d)
    if not present and flops:  # nothing says which dtype: show the widest-used tensor dtype we have
        present = [next((d for d in ("bf16", "fp8", "fp16", "fp32") if d in flops), next(iter(flops)))]
    roofs = {d: flops[d] for d in present}
    ridges = {d: flops[d] / bw for d in present} if bw else {}
    from roofline.report import plot_ranks  # several ranks: per-rank bars; collectives: the interconnect roof

    return {"rank_bars": plot_ranks.rank_bars(art, points),
            "interconnect_bw_bytes_s": plot_ranks.interconnect_roof(art, points),
            "device": pk.get("device"), "stage": art.get("stage"), "hbm_bw_bytes_s": bw,
            "hbm_bw_kind": pk.get("hbm_bw_kind"), "compute_roofs": roofs,
            "compute_kinds": {d: (pk.get("flops_kind") or {}).get(d) for d in roofs},
            "ridges": ridges, "points": points, "arrows": arrows, "stage_arrows": stage_arrows,
            "skipped": skipped}


def axis_limits(info: dict) -> tuple[float, float, float, float]:
    """(x_lo, x_hi, y_lo, y_hi) fitted to the points, their stage arrows and the roofs: every point,
    every ridge (with the memory roof below it) and a stretch of each flat roof past its ridge are
    inside."""
    xs = [p["x"] for p in info["points"]] + [a["from_x"] for a in info["arrows"]] \
        + [a["from_x"] for a in info["stage_arrows"]]
    ys = [p["y"] for p in info["points"]] + [a["from_y"] for a in info["stage_arrows"]] \
        + [y for b in info.get("rank_bars", []) for y in (b["y_low"], b["y_high"])]
    ridges = list(info["ridges"].values())
    roofs = list(info["compute_roofs"].values())
    y_top = max(roofs + ys) * 2.5 if (roofs or ys) else 1e15
    if not xs:   # nothing placed: the usual span of LLM kernels, 4 decades of AI around the ridge
        mid = min(ridges) if ridges else 100.0
        return mid / 300, mid * 30, y_top / 1e4, y_top
    x_lo = min(xs + ridges) / 3          # the ridge always in view: a roofline without its corner misleads
    x_hi = max(max(xs) * 3, max(ridges) * 6 if ridges else 0)
    y_lo = (min(ys) / 4) if ys else y_top / 1e4
    return x_lo, x_hi, y_lo, y_top


def _fmt_pct(x) -> str:
    if x is None:
        return "-"
    v = 100 * x
    return f"{v:.1g}%" if 0 < v < 1 else f"{v:.0f}%"


def _clip(s: str, n: int) -> str:
    """At most n characters; a long name keeps its head and its tail (kernel variants differ at the
    end: ..._bz_TNT vs ..._bz_splitK_TNT) around an ellipsis."""
    if len(s) <= n:
        return s
    tail = n // 3
    return s[:n - tail - 1] + "\u2026" + s[-tail:]


PICTURE_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")   # what matplotlib's Agg canvas writes here
PICTURE_KINDS = ".png, .svg, .pdf or .jpg"


FIGURES_KEY = "roofline-figures"


def figures_text(info: dict) -> str:
    """The numbers a picture shows, as JSON: device, stage, roofs, ridges, each point (number, label,
    AI, FLOP/s, headroom class)."""
    import json

    return json.dumps({"device": info["device"], "stage": info["stage"], "hbm_bw_bytes_s": info["hbm_bw_bytes_s"],
                       "compute_roofs": info["compute_roofs"], "ridges": info["ridges"],
                       "points": [[p["number"], p["label"], p["x"], p["y"], p["headroom_class"]]
                                  for p in info["points"]]}, sort_keys=True)


def plot_artifact(art: dict, path: str | Path, title: str | None = None, history: list[dict] | None = None) -> dict:
    """Draw the roofline picture of `art` into `path` (.png, .svg, .pdf or .jpg by suffix): the roofs on the left,
    each kernel a numbered marker (1 = most GPU time); the key on the right names each number
    (short name, % GPU, roofline %, headroom) under the legend. `history`: earlier artifacts of the
    same run (e.g. stage A, then B), drawn as arrows to each kernel's next position.

    Returns plot_points() plus "path", "limits" and "drawn": the data coordinates of each point as
    read back from the plotted artists (name, number, x, y, marker area), for tests and callers."""
    path = Path(path)
    if path.suffix.lower() not in PICTURE_SUFFIXES:
        raise ValueError(f"{path}: a picture is written as {PICTURE_KINDS} (got {path.suffix or 'no suffix'!r})")
    info = plot_points(art, history)
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    info["limits"] = list(axis_limits(info))
    n_key = max(len(info["points"]) + len(info["skipped"]), 1)
    fig, ax, kax = _axes(plt, info["limits"], n_key)
    handles = _draw_roofs(ax, info)
    staged = _draw_arrows(ax, info)
    drawn = _draw_points(ax, info["points"])
    from roofline.report import plot_ranks

    handles += plot_ranks.draw(ax, info)
    _place_numbers(ax, info["points"], fig)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of HBM traffic)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.08)
    fig.suptitle(title or f"{info['device']}: roofline, stage {info['stage']} (marker area = % GPU time"
                 f"{plot_ranks.title_tail(art)})",
                 fontsize=12, x=0.07, ha="left")
    _draw_key(fig, kax, handles + _marker_handles(info, staged), info, n_key)
    if not info["points"]:
        ax.text(0.5, 0.45, f"no kernel placed: {len(info['skipped'])} not modelled (the key says why; the "
                "artifact's degraded[] has the reasons)" if info["skipped"] else "no analysed kernel",
                transform=ax.transAxes, ha="center", va="center", fontsize=10, color="0.35", wrap=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a PNG carries the figures it shows (a text chunk), so a picture in the docs can be checked
    fig.savefig(path, **({"metadata": {FIGURES_KEY: figures_text(info)}} if path.suffix.lower() == ".png" else {}))
    plt.close(fig)
    info["path"] = str(path)
    info["drawn"] = drawn
    return info


def _axes(plt, limits, n_key: int):
    """The figure: log-log roofline axes on the left, the key's (empty) axes on the right."""
    x_lo, x_hi, y_lo, y_top = limits
    fig = plt.figure(figsize=(15.5, max(6.5, 4.2 + 0.32 * n_key)), dpi=120)
    gs = fig.add_gridspec(1, 2, width_ratios=[1.45, 1.3], wspace=0.04, left=0.07, right=0.99, top=0.92,
                          bottom=0.09)
    ax = fig.add_subplot(gs[0])
    kax = fig.add_subplot(gs[1])
    kax.axis("off")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_top)
    return fig, ax, kax


def _draw_roofs(ax, info: dict) -> list:
    """The memory roof (up to the highest compute roof), one compute roof per dtype and its ridge;
    -> their legend handles."""
    from matplotlib.lines import Line2D

    bw, roofs, ridges = info["hbm_bw_bytes_s"], info["compute_roofs"], info["ridges"]
    x_lo, x_hi, _, y_top = info["limits"]
    top = max(roofs.values()) if roofs else y_top / 3
    handles = []
    if bw:
        xr = min(x_hi, top / bw)  # the memory roof runs up to the highest compute roof
        ax.plot([x_lo, xr], [bw * x_lo, bw * xr], color="#1f77b4", lw=2.2, zorder=2)
        handles.append(Line2D([], [], color="#1f77b4", lw=2.2,
                              label=f"HBM {bw / 1e12:.2f} TB/s ({info['hbm_bw_kind']})"))
    for i, (d, pf) in enumerate(sorted(roofs.items(), key=lambda kv: -kv[1])):
        ls = DTYPE_STYLES[i % len(DTYPE_STYLES)]
        x0 = ridges.get(d, x_lo)
        ax.plot([x0, x_hi], [pf, pf], color="black", lw=1.8, ls=ls, zorder=2)
        handles.append(Line2D([], [], color="black", lw=1.8, ls=ls,
                              label=f"{d} {pf / 1e12:.0f} TFLOP/s ({info['compute_kinds'].get(d)})"))
        if d in ridges:
            ax.plot([ridges[d]], [pf], marker="D", color="black", ms=5, zorder=3)
            # above-left of the diamond: that side of the roof is unreachable, so no point sits there
            ax.annotate(f"ridge {d}: {ridges[d]:.0f} FLOP/B", (ridges[d], pf), textcoords="offset points",
                        xytext=(-7, 2), fontsize=7.5, ha="right", va="bottom", color="#333333")
    return handles


def _draw_arrows(ax, info: dict) -> set:
    """Stage-C arrows from each stage-A/B estimate, and earlier rounds' points with an arrow to the
    next; -> the (name, x, y) of the earlier rounds' points (their estimate arrows are not drawn twice)."""
    staged = {(a["name"], a["from_x"], a["from_y"]) for a in info["stage_arrows"]}
    for a in info["arrows"]:
        if (a["name"], a["from_x"], a["from_y"]) in staged:
            continue  # the earlier round's point already shows the model's estimate, with its arrow
        ax.scatter([a["from_x"]], [a["from_y"]], s=50, facecolors="none", edgecolors="#333333",
                   linewidths=1.1, zorder=6)
        ax.annotate("", xy=(a["to_x"], a["to_y"]), xytext=(a["from_x"], a["from_y"]),
                    arrowprops=dict(arrowstyle="->", color="#333333", lw=1.3), zorder=6)
    for a in info["stage_arrows"]:
        ax.scatter([a["from_x"]], [a["from_y"]], s=90, facecolors="white", edgecolors="#555555",
                   linewidths=1.0, zorder=5)
        ax.annotate(a["from_stage"], (a["from_x"], a["from_y"]), ha="center", va="center", fontsize=7,
                    zorder=6, color="#333333")
        ax.annotate("", xy=(a["to_x"], a["to_y"]), xytext=(a["from_x"], a["from_y"]),
                    arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1.0, shrinkA=6, shrinkB=6), zorder=5)
    return staged


def _draw_points(ax, pts: list[dict]) -> list[dict]:
    """One marker per kernel (area = % GPU time, X = suspect); -> what was drawn, read back."""
    drawn = []
    for p in pts:
        # area grows with the share of GPU time (a share is 0..100: an impossible one is drawn at the end)
        size = 40 + 22 * min(max(float(p["pct_gpu_time"]), 0.0), 100.0)
        art_ = ax.scatter([p["x"]], [p["y"]], s=size, color=p["color"], edgecolors="black", linewidths=0.6,
                          alpha=0.8, zorder=4, marker="X" if p["suspect"] else "o")
        (dx, dy), = art_.get_offsets().tolist()  # read back what was drawn, for callers' checks
        drawn.append({"name": p["name"], "number": p["number"], "x": float(dx), "y": float(dy),
                      "size": float(art_.get_sizes()[0])})
    return drawn


def _marker_handles(info: dict, staged: set) -> list:
    """Legend handles for the markers in use: headroom colours, suspect, stage-C and earlier-round arrows."""
    from matplotlib.lines import Line2D

    pts, arrows = info["points"], info["arrows"]
    handles = []
    for hc in [h for h in HEADROOM_COLORS if any(p["headroom_class"] == h for p in pts)]:
        handles.append(Line2D([], [], ls="", marker="o", ms=8, color=HEADROOM_COLORS[hc], mec="black", label=hc))
    if any(p["suspect"] for p in pts):
        handles.append(Line2D([], [], ls="", marker="X", ms=8, color="#7f7f7f", label="suspect (no verdict)"))
    if any((a["name"], a["from_x"], a["from_y"]) not in staged for a in arrows):
        handles.append(Line2D([], [], ls="", marker="o", ms=7, mfc="none", mec="#333333",
                              label="stage A/B estimate -> stage C"))
    if info["stage_arrows"]:
        handles.append(Line2D([], [], ls="", marker="o", ms=7, mfc="white", mec="#555555",
                              label="earlier round (letter = its stage)"))
    return handles


def _draw_key(fig, kax, handles: list, info: dict, n_key: int) -> None:
    """The key: the legend (roofs, headroom colours, markers), then one row per number, in the
    table's #pct order; kernels not drawn say why."""
    leg = kax.legend(handles=handles, loc="upper left", fontsize=8, frameon=False, ncol=2, borderaxespad=0.0,
                     columnspacing=1.0, handlelength=2.2)
    fig.canvas.draw()
    bb = leg.get_window_extent().transformed(kax.transAxes.inverted())
    y = bb.y0 - 0.04
    kax.text(0.0, y, f"{'#':>2}  {'kernel':<30} {'regime / aten op':<24} {'% GPU':>6} {'roofline':>8}  headroom", fontsize=8,
             family="monospace", weight="bold", va="top", transform=kax.transAxes)
    step = min(0.045, (y - 0.02) / (n_key + 1))
    rows = [("p", p) for p in info["points"]] + [("s", sk) for sk in info["skipped"]]
    rows.sort(key=lambda r: r[1].get("number") or 10**6)   # the table's #pct order
    for kind, r in rows:
        y -= step
        if kind == "p":
            kax.text(0.0, y, f"{r['number']:>2}", fontsize=8, family="monospace", weight="bold", color=r["color"],
                     va="top", transform=kax.transAxes)
            kax.text(0.0, y, f"    {_clip(r['label'], 30):<30} {_clip(r.get('op') or '', 24):<24} {r['pct_gpu_time']:>6.2f} "
                     f"{_fmt_pct(r['roofline_pct']):>8}  {r['headroom_class']}", fontsize=8, family="monospace",
                     va="top", transform=kax.transAxes)
        else:
            kax.text(0.0, y, f"{r.get('number') or '-':>2}  {_clip(r['label'] or r['name'] or '?', 30):<30} "
                     f"{_clip(r.get('op') or '', 24):<24} "
                     f"not drawn: {r['reason']}", fontsize=8, family="monospace", va="top", color="#777777",
                     transform=kax.transAxes)


_OFFSETS = [(7, 7), (7, -7), (-7, 7), (-7, -7), (11, 0), (-11, 0), (0, 11), (0, -11)]


def _place_numbers(ax, pts, fig) -> None:
    """Each point's number beside its marker, in the first of 8 directions (then farther out, with a
    leader line) whose box overlaps no number placed before and no other marker."""
    import numpy as np

    fig.canvas.draw()
    tr = ax.transData
    px_per_pt = fig.dpi / 72.0
    centers = [tr.transform((p["x"], p["y"])) for p in pts]
    radii = [math.sqrt(40 + 22 * p["pct_gpu_time"]) / 2 * px_per_pt for p in pts]
    placed: list[tuple[float, float, float, float]] = []
    w, h = 9 * px_per_pt, 9 * px_per_pt  # a one- or two-digit number at fontsize 8

    def free(cx, cy, own):
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        for b in placed:
            if not (box[2] < b[0] or box[0] > b[2] or box[3] < b[1] or box[1] > b[3]):
                return False
        for j, (c, r) in enumerate(zip(centers, radii)):
            if j == own:
                continue
            if np.hypot(max(box[0] - c[0], 0, c[0] - box[2]), max(box[1] - c[1], 0, c[1] - box[3])) < r:
                return False
        return True

    for i, p in enumerate(pts):
        c, r = centers[i], radii[i]
        choice = None
        for scale in (1.0, 2.0, 3.2, 4.6):
            for ox, oy in _OFFSETS:
                norm = math.hypot(ox, oy)
                d = r / px_per_pt + 5 * scale          # points, from the marker's centre
                dx, dy = ox / norm * d, oy / norm * d
                if free(c[0] + dx * px_per_pt, c[1] + dy * px_per_pt, i):
                    choice = (dx, dy, scale)
                    break
            if choice:
                break
        if choice is None:
            choice = (r / px_per_pt + 6, r / px_per_pt + 6, 1.0)
        dx, dy, scale = choice
        placed.append((c[0] + dx * px_per_pt - w / 2, c[1] + dy * px_per_pt - h / 2,
                       c[0] + dx * px_per_pt + w / 2, c[1] + dy * px_per_pt + h / 2))
        ax.annotate(str(p["number"]), (p["x"], p["y"]), textcoords="offset points", xytext=(dx, dy),
                    ha="center", va="center", fontsize=8.5, weight="bold", zorder=7,
                    bbox=dict(boxstyle="round,pad=0.12", fc="white", ec=p["color"], lw=0.8, alpha=0.9),
                    arrowprops=(dict(arrowstyle="-", color="#666666", lw=0.6, shrinkA=0, shrinkB=r / px_per_pt)
                                if scale > 1.0 else None))

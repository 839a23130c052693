"""The ranks of a multi-rank artifact in the roofline picture (roofline/report/plot.py draws it):

* per kernel, a vertical bar over the ranks' achieved FLOP/s (same FLOPs per launch, each rank's
  own time per launch: y_rank = y x t_ms / t_rank; a collective uses its transfer times), its low
  end (the slowest rank) labelled with that rank;
* the interconnect roof (bytes/s of one link direction x FLOP per byte) when a collective is drawn:
  a collective's x is FLOP per byte sent over the link, not per byte of HBM;
* the straggler in the title.

`rank_bars` is pure (numbers for tests); `draw` needs matplotlib axes."""
from __future__ import annotations

import math


def _pos(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 else None


def _per_rank_t(e: dict) -> tuple[float | None, list]:
    """(the time the point's y was computed on, each rank's own such time) for one entry."""
    c, rb = e.get("collective"), e.get("ranks") or {}
    if e.get("memory_roof") == "interconnect" and isinstance(c, dict) and _pos(e.get("t_transfer_ms")):
        ts = [(_pos(x) / n if _pos(x) and n else None) for x, n in
              zip(c.get("transfer_ms") or [], c.get("aligned_launches") or [])]
        return _pos(e.get("t_transfer_ms")), ts
    return _pos(e.get("t_ms")), list(rb.get("t_ms") or [])


def rank_bars(art: dict, points: list[dict]) -> list[dict]:
    """One bar per drawn point whose entry has per-rank times: the ranks' achieved FLOP/s."""
    ranks = (art.get("ranks") or {}).get("ranks") or []
    by = {e.get("name"): e for e in art.get("entries", [])}
    out = []
    for p in points:
        e = by.get(p["name"]) or {}
        t0, ts = _per_rank_t(e)
        if t0 is None or len(ts) != len(ranks) or not ranks:
            continue
        ys = [(r, p["y"] * t0 / t) for r, t in zip(ranks, ts) if _pos(t)]
        if len(ys) < 2:
            continue
        lo, hi = min(ys, key=lambda v: v[1]), max(ys, key=lambda v: v[1])
        out.append({"name": p["name"], "number": p["number"], "x": p["x"], "y_low": lo[1], "y_high": hi[1],
                    "slowest_rank": lo[0], "fastest_rank": hi[0], "per_rank_y": [y for _, y in ys]})
    return out


def interconnect_roof(art: dict, points: list[dict]) -> float | None:
    """The link roof to draw: only when a collective (memory_roof interconnect) is among the points."""
    by = {e.get("name"): e for e in art.get("entries", [])}
    if not any((by.get(p["name"]) or {}).get("memory_roof") == "interconnect" for p in points):
        return None
    return _pos((art.get("peaks") or {}).get("interconnect_bw_bytes_s"))


def title_tail(art: dict) -> str:
    r = art.get("ranks")
    if not isinstance(r, dict) or not r.get("ranks"):
        return ""
    return f"; {len(r['ranks'])} ranks, straggler rank {(r.get('straggler') or {}).get('rank')}"


def draw(ax, info: dict) -> list:
    """The bars and the interconnect roof; -> legend handles."""
    from matplotlib.lines import Line2D

    handles = []
    for b in info.get("rank_bars", []):
        ax.plot([b["x"], b["x"]], [b["y_low"], b["y_high"]], color="#444444", lw=1.4, zorder=3.5,
                solid_capstyle="butt")
        ax.plot([b["x"]], [b["y_low"]], marker="_", ms=9, color="#444444", zorder=3.5)
        ax.annotate(f"r{b['slowest_rank']}", (b["x"], b["y_low"]), textcoords="offset points", xytext=(4, -8),
                    fontsize=6.5, color="#444444")
    if info.get("rank_bars"):
        handles.append(Line2D([], [], color="#444444", lw=1.4, label="spread over ranks (rN: slowest rank)"))
    link = info.get("interconnect_bw_bytes_s")
    if link:
        x_lo, x_hi, _, y_top = info["limits"]
        xr = min(x_hi, y_top / link)
        ax.plot([x_lo, xr], [link * x_lo, link * xr], color="#9467bd", lw=1.8, ls="--", zorder=2)
        handles.append(Line2D([], [], color="#9467bd", lw=1.8, ls="--",
                              label=f"link {link / 1e9:.0f} GB/s/dir (comm: x per link byte)"))
    return handles

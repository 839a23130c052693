"""A Top-N of several ranks (`roofline topn RANK0 RANK1 ...`) in the artifact: each head keeps its
per-rank figures (`ranks`: time per launch and GPU time per rank, spread, slowest rank) and, for a
collective, its waiting / transfer split (`collective`); the artifact's top level keeps the run's
ranks, the straggler and the aligned collectives (`ranks`). docs/artifact.md, "Several ranks".

Copied from the Top-N's own fields (roofline/ingest/ranks.py writes them); nothing is recomputed
here. Pure; the rendering is roofline/report_ranks.py.
"""
from __future__ import annotations

from roofline.inputs import Entry, TopN


def _list(v) -> list | None:
    return v if isinstance(v, list) else None


def entry_ranks(e: Entry, regime: str | None) -> dict | None:
    """The per-rank block of one artifact entry, or None for a Top-N of one trace."""
    rb = e.raw.get("ranks") if isinstance(e.raw, dict) else None
    if not isinstance(rb, dict) or _list(rb.get("total_ms")) is None:
        return None
    out = {k: rb[k] for k in ("pct_gpu_time", "total_ms", "launches", "spread_total_ms", "spread_rel",
                              "slowest_rank", "fastest_rank", "shapes_from_rank", "absent_on", "shapes_differ")
           if k in rb}
    lat = rb.get("base_latency_ms")
    if regime and isinstance(lat, dict) and _list(lat.get(regime)) is not None:
        out["t_ms"] = lat[regime]
        lps = rb.get("launches_per_step")
        if isinstance(lps, dict) and _list(lps.get(regime)) is not None:
            out["launches_per_step"] = lps[regime]
    return out


def annotate(ent: dict, e: Entry) -> None:
    """Put the entry's per-rank block and its collective split (when the Top-N has them) into the
    artifact entry `ent`."""
    rb = entry_ranks(e, ent.get("regime"))
    if rb is not None:
        ent["ranks"] = rb
    c = e.raw.get("collective") if isinstance(e.raw, dict) else None
    if isinstance(c, dict):
        ent["collective"] = c


def run_ranks(topn: TopN) -> dict | None:
    """The artifact's top-level `ranks` (the Top-N's, as written), or None for one trace."""
    r = topn.raw.get("ranks") if isinstance(topn.raw, dict) else None
    if not isinstance(r, dict) or _list(r.get("ranks")) is None:
        return None
    return {k: r[k] for k in ("world_size", "ranks", "traces", "rank_from", "backend", "total_gpu_time_ms",
                              "slowest_rank", "straggler", "collectives") if k in r}

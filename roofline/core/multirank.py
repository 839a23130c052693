"""A Top-N of several ranks (`roofline topn RANK0 RANK1 ...`) in the artifact: each head keeps its
per-rank figures (`ranks`: time per launch and GPU time per rank, spread, slowest rank) and, for a
collective, its waiting / transfer split (`collective`); the artifact's top level keeps the run's
ranks, the straggler and the aligned collectives (`ranks`). docs/artifact.md.

Copied from the Top-N's own fields (roofline/ingest/ranks.py writes them), nothing recomputed; a
field of the wrong type (a hand-edited Top-N: extra fields are never an input error) is dropped or
read as null, so that the report and the picture never meet one. Pure; the rendering is
roofline/report/ranks.py.
"""
from __future__ import annotations

import math

from roofline.core.inputs import Entry, TopN


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _int(x):
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _nums(v) -> list | None:
    return [_num(x) for x in v] if isinstance(v, list) else None


def _strs(v) -> list | None:
    return [x if isinstance(x, str) else None for x in v] if isinstance(v, list) else None


def _pick(d: dict, lists=(), nums=(), ints=(), strs=(), int_lists=()) -> dict:
    """The fields of `d` of the expected types (numbers finite), the rest dropped."""
    out = {}
    for k in lists:
        if _nums(d.get(k)) is not None:
            out[k] = _nums(d[k])
    for k in int_lists:
        if isinstance(d.get(k), list):
            out[k] = [_int(x) for x in d[k]]
    for k, f in [(k, _num) for k in nums] + [(k, _int) for k in ints]:
        if f(d.get(k)) is not None:
            out[k] = d[k]
    for k in strs:
        if isinstance(d.get(k), str):
            out[k] = d[k]
    return out


def entry_ranks(e: Entry, regime: str | None) -> dict | None:
    """The per-rank block of one artifact entry, or None for a Top-N of one trace."""
    rb = e.raw.get("ranks") if isinstance(e.raw, dict) else None
    if not isinstance(rb, dict) or _nums(rb.get("total_ms")) is None:
        return None
    out = _pick(rb, lists=("pct_gpu_time", "total_ms", "launches"),
                nums=("spread_total_ms", "spread_rel", "spread_launches"),
                ints=("slowest_rank", "fastest_rank", "shapes_from_rank"), int_lists=("absent_on",))
    if rb.get("shapes_differ") is True:
        out["shapes_differ"] = True
    for k in ("base_latency_ms", "launches_per_step"):
        per = rb.get(k)
        if regime and isinstance(per, dict) and _nums(per.get(regime)) is not None:
            out["t_ms" if k == "base_latency_ms" else k] = _nums(per[regime])
    return out


def entry_collective(e: Entry) -> dict | None:
    c = e.raw.get("collective") if isinstance(e.raw, dict) else None
    if not isinstance(c, dict):
        return None
    return _pick(c, lists=("total_ms", "waiting_ms", "transfer_ms", "waiting_share_per_rank"),
                 nums=("transfer_ms_per_launch", "waiting_ms_per_launch", "waiting_share"),
                 int_lists=("aligned_launches", "last_arrivals"))


def annotate(ent: dict, e: Entry) -> tuple[dict | None, dict | None]:
    """The per-rank block and the collective split of the artifact entry `ent` of Top-N entry `e`
    (None where the Top-N has none)."""
    return entry_ranks(e, ent.get("regime")), entry_collective(e)


def _stream(c: dict) -> dict:
    out = _pick(c, lists=("total_ms", "waiting_ms", "transfer_ms", "waiting_share", "waited_for_ms"),
                nums=("end_spread_us_median",), ints=("instances", "message_elems"),
                strs=("kind", "collective", "process_group", "clock_check"), int_lists=("counts", "last_arrivals"))
    if isinstance(c.get("names"), list):
        out["names"] = [x for x in c["names"] if isinstance(x, str)]
    if isinstance(c.get("largest_wait"), dict):
        out["largest_wait"] = _pick(c["largest_wait"], nums=("waiting_ms",), ints=("number",))
    return out


def run_ranks(topn: TopN) -> dict | None:
    """The artifact's top-level `ranks` (the Top-N's), or None for one trace."""
    r = topn.raw.get("ranks") if isinstance(topn.raw, dict) else None
    if not isinstance(r, dict) or not isinstance(r.get("ranks"), list):
        return None
    out = _pick(r, lists=("total_gpu_time_ms",), ints=("world_size", "slowest_rank"), strs=("backend",),
                int_lists=("ranks",))
    for k in ("traces", "rank_from"):
        if _strs(r.get(k)) is not None:
            out[k] = _strs(r[k])
    if isinstance(r.get("straggler"), dict):
        out["straggler"] = _pick(r["straggler"], lists=("waited_for_ms_per_rank",),
                                 nums=("waited_for_ms", "share_of_all_waiting"), ints=("rank",), strs=("how",),
                                 int_lists=("last_arrivals",))
        if isinstance(r["straggler"].get("without_largest_wait"), dict):
            out["straggler"]["without_largest_wait"] = _pick(r["straggler"]["without_largest_wait"],
                                                             lists=("waited_for_ms_per_rank",), nums=("waited_for_ms",),
                                                             ints=("rank",))
    if isinstance(r.get("collectives"), list):
        out["collectives"] = [_stream(c) for c in r["collectives"] if isinstance(c, dict)]
    return out

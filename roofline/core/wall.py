"""Each head's time and expected gain as a share of its regime's step wall time (docs/method.md
section 4, "Wall time"), from the Top-N's `wall_time` (what `roofline topn` measured from the
trace's step ranges: docs/topn.md).

The e2e gain of docs/method.md is a share of GPU time; when the GPU idles part of each step (an
eager loop waiting on the host), the step shrinks by less. With W the mean wall time of one step of
the entry's regime:
  pct_of_step_wall               = t_ms x launches_per_step / W x 100
  expected_gain_pct_of_step_wall = pct_of_step_wall x (1 - 1 / attainable_speedup)
Pure: artifact entries and the Top-N's field in, fields out.
"""
from __future__ import annotations

import math

from roofline.core.entry import with_wall_shares

_KEYS = ("steps", "wall_ms", "step_wall_ms", "gpu_busy_pct", "memcpy_pct", "idle_pct")


def _ok(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def read_wall_time(raw) -> dict | None:
    """The Top-N's wall_time, regimes whose figures are all usable numbers (step_wall_ms > 0);
    None when none is."""
    if not isinstance(raw, dict):
        return None
    out = {reg: {k: v[k] for k in _KEYS if k in v} | ({"graph_steps": v["graph_steps"]}
                                                       if _ok(v.get("graph_steps")) else {})
                | ({"host": _host(v["host"])} if _host(v.get("host")) else {})
           for reg, v in raw.items()
           if reg in ("decode", "prefill") and isinstance(v, dict) and all(_ok(v.get(k)) for k in _KEYS)
           and v["step_wall_ms"] > 0}
    if not out:
        return None
    if isinstance(raw.get("source"), str):
        out["source"] = raw["source"]
    return out


_CAUSE_KEYS = ("cause", "ms_per_step", "pct_of_idle")


def _host(raw) -> dict | None:
    """The Top-N's `host` block of a regime (roofline.ingest.hostcause), its causes that carry a
    name and usable numbers; None when it has no summary."""
    if not isinstance(raw, dict) or not isinstance(raw.get("summary"), str):
        return None
    out = {k: raw[k] for k in ("idle_ms_per_step", "idle_gaps_per_step", "launches_per_step", "thread",
                               "thread_launch_share_pct", "steps_read") if _ok(raw.get(k))}
    out["summary"] = raw["summary"]
    out["causes"] = [c for c in raw.get("causes") or () if isinstance(c, dict) and isinstance(c.get("cause"), str)
                     and all(_ok(c.get(k)) for k in _CAUSE_KEYS[1:])]
    out["ops"] = [o for o in raw.get("ops") or () if isinstance(o, dict) and isinstance(o.get("name"), str)
                  and _ok(o.get("ms_per_step"))]
    return out


def add_wall_shares(entries: list[dict], wall: dict | None) -> None:
    """Fill pct_of_step_wall and expected_gain_pct_of_step_wall (None where the regime has no wall
    time or the entry no time / no attainable speedup) into each entry, in place."""
    for e in entries:
        w = (wall or {}).get(e.get("regime")) if isinstance(e.get("regime"), str) else None
        t, lps = e.get("t_ms"), e.get("launches_per_step")
        share = None
        if w and _ok(t) and _ok(lps):
            share = 100.0 * t * lps / w["step_wall_ms"]
        a = e.get("attainable_speedup")
        with_wall_shares(e, share, share * (1.0 - 1.0 / a) if share is not None and _ok(a) and a >= 1
                         and e.get("expected_e2e_gain_pct") is not None else None)

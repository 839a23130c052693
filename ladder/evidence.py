"""The evidence base of `roofline ladder advise`: the project's recorded ladder benches (shipped as
package data, roofline/data/ladder_evidence_h200.json), read into timed rows of registry levels,
and what one level bought over another per shape, shape class or over every recorded shape (BAND =
the isolated noise band)."""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from roofline.io.errors import RooflineError

from . import registry
from .dispatch import NOISE_BAND_ISOLATED as BAND
from .dispatch import shape_class

# The evidence `advise` uses by default ships as package data (roofline/data/, built from the
# repository's recorded benches by tools/build_ladder_evidence.py, which says which runs go in): the
# timed rows only, per run, so that an install from a wheel advises on the same evidence.
EVIDENCE_FILE = "ladder_evidence_h200.json"
ROW_KEYS = ("level", "name", "m", "n", "k", "t_ms_median", "pct_cublas")

# The book's nine-level route the ladder follows (ladder/README.md): names and what each level must add. The
# BUILT levels and their numbers come from registry.LEVELS; this only names levels not built.

class AdviseError(RooflineError):
    """A bad advise input (file, level, shape, kernel): one line, the CLI exits 2."""


@dataclass(frozen=True)
class Obs:
    """One timed row of a recorded run."""
    run: str          # result file name
    level: int
    m: int
    n: int
    k: int
    t_ms: float
    pct_cublas: float | None


def evidence_bundle() -> dict | None:
    """The shipped evidence ({"about", "runs": [{"run", "source", "rows"}]}), or None."""
    from importlib import resources

    p = resources.files("roofline") / "data" / EVIDENCE_FILE
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def bundle_rows(data: dict) -> list[dict]:
    """A bench result's timed rows, each cut to what the evidence reads (ROW_KEYS)."""
    return [{k: r.get(k) for k in ROW_KEYS} for r in data["rows"] if r.get("t_ms_median") is not None]


def default_evidence() -> list[Obs]:
    """The timed rows of the shipped evidence (empty when the package data is absent)."""
    b = evidence_bundle() or {"runs": []}
    return [o for run in b["runs"] for o in observations({"rows": run["rows"]}, run["run"])]


def read_bench(path: Path) -> dict:
    """A bench result ({meta, ceilings, rows}) or AdviseError."""
    try:
        from roofline.io.safeio import load_json

        data = load_json(path)   # bounded: a special file or deep nesting is one line
    except FileNotFoundError:
        raise AdviseError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AdviseError(f"{path}: not a JSON bench result ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise AdviseError(f"{path}: not a ladder bench result (needs a 'rows' list; see `roofline ladder bench --out`)")
    for i, r in enumerate(data["rows"]):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), int) for k in ("level", "m", "n", "k")):
            raise AdviseError(f"{path}: rows[{i}]: expected level, m, n, k integers")
        t = r.get("t_ms_median")
        if t is not None and not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0):
            raise AdviseError(f"{path}: rows[{i}].t_ms_median: expected a positive time in ms, got {t!r}")
    return data


def observations(data: dict, run: str) -> list[Obs]:
    """The timed rows of registry levels (their shipped name) and cuBLAS (level 0); variants
    (other names under a level id) are not that level and are left out."""
    names = {lv.id: lv.name for lv in registry.LEVELS}
    names[0] = "cublas"
    out = []
    for r in data["rows"]:
        if r.get("t_ms_median") is None or names.get(r["level"]) != r.get("name"):
            continue
        out.append(Obs(run, r["level"], r["m"], r["n"], r["k"], float(r["t_ms_median"]),
                       float(r["pct_cublas"]) if isinstance(r.get("pct_cublas"), (int, float)) else None))
    return out


def load_evidence(paths, base: list[Obs] = ()) -> list[Obs]:
    """The timed rows of the bench results `paths` (a file once), then those of `base` (the shipped
    evidence) whose run is not one of those files again (same timed rows)."""
    obs: list[Obs] = []
    seen, given = set(), set()
    for p in paths:
        p = Path(p)
        key = p.resolve()
        if key in seen:
            continue
        seen.add(key)
        got = observations(read_bench(p), p.name)
        given.add(_fingerprint(got))
        obs += got
    runs: dict[str, list[Obs]] = {}
    for o in base:
        runs.setdefault(o.run, []).append(o)
    return obs + [o for rows in runs.values() if _fingerprint(rows) not in given for o in rows]


def _fingerprint(obs: list[Obs]) -> frozenset:
    return frozenset((o.level, o.m, o.n, o.k, o.t_ms) for o in obs)


def _gains(obs: list[Obs], a: int, b: int) -> dict[tuple[int, int, int], list[tuple[str, float]]]:
    """shape -> [(run, t_a / t_b - 1)] over runs that timed both levels on that shape."""
    t = {(o.run, o.level, o.m, o.n, o.k): o.t_ms for o in obs}
    out: dict[tuple[int, int, int], list[tuple[str, float]]] = {}
    for (run, lvl, m, n, k), ta in t.items():
        if lvl != a:
            continue
        tb = t.get((run, b, m, n, k))
        if tb:
            out.setdefault((m, n, k), []).append((run, ta / tb - 1.0))
    return out


def verdict(gains: list[float]) -> str:
    """'gain' (every run beyond +BAND), 'loss' (every run beyond -BAND), else 'flat'."""
    if gains and min(gains) > BAND:
        return "gain"
    if gains and max(gains) < -BAND:
        return "loss"
    return "flat"


def _dist(a, b) -> float:
    return math.sqrt(sum(math.log2(x / y) ** 2 for x, y in zip(a, b)))


def transition(obs: list[Obs], a: int, b: int, shape: tuple[int, int, int]) -> dict:
    """What level b bought over level a in the recorded runs, for `shape`: the scope that decided
    (exact shape / shape class / all shapes / none), the verdict, and the per-shape rows."""
    g = _gains(obs, a, b)
    rows = [{"shape": list(s), "shape_class": shape_class(*s), "runs": [r for r, _ in v],
             "gains": [x for _, x in v], "verdict": verdict([x for _, x in v])} for s, v in sorted(g.items())]
    cls = shape_class(*shape)
    by_class = {}
    for r in rows:
        c = by_class.setdefault(r["shape_class"], {"shapes": 0, "gains": [], "verdicts": {}})
        c["shapes"] += 1
        c["gains"].append(statistics.median(r["gains"]))
        c["verdicts"][r["verdict"]] = c["verdicts"].get(r["verdict"], 0) + 1
    summary = {k: {"shapes": v["shapes"], "median_gain": statistics.median(v["gains"]),
                   "min_gain": min(v["gains"]), "max_gain": max(v["gains"]), "verdicts": v["verdicts"]}
               for k, v in sorted(by_class.items())}
    res = _decide(rows, shape, cls, g, a, b)
    res["by_class"] = summary
    return res


def _decide(rows, shape, cls, g, a, b) -> dict:
    if tuple(shape) in g:
        exact = next(r for r in rows if tuple(r["shape"]) == tuple(shape))
        return {"from": a, "to": b, "scope": "exact shape", "verdict": exact["verdict"], "decided_by": exact,
                "rows": rows, "shape_class": cls}
    for scope, members in (("shape class " + cls, [r for r in rows if r["shape_class"] == cls]),
                           ("all recorded shapes", rows)):
        if not members:
            continue
        kinds = {r["verdict"] for r in members}
        if kinds == {"gain"} or "gain" not in kinds:   # uniform: every shape gains, or none does
            v = "gain" if kinds == {"gain"} else ("loss" if kinds == {"loss"} else "flat")
            return {"from": a, "to": b, "scope": scope, "verdict": v, "decided_by": None,
                    "rows": rows, "shape_class": cls}
        near = min(members, key=lambda r: _dist(r["shape"], shape))
        return {"from": a, "to": b, "scope": scope + " (mixed: the nearest recorded shape decides)",
                "verdict": near["verdict"], "decided_by": near, "rows": rows, "shape_class": cls}
    return {"from": a, "to": b, "scope": "none", "verdict": "unknown", "decided_by": None, "rows": rows,
            "shape_class": cls}


def library_ms(obs: list[Obs], shape) -> list[float]:
    return [o.t_ms for o in obs if o.level == 0 and (o.m, o.n, o.k) == tuple(shape)]


def level_pct_cublas(obs: list[Obs], level: int, shape) -> list[float]:
    return [o.pct_cublas for o in obs if o.level == level and (o.m, o.n, o.k) == tuple(shape)
            and o.pct_cublas is not None]

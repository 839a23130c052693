"""The backend playbook (docs/method.md section 9): one record per stage-C measurement, predicted vs
actual, appended to <run root>/knowledge/backend_playbook.md and its machine-readable twin .jsonl;
read back (older records too), filled with a later e2e delta, and turned into proposed target_eff
priors per op class (never applied). Written by `roofline rerun`, `roofline feedback` and
`roofline compare`, all through `record` and `append_playbook`.

One record schema (RECORD_KEYS, in this order); a caller fills the measured fields it has. Records
written before this schema (a re-run's: no op_kind, regime, measured_inrun_speedup,
model_contradicted, source; op_class the artifact's) read back with those keys None / False.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
import tempfile
from pathlib import Path

from roofline.core import contract, opclasses
from roofline.core.judge import NoiseBands, outcome
from roofline.stagec.runroot import knowledge_dir, run_root  # noqa: F401  (where the playbook lives)

RECORD_KEYS = ("time_utc", "round", "kernel", "op_class", "op_kind", "regime", "device", "roofline_pct",
               "target_eff", "predicted_attainable_speedup", "predicted_e2e_gain_pct", "measured_isolated_speedup",
               "measured_inrun_speedup", "measured_e2e_delta_pct", "model_contradicted", "best", "ladder_level",
               "verdict", "source")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def record(art: dict, e: dict, **measured) -> dict:
    """One predicted-vs-actual record of entry `e` of artifact `art`; `measured`: the measured fields
    the caller has (measured_isolated_speedup, measured_e2e_delta_pct, verdict, source, ...)."""
    rec = dict.fromkeys(RECORD_KEYS)
    rec.update(time_utc=_now(), round=art.get("round"), kernel=e["name"],
               op_class=opclasses.seed_class(opclasses.kind_of(e)), op_kind=e.get("op_kind"),
               regime=e.get("regime"), device=(art.get("peaks") or {}).get("device"),
               roofline_pct=e.get("roofline_pct"), target_eff=e.get("target_eff"),
               predicted_attainable_speedup=e.get("attainable_speedup"),
               predicted_e2e_gain_pct=e.get("expected_e2e_gain_pct"), model_contradicted=False)
    rec.update(measured)
    return rec


def rerun_record(art: dict, e: dict) -> dict:
    """The record of a stage-C re-run of entry `e` (its `measured` block)."""
    m = e.get("measured") or {}
    return record(art, e, measured_isolated_speedup=m.get("measured_attainable_speedup"),
                  model_contradicted=bool(m.get("model_contradicted")), best=m.get("best"),
                  ladder_level=m.get("ladder_level"), verdict=m.get("verdict"),
                  source=f"rerun ({m.get('l2_mode') or 'cold'} L2, isolated)")


def append_playbook(directory: str | Path, rec: dict) -> tuple[Path, Path]:
    """Append to knowledge/backend_playbook.md and its machine-readable twin .jsonl."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    md, jl = d / "backend_playbook.md", d / "backend_playbook.jsonl"
    with open(jl, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec) + "\n")
    new = not md.exists()
    with open(md, "a", encoding="utf-8") as fh:
        if new:
            fh.write("# Backend playbook: predicted vs actual\n\n| time (UTC) | round | kernel | class | device | "
                     "roofline | predicted x | predicted e2e | measured isolated x | measured e2e | verdict |\n"
                     "|---|---|---|---|---|---|---|---|---|---|---|\n")
        f = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
        fh.write(f"| {rec['time_utc']} | {rec.get('round', '-')} | `{rec['kernel']}` | {rec['op_class']} | "
                 f"{rec['device']} | {f(rec['roofline_pct'], '.1%')} | "
                 f"{f(rec['predicted_attainable_speedup'], '.3f')} | {f(rec['predicted_e2e_gain_pct'], '+.2f')}% | "
                 f"{f(rec['measured_isolated_speedup'], '.3f')} | {f(rec['measured_e2e_delta_pct'], '+.2f')} | "
                 f"{rec.get('verdict') or '-'} |\n")
    return md, jl


def read_records(directory: str | Path) -> list[dict]:
    """The records of a knowledge/ folder (or of its .jsonl), old ones completed to RECORD_KEYS."""
    p = Path(directory)
    jl = p / "backend_playbook.jsonl" if p.is_dir() else p
    if not jl.is_file():
        return []
    from roofline.io import safeio

    # the bounded reader (size, special files); a line that is no record (not JSON, not an object,
    # nested past the limit: a damaged file) is skipped, never read as one
    text = bytes(safeio.read_bytes(jl)).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        if not line.strip() or not safeio.json_depth_ok(line):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):   # an older record lacks the keys this schema added: unknown (None)
            out.append({**dict.fromkeys(RECORD_KEYS), "model_contradicted": False, **rec})
    return out


def fill_e2e(directory: str | Path, round_id, kernels: set[str], e2e_delta_pct: float) -> int:
    """Fill measured_e2e_delta_pct of earlier playbook records (round `round_id`, these kernels)
    that have none; both files are rewritten atomically. Returns how many were filled."""
    d = Path(directory)
    recs = read_records(d)
    n = 0
    for r in recs:
        if r.get("measured_e2e_delta_pct") is None and r.get("kernel") in kernels and r.get("round") == round_id:
            r["measured_e2e_delta_pct"] = e2e_delta_pct
            n += 1
    if n:
        with tempfile.TemporaryDirectory(dir=d) as td:
            for r in recs:     # the same renderer as every other playbook write
                append_playbook(td, r)
            for f in ("backend_playbook.jsonl", "backend_playbook.md"):
                os.replace(Path(td) / f, d / f)
    return n


# A proposal needs at least this many consistent records (real gains measured on one device): the
# median of 3 is the smallest that no single record sets alone (a noisy re-run, a record of the wrong
# work); with 2 the "median" is their mean, and one wrong record moves it halfway.
MIN_PROPOSAL_RECORDS = 3


def propose_priors(records: list[dict], bands: NoiseBands = NoiseBands()) -> dict[str, dict]:
    """Per seed op class (and regime for attention): the evidence count, how many measurements
    contradicted the model, the median measured/predicted speedup (1.00 = calibrated), the median
    e2e error (measured - predicted, % points) and a proposed target_eff: the median of what the
    measurements show reachable, roofline_pct x measured speedup (capped at 1). Only real gains
    (above the isolated band) count as evidence: a speedup inside the band, or a slower re-run,
    says nothing about what a good kernel reaches. Never applied. A proposal names the records it
    rests on (`records`: their 1-based places in the playbook) and needs MIN_PROPOSAL_RECORDS of them,
    all from one device; else `proposed_target_eff` is None and `no_proposal` says why."""
    from roofline.core import routing

    groups: dict[str, dict] = {}
    for i, r in enumerate(records, 1):
        s = r.get("measured_isolated_speedup") or r.get("measured_inrun_speedup")
        if s is None or r.get("roofline_pct") is None:
            continue
        # the prior the record was judged against (its class's prior key in its regime)
        key = opclasses.prior_key(opclasses.kind_of(r), r.get("regime") or "decode")
        g = groups.setdefault(key, {"evidence": 0, "contradictions": 0, "ratios": [], "reached": [],
                                    "e2e_errors": [], "priors": [], "records": [], "devices": set()})
        if outcome(s, bands.isolated) != "gain" and not r.get("model_contradicted"):
            continue   # no real gain (inside the band, or slower): says nothing about what is reachable
        g["evidence"] += 1
        g["records"].append(i)
        g["devices"].add(r.get("device"))
        g["contradictions"] += bool(r.get("model_contradicted"))
        if r.get("predicted_attainable_speedup"):
            g["ratios"].append(s / r["predicted_attainable_speedup"])
        g["reached"].append(min(1.0, r["roofline_pct"] * s))
        if r.get("measured_e2e_delta_pct") is not None and r.get("predicted_e2e_gain_pct") is not None:
            g["e2e_errors"].append(r["measured_e2e_delta_pct"] - r["predicted_e2e_gain_pct"])
        if r.get("target_eff") is not None:
            g["priors"].append(r["target_eff"])
    out = {}
    for key, g in groups.items():
        prior = statistics.median(g["priors"]) if g["priors"] else routing.TARGET_EFF.get(key)
        why = (f"{g['evidence']} record(s) with a real gain, {MIN_PROPOSAL_RECORDS} needed"
               if g["evidence"] < MIN_PROPOSAL_RECORDS else
               f"the records come from {len(g['devices'])} devices: a prior is one device's" if len(g["devices"]) > 1
               else None)
        out[key] = {"evidence": g["evidence"], "contradictions": g["contradictions"], "prior": prior,
                    "median_measured_over_predicted": statistics.median(g["ratios"]) if g["ratios"] else None,
                    "median_e2e_error_pct": statistics.median(g["e2e_errors"]) if g["e2e_errors"] else None,
                    "records": g["records"], "no_proposal": why if g["evidence"] else None,
                    "proposed_target_eff": statistics.median(g["reached"]) if (g["reached"] and why is None) else None}
    return out

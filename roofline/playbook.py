"""The backend playbook: one record per stage-C re-run, predicted vs actual (docs/method.md section 9),
appended to knowledge/backend_playbook.md and its machine-readable twin .jsonl, and summarized
per op class (how wrong the target_eff prior was). Written by `roofline rerun` (roofline.rerun_run)
and `roofline feedback`."""
from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path


_ROUND_DIR = re.compile(r"round_\d+")


def run_root(start: str | Path) -> Path:
    """THE run root, where knowledge/ lives: one per run, whichever round or file `start` is in.
    The pipeline's layout is <run>/profile/round_<R>/profile_topN.json: the folder above a
    round_<R> folder (and above profile/ when the round sits in one). Without a round folder, the
    folder of the nearest env_report.json (beside `start` or above), else `start` itself."""
    from roofline.inputs import find_upwards

    d = Path(start).resolve()
    d = d.parent if d.is_file() else d
    for p in (d, *d.parents):
        if _ROUND_DIR.fullmatch(p.name):
            return p.parent.parent if p.parent.name == "profile" else p.parent
    if d.name == "profile":
        return d.parent
    env = find_upwards(d, "env_report.json")
    return env.parent if env else d


def knowledge_dir(start: str | Path) -> Path:
    """<run root>/knowledge: the playbook every command of one run appends to."""
    return run_root(start) / "knowledge"


def playbook_record(art: dict, e: dict, round_id=None) -> dict:
    m = e.get("measured", {})
    return {"time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "round": round_id if round_id is not None else art.get("round"), "kernel": e["name"],
            "op_class": e.get("op_class"), "device": (art.get("peaks") or {}).get("device"),
            "roofline_pct": e.get("roofline_pct"), "target_eff": e.get("target_eff"),
            "predicted_attainable_speedup": e.get("attainable_speedup"),
            "predicted_e2e_gain_pct": e.get("expected_e2e_gain_pct"),
            "measured_isolated_speedup": m.get("measured_attainable_speedup"),
            "measured_e2e_delta_pct": None, "best": m.get("best"), "ladder_level": m.get("ladder_level"),
            "verdict": m.get("verdict")}


def append_playbook(directory: str | Path, record: dict) -> tuple[Path, Path]:
    """Append to knowledge/backend_playbook.md and its machine-readable twin .jsonl."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    md, jl = d / "backend_playbook.md", d / "backend_playbook.jsonl"
    with open(jl, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    new = not md.exists()
    with open(md, "a", encoding="utf-8") as fh:
        if new:
            fh.write("# Backend playbook: predicted vs actual\n\n| time (UTC) | round | kernel | class | device | "
                     "roofline | predicted x | predicted e2e | measured isolated x | measured e2e | verdict |\n"
                     "|---|---|---|---|---|---|---|---|---|---|---|\n")
        f = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
        fh.write(f"| {record['time_utc']} | {record.get('round', '-')} | `{record['kernel']}` | {record['op_class']} | "
                 f"{record['device']} | {f(record['roofline_pct'], '.1%')} | "
                 f"{f(record['predicted_attainable_speedup'], '.3f')} | {f(record['predicted_e2e_gain_pct'], '+.2f')}% | "
                 f"{f(record['measured_isolated_speedup'], '.3f')} | {f(record['measured_e2e_delta_pct'], '+.2f')} | "
                 f"{record.get('verdict') or '-'} |\n")
    return md, jl


def read_playbook(path: str | Path) -> list[dict]:
    p = Path(path)
    if p.is_dir():
        p = p / "backend_playbook.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def summarize_playbook(records: list[dict]) -> dict:
    """Per op class: how wrong the target_eff prior was, and a proposed prior (never applied).

    A re-run that reached speedup s from a kernel at roofline fraction p shows that p*s of the roof
    is reachable; the proposed target_eff is the median of p*s over the class's records (capped at
    1). The prediction error is measured/predicted attainable speedup (1.0 = calibrated)."""
    out: dict[str, dict] = {}
    for r in records:
        if r.get("measured_isolated_speedup") is None or r.get("roofline_pct") is None:
            continue
        c = out.setdefault(r["op_class"], {"n": 0, "ratios": [], "reached": [], "prior": r.get("target_eff")})
        c["n"] += 1
        if r.get("predicted_attainable_speedup"):
            c["ratios"].append(r["measured_isolated_speedup"] / r["predicted_attainable_speedup"])
        c["reached"].append(min(1.0, r["roofline_pct"] * r["measured_isolated_speedup"]))
    for c in out.values():
        med = lambda xs: sorted(xs)[len(xs) // 2] if xs else None  # noqa: E731
        c["median_measured_over_predicted"] = med(c["ratios"])
        c["proposed_target_eff"] = med(c["reached"])
        del c["ratios"], c["reached"]
    return out

"""A kernel team's measurement of one kernel, recorded (docs/method.md section 9): judged against the
isolated and serving noise bands (roofline/core/judge.py), written on its artifact entry (the
measurement is preferred over the prediction, always) and appended to the run's playbook
(roofline/stagec/playbook.py). `roofline feedback` and `roofline.feedback.record_feedback`.

Pure except `record_feedback` (which reads and rewrites the artifact and appends the playbook).
"""
from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

from roofline.io.errors import FeedbackError
from roofline.stagec import playbook
from roofline.core.judge import NoiseBands, judge_e2e, judge_isolated

_now = playbook._now


def _num(x, what: str, positive: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or (positive and x <= 0):
        raise FeedbackError(f"{what}: expected a {'positive ' if positive else ''}number, got {x!r}")
    return float(x)


def load_artifact(path: str | Path) -> dict:
    """The artifact (or the one in a round folder), read through the bounded reader; one line when
    it cannot be looked at, is missing or is not an artifact."""
    from roofline.core.inputs import read_json   # the bounded reader (size, depth, special files, UTF-8)
    from roofline.io.errors import InputError
    from roofline.io.safeio import path_problem

    p = Path(path)
    bad = path_problem(p)
    if not bad and p.is_dir():
        p = p / "profile_roofline.json"
        bad = path_problem(p)
    if bad:
        raise FeedbackError(f"{p}: {bad}")
    if not p.exists():
        raise FeedbackError(f"{p}: no such artifact")
    try:
        art = read_json(p)
    except InputError as exc:
        raise FeedbackError(f"{exc}: not a JSON artifact") from None
    if not isinstance(art, dict) or art.get("skill") != "roofline" or not isinstance(art.get("entries"), list):
        raise FeedbackError(f"{p}: not a profile_roofline.json (no skill 'roofline' with entries)")
    return art


def find_entry(art: dict, kernel: str, where: str = "artifact") -> dict:
    hits = [e for e in art["entries"] if e.get("name") == kernel] or \
           [e for e in art["entries"] if e.get("short_name") == kernel]
    if not hits:
        names = ", ".join(e.get("short_name") or e.get("name") for e in art["entries"][:8])
        raise FeedbackError(f"{where}: no entry named {kernel!r} (entries: {names or 'none'})")
    if len(hits) > 1:
        raise FeedbackError(f"{where}: {len(hits)} entries match {kernel!r}: pass the full kernel name")
    return hits[0]


def apply_feedback(art: dict, kernel: str, isolated_speedup: float, e2e_delta_pct: float | None = None, *,
                   bands: NoiseBands = NoiseBands(), source: str = "kernel team", where: str = "artifact") -> dict:
    """Record one measurement on its entry (in place); return the feedback record."""
    x = _num(isolated_speedup, "isolated speedup", positive=True)
    y = None if e2e_delta_pct is None else _num(e2e_delta_pct, "e2e delta %")
    e = find_entry(art, kernel, where)
    iso = judge_isolated(x, e.get("attainable_speedup"), bands)
    e2e = judge_e2e(y, e.get("expected_e2e_gain_pct"), bands)
    rec = {"time_utc": _now(), "source": source, "measured_isolated_speedup": x, "measured_e2e_delta_pct": y,
           "predicted_attainable_speedup": e.get("attainable_speedup"),
           "predicted_e2e_gain_pct": e.get("expected_e2e_gain_pct"),
           "isolated_real": iso["real"], "isolated_verdict": iso["verdict"], "model_contradicted": iso["model_contradicted"],
           "e2e_real": e2e["real"], "e2e_verdict": e2e["verdict"], "e2e_error_pct": e2e["error_pct"],
           "noise_bands": asdict(bands)}
    e.setdefault("feedback", []).append(rec)
    e["model_contradicted"] = bool(e.get("model_contradicted")) or iso["model_contradicted"]
    e["measured_attainable_speedup"] = x     # the measurement is preferred, always (docs/method.md section 9)
    pred = e.get("attainable_speedup")
    note = (f"feedback ({source}): measured {x:.3f}x isolated vs {'-' if pred is None else f'{pred:.3f}x'} "
            f"predicted: {iso['verdict']}")
    if y is not None:
        note += f"; e2e {e2e['verdict']}"
    e["notes"] = (e.get("notes") or "") + ("; " if e.get("notes") else "") + note
    return rec


def record_feedback(artifact: str | Path, kernel: str, isolated_speedup: float, e2e_delta_pct: float | None = None,
                    *, bands: NoiseBands = NoiseBands(), playbook_dir: str | Path | None | bool = None,
                    source: str = "kernel team") -> dict:
    """`roofline feedback` from Python: record a kernel team's measurement in the artifact
    (rewritten atomically, markdown included) and append predicted vs actual to the playbook.
    Returns {"entry", "feedback", "playbook"}. Raises FeedbackError (one line) on unusable input."""
    from roofline.report import artifact as report

    art = load_artifact(artifact)   # a path that cannot be looked at is one line there
    p = Path(artifact)
    p = p / report.ARTIFACT_JSON if p.is_dir() else p
    rec = apply_feedback(art, kernel, isolated_speedup, e2e_delta_pct, bands=bands, source=source, where=str(p))
    e = find_entry(art, kernel, str(p))
    report.write_artifact(art, p.parent)
    pb = None
    if playbook_dir is not False:
        d = Path(playbook_dir) if playbook_dir else playbook.knowledge_dir(p.parent)
        verdict = rec["isolated_verdict"] + (f"; {rec['e2e_verdict']}" if e2e_delta_pct is not None else "")
        pb, _ = playbook.append_playbook(d, playbook.record(
            art, e, measured_isolated_speedup=rec["measured_isolated_speedup"],
            measured_e2e_delta_pct=rec["measured_e2e_delta_pct"], model_contradicted=rec["model_contradicted"],
            verdict=verdict, source=f"feedback ({source})"))
        pb = str(pb)
    return {"entry": e["name"], "feedback": rec, "playbook": pb}

"""The pipeline entry point. Stable contract (shared/spec/INPUTS.md):

    from roofline import hook
    summary = hook.run(round_dir, env="env_report.json", config="config.json",
                       analysis_skill="roofline", head_threshold_pct=5.0, stage=None, counters=None)

Returns None at level L0 (analysis_skill="none", or the package missing pieces), otherwise a dict:
{"json": path, "md": path, "stage": "A|B|C", "ranking_by_pct": [...], "ranking_by_expected_gain":
[...], "degraded": n, "skill_errors": [...]}. NEVER raises: every failure ends in skill_errors[]
with whatever entries succeeded written (L5); a failed re-run leaves the previous artifact in place
(writes are atomic).

Also registered as the `serving_pipeline.analysis` entry point named `roofline`.
"""
from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from roofline.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT, empty_artifact


def _resolve(round_dir: Path, p, name: str) -> Path | None:
    if p is None:
        from roofline.inputs import find_upwards

        return find_upwards(round_dir, name)
    p = Path(p)
    if p.is_absolute() or p.exists():
        return p
    # relative names are looked up beside the Top-N first, then in each parent (the run root)
    from roofline.inputs import find_upwards

    return find_upwards(round_dir, str(p)) or p


def run(round_dir, env="env_report.json", config="config.json", analysis_skill: str = "roofline",
        head_threshold_pct: float = HEAD_THRESHOLD_PCT, stage: str | None = None, counters=None,
        head_cap: int = HEAD_CAP, out_dir=None, peaks=None) -> dict | None:
    """Analyse `round_dir`/profile_topN.json and write profile_roofline.{json,md} beside it.
    peaks: the pipeline's peaks.md (or a YAML peak table); default: a peaks.md beside the env
    report, then the built-in tables."""
    if analysis_skill in (None, "none"):
        return None  # L0
    try:
        from roofline import analysis as _a, api, peaks as _p, report  # noqa: F401
    except Exception:  # the package is missing pieces: L0, behave as before the feature existed
        return None
    errors: list[dict[str, Any]] = []
    round_dir = Path(round_dir)
    topn_path = round_dir / "profile_topN.json" if round_dir.is_dir() or not round_dir.suffix else round_dir
    dest = Path(out_dir) if out_dir else topn_path.parent
    art = None
    try:
        env_p = _resolve(topn_path.parent, env, "env_report.json")
        cfg_p = _resolve(topn_path.parent, config, "config.json")
        if cfg_p is not None and not Path(cfg_p).exists():
            cfg_p = None  # config.json is optional
        pk_p = _resolve(topn_path.parent, peaks, "peaks.md") if peaks is not None else None
        art = api.analyze(topn_path, env_p, cfg_p, stage=stage, counters=counters,
                          head_threshold_pct=head_threshold_pct, head_cap=head_cap, peaks_file=pk_p)
    except Exception as exc:  # L5: never fail the run
        errors.append({"where": "analyze", "error": f"{exc.__class__.__name__}: {exc}",
                       "traceback": traceback.format_exc(limit=6)})
    if art is None:
        art = empty_artifact(stage, errors)
    else:
        art["skill_errors"].extend(errors)
    summary: dict[str, Any] = {"stage": art.get("stage"), "ranking_by_pct": art.get("ranking_by_pct", []),
                               "ranking_by_expected_gain": art.get("ranking_by_expected_gain", []),
                               "degraded": len(art.get("degraded", [])), "skill_errors": art["skill_errors"],
                               "json": None, "md": None}
    if not art.get("entries") and errors and (dest / report.ARTIFACT_JSON).exists():
        # a failed re-run leaves the previous artifact in place
        summary["skill_errors"].append({"where": "write", "error": "analysis failed; previous artifact kept"})
        summary["json"], summary["md"] = str(dest / report.ARTIFACT_JSON), str(dest / report.ARTIFACT_MD)
        return summary
    try:
        pj, pm = report.write_artifact(art, dest)
        summary["json"], summary["md"] = str(pj), str(pm)
    except Exception as exc:
        summary["skill_errors"].append({"where": "write", "error": f"{exc.__class__.__name__}: {exc}"})
    return summary


def rerun(artifact, entries=(), counters: bool = True, playbook_dir=None) -> dict:
    """Stage C after the pipeline's op benchmarker: re-run the GEMM heads of `artifact`
    (profile_roofline.json) through the ladder and write the measurement back. Never raises:
    returns {"rerun": [...], "skipped": {...}, "playbook": path|None, "error": str|None}; on any
    failure (no GPU, no ncu, a broken kernel) the artifact is left as it was."""
    try:
        from roofline.rerun_run import rerun_artifact

        res = rerun_artifact(Path(artifact), tuple(entries), counters, None, playbook_dir)
        res["error"] = None
        return res
    except Exception as exc:
        return {"rerun": [], "skipped": {}, "playbook": None, "error": f"{exc.__class__.__name__}: {exc}"}


def feedback(artifact, kernel: str, isolated_speedup: float, e2e_delta_pct: float | None = None,
             playbook_dir=None, isolated_band: float | None = None, e2e_band: float | None = None) -> dict:
    """Seed 002 section 8 from the pipeline: record a kernel team's measurement of `kernel` in
    `artifact` (flags model_contradicted when it beats attainable_speedup; the measurement is
    preferred) and append predicted vs actual to knowledge/backend_playbook.md. Never raises:
    returns {"entry", "feedback", "playbook", "error": None|str}; on error nothing is written."""
    try:
        from roofline import feedback as _fb

        kw = {k: v for k, v in (("isolated", isolated_band), ("e2e_pct", e2e_band)) if v is not None}
        res = _fb.record_feedback(artifact, kernel, isolated_speedup, e2e_delta_pct, bands=_fb.NoiseBands(**kw),
                                  playbook_dir=playbook_dir)
        res["error"] = None
        return res
    except Exception as exc:
        return {"entry": None, "feedback": None, "playbook": None, "error": f"{exc.__class__.__name__}: {exc}"}

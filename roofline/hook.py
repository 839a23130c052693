"""The pipeline entry point. Stable contract (the README's Python section; docs/artifact.md):

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

import math
import os
import traceback
from pathlib import Path
from typing import Any

from roofline.core.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT, empty_artifact


def _resolve(round_dir: Path, p, name: str) -> Path | None:
    if p is None:
        from roofline.core.inputs import find_upwards

        return find_upwards(round_dir, name)
    if isinstance(p, dict):
        return p  # already parsed (the API accepts dicts)
    p = Path(p)
    if p.is_absolute() or p.exists():
        return p
    # relative names are looked up beside the Top-N first, then in each parent (the run root)
    from roofline.core.inputs import find_upwards

    return find_upwards(round_dir, str(p)) or p


_PATHLIKE = (str, bytes, os.PathLike)


def _as_path(v, what: str, *, allow_dict: bool = False, allow_none: bool = True):
    """A path argument of run(): str, bytes or os.PathLike (a dict for env/config); else TypeError.
    Never coerces: a bool, a number or a list is refused."""
    if v is None and allow_none:
        return None
    if allow_dict and isinstance(v, dict):
        return v
    if isinstance(v, _PATHLIKE):
        p = os.fsdecode(os.fspath(v))
        if not p or "\x00" in p:
            raise ValueError(f"{what}: {p!r} is not a usable path")
        return Path(p)
    raise TypeError(f"{what}: expected a path (str or os.PathLike){' or a dict' if allow_dict else ''}, "
                    f"got {type(v).__name__}")


def _check_args(round_dir, env, config, head_threshold_pct, stage, counters, head_cap, out_dir):
    rd = _as_path(round_dir, "round_dir", allow_none=False)
    env = _as_path(env, "env", allow_dict=True)
    config = _as_path(config, "config", allow_dict=True)
    if isinstance(head_threshold_pct, bool) or not isinstance(head_threshold_pct, (int, float)) \
            or not math.isfinite(head_threshold_pct) or not 0 <= head_threshold_pct <= 100:
        raise TypeError(f"head_threshold_pct: expected a number in 0..100, got {head_threshold_pct!r}")
    if isinstance(head_cap, bool) or not isinstance(head_cap, int) or head_cap < 1:
        raise TypeError(f"head_cap: expected an integer >= 1, got {head_cap!r}")
    if stage is not None and stage not in ("A", "B", "C"):
        raise TypeError(f"stage: expected None, 'A', 'B' or 'C', got {stage!r}")
    if counters is not None and not isinstance(counters, (list, tuple)):
        counters = _as_path(counters, "counters")
    out = _as_path(out_dir, "out_dir")
    return rd, env, config, float(head_threshold_pct), counters, out


def run(round_dir=None, env="env_report.json", config="config.json", analysis_skill: str = "roofline",
        head_threshold_pct: float = HEAD_THRESHOLD_PCT, stage: str | None = None, counters=None,
        head_cap: int = HEAD_CAP, out_dir=None, peaks=None, *more_args, **more_kwargs) -> dict | None:
    """Analyse `round_dir`/profile_topN.json and write profile_roofline.{json,md} beside it.

    Never raises (an argument of the wrong type included: it is reported in skill_errors and
    nothing is written; arguments this version does not know are ignored, and said so). Writes a
    schema-valid artifact or nothing, never creates a directory.
    peaks: the pipeline's peaks.md (or a YAML peak table); default: a peaks.md beside the env
    report, then the built-in tables."""
    try:
        s = _run(round_dir, env, config, analysis_skill, head_threshold_pct, stage, counters,
                 head_cap, out_dir, peaks)
        if (more_args or more_kwargs) and isinstance(s, dict):
            names = [f"#{10 + i}" for i in range(len(more_args))] + sorted(map(str, more_kwargs))
            s["skill_errors"].append({"where": "hook", "error": f"ignored arguments this version does not "
                                                                  f"know: {', '.join(names)}"[:500]})
        return s
    except Exception as exc:  # the last net: the contract says never raise
        return {"stage": None, "ranking_by_pct": [], "ranking_by_expected_gain": [], "degraded": 0,
                "skill_errors": [{"where": "hook", "error": _one_line(exc)}], "json": None, "md": None}


def _one_line(exc: BaseException) -> str:
    try:
        return " ".join(f"{exc.__class__.__name__}: {exc}".split())[:2000]
    except Exception:
        return exc.__class__.__name__


def _summary(art, errors) -> dict:
    return {"stage": art.get("stage") if art else None,
            "ranking_by_pct": list(art.get("ranking_by_pct", [])) if art else [],
            "ranking_by_expected_gain": list(art.get("ranking_by_expected_gain", [])) if art else [],
            "degraded": len(art.get("degraded", [])) if art else 0,
            "skill_errors": art["skill_errors"] if art else errors, "json": None, "md": None}


def _run(round_dir, env, config, analysis_skill, head_threshold_pct, stage, counters, head_cap, out_dir,
         peaks=None):
    if analysis_skill is None or (isinstance(analysis_skill, str) and analysis_skill == "none"):
        return None  # L0
    try:
        import roofline.api  # noqa: F401
        import roofline.peaks  # noqa: F401
        from roofline.core import analysis as _a
        from roofline.report import artifact as report
        from roofline.io.schema import validate_artifact  # noqa: F401  (probed: a missing piece is L0)
    except Exception:  # the package is missing pieces: L0, behave as before the feature existed
        return None
    errors: list[dict[str, Any]] = []
    if analysis_skill != "roofline":
        return _summary(None, [{"where": "hook", "error": f"analysis_skill: expected 'roofline' or 'none', "
                                                          f"got {analysis_skill!r}; nothing written"}])
    try:
        round_dir, env, config, head_threshold_pct, counters, out_dir = _check_args(
            round_dir, env, config, head_threshold_pct, stage, counters, head_cap, out_dir)
        peaks = _as_path(peaks, "peaks")
    except (TypeError, ValueError) as exc:
        return _summary(None, [{"where": "hook", "error": f"{exc}; nothing written"}])
    topn_path = _topn_path(round_dir)
    dest = out_dir if out_dir is not None else topn_path.parent
    if not dest.is_dir():
        # never create (a possibly mistyped) round directory: write nothing, say why
        return _summary(None, [{"where": "hook", "error": f"{dest} is not an existing directory; nothing written"}])
    art = _analyze_safely(topn_path, env, config, peaks, stage, counters, head_threshold_pct, head_cap, errors)
    return _write(art, errors, dest)


def _topn_path(round_dir: Path) -> Path:
    """The round's Top-N: profile_topN.json in the round directory, or the file itself."""
    if round_dir.is_dir():
        return round_dir / "profile_topN.json"
    elif round_dir.is_file() or round_dir.suffix == ".json":
        return round_dir  # the Top-N itself
    else:
        return round_dir / "profile_topN.json"


def _analyze_safely(topn_path: Path, env, config, peaks, stage, counters, head_threshold_pct, head_cap,
                    errors: list[dict]) -> dict:
    """The artifact (schema-checked), or the empty one with the failure in `errors` (L5)."""
    import roofline.api as api
    from roofline.io.schema import validate_artifact

    art = None
    try:
        env_p = _resolve(topn_path.parent, env, "env_report.json")
        cfg_p = _resolve(topn_path.parent, config, "config.json")
        if cfg_p is not None and not isinstance(cfg_p, dict) and not Path(cfg_p).exists():
            cfg_p = None  # config.json is optional
        pk_p = _resolve(topn_path.parent, peaks, "peaks.md") if peaks is not None else None
        art = api.analyze(topn_path, env_p, cfg_p, stage=stage, counters=counters,
                          head_threshold_pct=head_threshold_pct, head_cap=head_cap, peaks_file=pk_p)
        validate_artifact(art)
    except Exception as exc:  # L5: never fail the run
        art = None
        errors.append({"where": "analyze", "error": _one_line(exc),
                       "traceback": traceback.format_exc(limit=6)})
    if art is None:
        art = empty_artifact(stage, errors)
    else:
        art["skill_errors"].extend(errors)
    return art


def _write(art: dict, errors: list[dict], dest: Path) -> dict:
    """Write the artifact pair into dest (recovering a crashed earlier write first; a failed
    analysis keeps the previous artifact). Returns the hook's summary."""
    from roofline.report import artifact as report

    summary = _summary(art, errors)
    try:
        report.recover(dest)  # finish (or discard) what a crashed earlier write left, first
    except OSError as exc:
        summary["skill_errors"].append({"where": "write", "error": f"recovery: {_one_line(exc)}"})
    if not art.get("entries") and errors and (dest / report.ARTIFACT_JSON).exists():
        # a failed re-run leaves the previous artifact in place
        summary["skill_errors"].append({"where": "write", "error": "analysis failed; previous artifact kept"})
        summary["json"], summary["md"] = str(dest / report.ARTIFACT_JSON), str(dest / report.ARTIFACT_MD)
        return summary
    try:
        pj, pm = report.write_artifact(art, dest)
        summary["json"], summary["md"] = str(pj), str(pm)
    except Exception as exc:
        summary["skill_errors"].append({"where": "write", "error": _one_line(exc)})
    return summary


def rerun(artifact, entries=(), counters: bool = True, playbook_dir=None) -> dict:
    """Stage C after the pipeline's op benchmarker: re-run the GEMM heads of `artifact`
    (profile_roofline.json) through the ladder and write the measurement back. Never raises:
    returns {"rerun": [...], "skipped": {...}, "playbook": path|None, "error": str|None}; on any
    failure (no GPU, no ncu, a broken kernel) the artifact is left as it was."""
    try:
        from roofline.rerun import rerun_artifact

        res = rerun_artifact(Path(artifact), tuple(entries), counters, None, playbook_dir)
        res["error"] = None
        return res
    except Exception as exc:
        return {"rerun": [], "skipped": {}, "playbook": None, "error": f"{exc.__class__.__name__}: {exc}"}


def feedback(artifact, kernel: str, isolated_speedup: float, e2e_delta_pct: float | None = None,
             playbook_dir=None, isolated_band: float | None = None, e2e_band: float | None = None) -> dict:
    """The feedback loop (docs/method.md section 9) from the pipeline: record a kernel team's measurement of `kernel` in
    `artifact` (flags model_contradicted when it beats attainable_speedup; the measurement is
    preferred) and append predicted vs actual to knowledge/backend_playbook.md. Never raises:
    returns {"entry", "feedback", "playbook", "error": None|str}; on error nothing is written."""
    try:
        from roofline.stagec import feedback as _fb

        kw = {k: v for k, v in (("isolated", isolated_band), ("e2e_pct", e2e_band)) if v is not None}
        res = _fb.record_feedback(artifact, kernel, isolated_speedup, e2e_delta_pct, bands=_fb.NoiseBands(**kw),
                                  playbook_dir=playbook_dir)
        res["error"] = None
        return res
    except Exception as exc:
        return {"entry": None, "feedback": None, "playbook": None, "error": f"{exc.__class__.__name__}: {exc}"}

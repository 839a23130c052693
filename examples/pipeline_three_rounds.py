#!/usr/bin/env python3
"""How a serving-optimization pipeline drives the `roofline` stage over three rounds.

    python examples/pipeline_three_rounds.py [--workdir DIR] [--plot]

Over fixture data measured on an H200 (fixtures/hook/, kernel names and per-launch times from
fixtures/ncu/known.json; counters from fixtures/ncu/known_raw.csv, a real Nsight Compute run):

- round 1, stage A: the profiler's Top-N with `est_shape` guesses only (no dtypes);
- round 2, stage B: the same kernels with the shapes and dtypes the extractor captured;
- round 3, stage C: as round 2, plus the counters measured on the isolated ops;
- step 4, the feedback loop (docs/method.md section 9): a kernel team reports an isolated speedup for
  round 3's biggest head with a verdict; `roofline.feedback.record_feedback` (the Python side of
  `roofline feedback`) judges it against the 3.4% isolated noise band, flags `model_contradicted`
  when it beats the predicted `attainable_speedup`, and appends predicted vs actual to
  knowledge/backend_playbook.md, whose proposed target_eff is printed (never applied).
  The measurement is illustrative: by default 1.25x the prediction (`--measured X` to pass one).

Each round calls `roofline.hook.run(round_dir, ...)` exactly as the pipeline does: discovered
through the `serving_pipeline.analysis` entry point when the package is installed, imported
directly otherwise. The hook writes profile_roofline.{json,md} beside each Top-N and returns a
summary; it never raises. With --plot, round 3's artifact also gets its roofline picture
(stage-A/B estimates with arrows to the measured points), linked from its markdown.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "hook"
COUNTERS = ROOT / "fixtures" / "ncu" / "known_raw.csv"


def discover_hook():
    """The pipeline's way: the `roofline` stage of the `serving_pipeline.analysis` group."""
    try:
        from importlib.metadata import entry_points

        eps = entry_points(group="serving_pipeline.analysis")
        for ep in eps:
            if ep.name == "roofline":
                return ep.load(), f"entry point {ep.value}"
    except Exception:
        pass
    sys.path.insert(0, str(ROOT))
    from roofline import hook

    return hook.run, "roofline.hook.run (imported directly; package not installed)"


def stage_rounds(workdir: Path) -> list[tuple[Path, dict]]:
    """Lay out run_root/{env_report.json, profile/round_<R>/profile_topN.json} like the pipeline."""
    shutil.copy(FIX / "env_report.json", workdir / "env_report.json")
    rounds = [("round_1", "round_a_topN.json", {}),
              ("round_2", "round_b_topN.json", {}),
              ("round_3", "round_b_topN.json", {"counters": str(COUNTERS)})]
    out = []
    for rd, src, kw in rounds:
        d = workdir / "profile" / rd
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIX / src, d / "profile_topN.json")
        out.append((d, kw))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--workdir", help="run root to write into (default: a fresh temporary directory)")
    ap.add_argument("--plot", action="store_true", help="draw round 3's roofline picture and link it")
    ap.add_argument("--measured", type=float, default=None,
                    help="step 4: the isolated speedup a kernel team measured (default: 1.25x the prediction, "
                         "an illustrative value)")
    a = ap.parse_args(argv)
    workdir = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="roofline_pipeline_"))
    workdir.mkdir(parents=True, exist_ok=True)
    run, how = discover_hook()
    print(f"hook: {how}\nrun root: {workdir}")
    summaries = []
    for round_dir, kw in stage_rounds(workdir):
        s = run(round_dir, env="env_report.json", config="config.json", analysis_skill="roofline",
                head_threshold_pct=5.0, stage=None, **kw)
        summaries.append(s)
        print(f"\n{round_dir.name}: stage {s['stage']}, degraded {s['degraded']}, "
              f"skill_errors {len(s['skill_errors'])}")
        print(f"  by pct_gpu_time:   {', '.join(_short(s['json'], n) for n in s['ranking_by_pct'])}")
        print(f"  by expected gain:  {', '.join(_short(s['json'], n) for n in s['ranking_by_expected_gain'])}")
        print(f"  wrote {s['json']}\n        {s['md']}")
    # L0: the pipeline turned the stage off -> nothing at all
    assert run(workdir / "profile" / "round_1", analysis_skill="none") is None
    print("\nanalysis_skill=none: hook returned None, wrote nothing (L0)")
    if a.plot:
        from roofline.report import artifact as report
        from roofline.report.plot import plot_artifact

        pj = Path(summaries[-1]["json"])
        art = json.loads(pj.read_text(encoding="utf-8"))
        earlier = [json.loads(Path(x["json"]).read_text(encoding="utf-8")) for x in summaries[:-1]]
        info = plot_artifact(art, pj.parent / "roofline.png", history=earlier)  # arrows A -> B -> C
        art["plot"] = "roofline.png"
        report.write_artifact(art, pj.parent)
        print(f"round_3 picture: {info['path']} ({len(info['points'])} points, "
              f"{len(info['stage_arrows'])} arrows between rounds), linked from {pj.parent / report.ARTIFACT_MD}")
    feedback_step(Path(summaries[-1]["json"]), a.measured)
    return 0


def feedback_step(artifact: Path, measured: float | None) -> None:
    """Step 4: feed a kernel team's measurement back (docs/method.md section 9)."""
    from roofline import feedback

    art = json.loads(artifact.read_text(encoding="utf-8"))
    head = next(e for e in sorted(art["entries"], key=lambda e: -e["pct_gpu_time"])
                if e.get("attainable_speedup") and e["headroom_class"] != "unknown")
    x = measured if measured is not None else round(1.25 * head["attainable_speedup"], 3)
    res = feedback.record_feedback(artifact, head["name"], x, source="kernel team (example)")
    fb = res["feedback"]
    print(f"\nstep 4 (feedback): {head['short_name']}: measured {x:.3f}x isolated vs predicted "
          f"{fb['predicted_attainable_speedup']:.3f}x -> {fb['isolated_verdict']}")
    e = next(e for e in json.loads(artifact.read_text(encoding="utf-8"))["entries"] if e["name"] == head["name"])
    print(f"  artifact entry: model_contradicted={str(e['model_contradicted']).lower()}, "
          f"measured_attainable_speedup={e['measured_attainable_speedup']:.3f}")
    md = Path(res["playbook"])
    print(f"  playbook line ({md}):\n    {md.read_text(encoding='utf-8').strip().splitlines()[-1]}")
    for cls, p in sorted(feedback.propose_priors(feedback.read_records(md.parent)).items()):
        if p.get("proposed_target_eff") is None:   # too few consistent records for a proposal
            print(f"  no proposal for target_eff[{cls}] yet (prior {p['prior']:.2f}; evidence: {p['evidence']} record(s))")
            continue
        print(f"  proposed target_eff[{cls}] = {p['proposed_target_eff']:.2f} (prior {p['prior']:.2f}; evidence: "
              f"{p['evidence']} record(s), {p['contradictions']} contradicted the model; not applied)")


def _short(json_path: str, name: str) -> str:
    try:
        art = json.loads(Path(json_path).read_text(encoding="utf-8"))
        return next(e.get("short_name") or name for e in art["entries"] if e["name"] == name)
    except Exception:
        return name


if __name__ == "__main__":
    sys.exit(main())

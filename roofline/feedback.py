"""The feedback loop of docs/method.md section 9: noise bands, the contradiction check for any
measurement, round-over-round comparison, and the playbook's proposed target_eff priors.

- Two noise bands: an ISOLATED kernel speedup is real only above the isolated
  repeat band (3.4%), an END-TO-END serving delta only outside the serving band (0.5%). Each is
  applied where it belongs; both are parameters (`NoiseBands`, CLI `--isolated-band`/`--e2e-band`).
- Contradiction: a measured speedup larger than the predicted `attainable_speedup` (by
  more than the isolated band) means the model was wrong: flagged `model_contradicted`, and the
  measurement is preferred (`measured_attainable_speedup`), always.
- Self-correction: predicted vs actual goes to knowledge/backend_playbook.{md,jsonl};
  `propose_priors` turns the records into proposed target_eff per op class with the evidence
  count. Proposals are printed, never applied.

Pure except `record_feedback`/`compare` (which read and write files) and never prints.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from roofline import contract, playbook, rerun
from roofline.errors import RooflineError


class FeedbackError(RooflineError):
    """A measurement or a round cannot be used (one line: what and where)."""


@dataclass(frozen=True)
class NoiseBands:
    isolated: float = rerun.NOISE_BAND_ISOLATED   # relative: identical isolated reruns differ by ~3.4%
    e2e_pct: float = 0.5                           # percentage points: the serving band (~0.5%)

    def __post_init__(self):
        for k, v in (("isolated", self.isolated), ("e2e_pct", self.e2e_pct)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise FeedbackError(f"noise band {k}: expected a non-negative number, got {v!r}")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def judge_isolated(speedup: float, predicted: float | None, bands: NoiseBands = NoiseBands()) -> dict:
    """An isolated (or in-run per-kernel) speedup against the isolated band and the prediction."""
    b = bands.isolated
    contradicted = predicted is not None and speedup > predicted * (1 + b)
    if speedup < 1 - b:
        verdict = "slower: a real regression beyond the isolated noise band"
    elif speedup <= 1 + b:
        verdict = f"no real gain (inside the {b:.1%} isolated noise band)"
    elif contradicted:
        verdict = "beats the predicted attainable speedup: the model was wrong, the measurement wins"
    else:
        verdict = "real gain, within the prediction"
    return {"real": speedup > 1 + b or speedup < 1 - b, "verdict": verdict, "model_contradicted": contradicted}


def judge_e2e(delta_pct: float | None, predicted_gain_pct: float | None, bands: NoiseBands = NoiseBands()) -> dict:
    """An end-to-end serving delta (%, positive = faster) against the serving band."""
    if delta_pct is None:
        return {"real": None, "verdict": "no e2e measurement", "error_pct": None}
    real = abs(delta_pct) > bands.e2e_pct
    verdict = (f"real e2e change: {abs(delta_pct):.2f}% {'faster' if delta_pct > 0 else 'slower'} "
               f"({delta_pct:+.2f}%, positive = faster; beyond the {bands.e2e_pct:g}% serving band)" if real
               else f"no real e2e change ({delta_pct:+.2f}% is inside the {bands.e2e_pct:g}% serving band)")
    err = None if predicted_gain_pct is None else delta_pct - predicted_gain_pct
    return {"real": real, "verdict": verdict, "error_pct": err}


def _num(x, what: str, positive: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or (positive and x <= 0):
        raise FeedbackError(f"{what}: expected a {'positive ' if positive else ''}number, got {x!r}")
    return float(x)


def load_artifact(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "profile_roofline.json"
    try:
        art = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FeedbackError(f"{p}: no such artifact") from None
    except (OSError, ValueError) as exc:
        raise FeedbackError(f"{p}: not a JSON artifact ({exc.__class__.__name__})") from None
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


def playbook_record(art: dict, e: dict, **measured) -> dict:
    """One predicted-vs-actual row (the jsonl twin of knowledge/backend_playbook.md)."""
    rec = {"time_utc": _now(), "round": art.get("round"), "kernel": e["name"],
           "op_class": contract.seed_op_class(e.get("op_kind") or e.get("op_class")),
           "op_kind": e.get("op_kind"), "regime": e.get("regime"),
           "device": (art.get("peaks") or {}).get("device"), "roofline_pct": e.get("roofline_pct"),
           "target_eff": e.get("target_eff"), "predicted_attainable_speedup": e.get("attainable_speedup"),
           "predicted_e2e_gain_pct": e.get("expected_e2e_gain_pct"), "measured_isolated_speedup": None,
           "measured_inrun_speedup": None, "measured_e2e_delta_pct": None, "model_contradicted": False,
           "best": None, "ladder_level": None, "verdict": None}
    rec.update(measured)
    return rec


run_root = playbook.run_root   # one run root for feedback, compare and rerun (roofline/playbook.py)


def record_feedback(artifact: str | Path, kernel: str, isolated_speedup: float, e2e_delta_pct: float | None = None,
                    *, bands: NoiseBands = NoiseBands(), playbook_dir: str | Path | None | bool = None,
                    source: str = "kernel team") -> dict:
    """`roofline feedback` from Python: record a kernel team's measurement in the artifact
    (rewritten atomically, markdown included) and append predicted vs actual to the playbook.
    Returns {"entry", "feedback", "playbook"}. Raises FeedbackError (one line) on unusable input."""
    from roofline import report

    p = Path(artifact)
    p = p / report.ARTIFACT_JSON if p.is_dir() else p
    art = load_artifact(p)
    rec = apply_feedback(art, kernel, isolated_speedup, e2e_delta_pct, bands=bands, source=source, where=str(p))
    e = find_entry(art, kernel, str(p))
    report.write_artifact(art, p.parent)
    pb = None
    if playbook_dir is not False:
        d = Path(playbook_dir) if playbook_dir else playbook.knowledge_dir(p.parent)
        verdict = rec["isolated_verdict"] + (f"; {rec['e2e_verdict']}" if e2e_delta_pct is not None else "")
        pb, _ = playbook.append_playbook(d, playbook_record(
            art, e, measured_isolated_speedup=rec["measured_isolated_speedup"],
            measured_e2e_delta_pct=rec["measured_e2e_delta_pct"], model_contradicted=rec["model_contradicted"],
            verdict=verdict, source=f"feedback ({source})"))
        pb = str(pb)
    return {"entry": e["name"], "feedback": rec, "playbook": pb}


# ----------------------------------------------------------------------------- compare
def _load_round(path: str | Path) -> dict:
    """A round: {"artifact": dict|None, "topn": dict|None, "where": str}. `path` is a round
    directory (profile_roofline.json and/or profile_topN.json in it), an artifact or a Top-N."""
    p = Path(path)
    out: dict[str, Any] = {"artifact": None, "topn": None, "where": str(p)}
    files = [p / "profile_roofline.json", p / "profile_topN.json"] if p.is_dir() else [p]
    if not any(f.is_file() for f in files):
        raise FeedbackError(f"{p}: no profile_roofline.json or profile_topN.json")
    for f in files:
        if not f.is_file():
            continue
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise FeedbackError(f"{f}: not JSON ({exc.__class__.__name__})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise FeedbackError(f"{f}: neither a Top-N nor an artifact (no entries array)")
        if doc.get("skill") == "roofline":
            out["artifact"] = doc
            src = (doc.get("inputs") or {}).get("topn")
            if out["topn"] is None and not p.is_dir() and src and Path(src).is_file():
                try:
                    out["topn"] = json.loads(Path(src).read_text(encoding="utf-8"))
                except ValueError:
                    pass
        else:
            out["topn"] = doc
    return out


def _kernel_times(rnd: dict) -> dict[str, dict]:
    """name -> {regime: (t_ms per launch, launches per step)}, from the Top-N, else the artifact."""
    out: dict[str, dict] = {}
    if rnd["topn"] is not None:
        for t in rnd["topn"]["entries"]:
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                continue
            regs = {}
            for r, v in (t.get("regimes") or {}).items():
                try:
                    regs[r] = (float(v["base_latency_ms"]), float(v["launches_per_step"]))
                except (KeyError, TypeError, ValueError):
                    continue
            out.setdefault(t["name"], {"regimes": regs, "pct_gpu_time": t.get("pct_gpu_time"),
                                       "short_name": t.get("short_name") if isinstance(t.get("short_name"), str)
                                       else None})
    elif rnd["artifact"] is not None:
        for e in rnd["artifact"]["entries"]:
            if e.get("t_ms") and e.get("launches_per_step") and e.get("regime"):
                out.setdefault(e["name"], {"regimes": {e["regime"]: (float(e["t_ms"]), float(e["launches_per_step"]))},
                                           "pct_gpu_time": e.get("pct_gpu_time")})
    return out


def _gpu_ms_per_step(topn: dict | None) -> float | None:
    if not topn:
        return None
    tot, sv = topn.get("total_gpu_time_ms"), topn.get("serving") or {}
    steps = (sv.get("n_decode_steps") or 0) + (sv.get("n_prefill_steps") or 0)
    if not isinstance(tot, (int, float)) or tot <= 0:
        return None
    return tot / steps if steps else None


def compare(round_a, round_b, *, bands: NoiseBands = NoiseBands(), e2e_delta_pct: float | None = None,
            kernels: tuple[str, ...] = (), playbook_dir: str | Path | None | bool = False) -> dict:
    """Two rounds of the same workload, before (A) and after (B) a change: per kernel the measured
    GPU time change per step (in-run speedup, judged against the isolated band) and what it gave
    end to end (pct_gpu_time in A x (1 - 1/speedup)) against round A's prediction; the run's e2e
    delta (the pipeline's serving measurement `e2e_delta_pct` when given, else GPU time per step
    from the two Top-Ns' total_gpu_time_ms), judged against the e2e band. With `playbook_dir`
    (None = <run root>/knowledge), every kernel of A with a prediction whose time changed beyond
    the band (or named in `kernels`) gets a playbook record with measured_e2e_delta_pct filled,
    and earlier records of A's round for that kernel have theirs filled too."""
    a, b = _load_round(round_a), _load_round(round_b)
    ta, tb = _kernel_times(a), _kernel_times(b)
    pred = {e["name"]: e for e in (a["artifact"] or {}).get("entries", [])}
    e2e, e2e_src = _e2e_delta(a, b, e2e_delta_pct)
    rows = [_compare_kernel(name, ta.get(name), tb.get(name), pred.get(name, {}), bands)
            for name in sorted(set(ta) | set(tb), key=lambda n: -float((ta.get(n) or tb.get(n))["pct_gpu_time"] or 0))]
    e2e_j = judge_e2e(e2e, None, bands)
    out = {"round_a": a["where"], "round_b": b["where"], "e2e_delta_pct": e2e, "e2e_source": e2e_src,
           "e2e_real": e2e_j["real"], "e2e_verdict": e2e_j["verdict"], "noise_bands": asdict(bands),
           "kernels": rows, "warnings": workload_warnings(a, b), "playbook": None, "playbook_records": 0,
           "playbook_filled": 0}
    if playbook_dir is not False and a["artifact"] is not None:
        if out["warnings"]:   # a time change of another workload is no evidence about a kernel's prior
            out["playbook_skipped"] = "the two rounds ran different workloads: nothing recorded"
        else:
            _fill_playbook(out, a, b, rows, pred, e2e, kernels, playbook_dir)
    return out


def _round_env(rnd: dict) -> dict | None:
    """The env report a round was analysed with (the artifact says), else the one beside it or above."""
    from roofline.inputs import find_upwards

    cand = ((rnd["artifact"] or {}).get("inputs") or {}).get("env")
    p = Path(cand) if isinstance(cand, str) and Path(cand).is_file() else None
    if p is None:
        w = Path(rnd["where"])
        p = find_upwards(w if w.is_dir() else w.parent, "env_report.json")
    try:
        doc = json.loads(p.read_text(encoding="utf-8")) if p else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _steps(rnd: dict) -> dict:
    sv = (rnd["topn"] or {}).get("serving") or {}
    return {r: sv.get(f"n_{r}_steps") or 0 for r in ("decode", "prefill")}


def workload_warnings(a: dict, b: dict) -> list[str]:
    """What differs between the two rounds' workloads (env reports: isl, osl, conc, device, dtype;
    Top-Ns: which regimes ran): a change of kernel time then mixes the workload with the fix."""
    out = []
    ea, eb = _round_env(a), _round_env(b)
    if ea is not None and eb is not None:
        wa, wb = ea.get("workload") or {}, eb.get("workload") or {}
        diff = [f"{k} {wa.get(k)} -> {wb.get(k)}" for k in ("isl", "osl", "conc") if wa.get(k) != wb.get(k)]
        diff += [f"{k} {ea.get(k)} -> {eb.get(k)}" for k in ("gpu_name", "gfx", "model_dtype")
                 if ea.get(k) != eb.get(k)]
        if diff:
            out.append(f"the two rounds ran different workloads ({'; '.join(diff)}): a kernel's time change mixes "
                       "the workload change with the fix")
    sa, sb = _steps(a), _steps(b)
    ran_a, ran_b = {r for r, n in sa.items() if n}, {r for r, n in sb.items() if n}
    if a["topn"] and b["topn"] and ran_a != ran_b:
        out.append(f"the two rounds profiled different regimes (A: {', '.join(sorted(ran_a)) or 'none'}; B: "
                   f"{', '.join(sorted(ran_b)) or 'none'}): per-step times are not comparable")
    return out


def _e2e_delta(a: dict, b: dict, e2e_delta_pct) -> tuple[float | None, str | None]:
    """The run's e2e delta % and where it comes from (given, else GPU time per step)."""
    if e2e_delta_pct is not None:
        e2e, e2e_src = _num(e2e_delta_pct, "e2e delta %"), "serving measurement (given)"
    else:
        pa, pb_ = _gpu_ms_per_step(a["topn"]), _gpu_ms_per_step(b["topn"])
        e2e = (pa - pb_) / pa * 100.0 if pa and pb_ else None
        e2e_src = "GPU time per step (total_gpu_time_ms / steps of the two Top-Ns)" if e2e is not None else None
    return e2e, e2e_src


def _compare_kernel(name: str, ka, kb, pe: dict, bands: NoiseBands) -> dict:
    """One kernel's row: its time per step in A and B, the in-run speedup judged against the
    isolated band, and what it gave end to end."""
    from roofline.classify import short_name

    sn = pe.get("short_name") or (ka or {}).get("short_name") or (kb or {}).get("short_name") or short_name(name)
    row: dict[str, Any] = {"kernel": name, "short_name": sn, "op_class": pe.get("op_class"),
                           "pct_gpu_time_a": ka and ka["pct_gpu_time"], "pct_gpu_time_b": kb and kb["pct_gpu_time"],
                           "predicted_attainable_speedup": pe.get("attainable_speedup"),
                           "predicted_e2e_gain_pct": pe.get("expected_e2e_gain_pct"), "regime": None,
                           "t_ms_a": None, "t_ms_b": None, "step_ms_a": None, "step_ms_b": None,
                           "measured_inrun_speedup": None, "measured_kernel_e2e_gain_pct": None,
                           "status": "both"}
    if ka is None or kb is None:
        row["status"] = "new in B" if ka is None else "gone in B (fused away or no longer launched)"
    regime = pe.get("regime") or next((r for r in ("decode", "prefill")
                                       if r in (ka or {}).get("regimes", {}) or r in (kb or {}).get("regimes", {})),
                                      None)
    row["regime"] = regime
    if ka and regime in ka["regimes"]:
        row["t_ms_a"], la = ka["regimes"][regime]
        row["step_ms_a"] = row["t_ms_a"] * la
    if kb and regime in kb["regimes"]:
        row["t_ms_b"], lb = kb["regimes"][regime]
        row["step_ms_b"] = row["t_ms_b"] * lb
    if row["step_ms_a"] and row["step_ms_b"]:
        s = row["step_ms_a"] / row["step_ms_b"]
        row["measured_inrun_speedup"] = s
        iso = judge_isolated(s, row["predicted_attainable_speedup"], bands)
        row.update(time_change_real=iso["real"], verdict=f"in-run {s:.3f}x per step: {iso['verdict']}",
                   model_contradicted=iso["model_contradicted"])
        if isinstance(row["pct_gpu_time_a"], (int, float)):
            row["measured_kernel_e2e_gain_pct"] = row["pct_gpu_time_a"] * (1 - 1 / s)
    elif row["step_ms_a"] and kb is None:
        row.update(time_change_real=True, verdict="gone in B: its whole share is saved", model_contradicted=False)
        if isinstance(row["pct_gpu_time_a"], (int, float)):
            row["measured_kernel_e2e_gain_pct"] = float(row["pct_gpu_time_a"])
    else:
        row.update(time_change_real=None, verdict=row["status"], model_contradicted=False)
    return row


def _fill_playbook(out: dict, a: dict, b: dict, rows: list[dict], pred: dict, e2e, kernels, playbook_dir) -> None:
    """Playbook records for the kernels whose time changed beyond the band (or named), and the
    e2e delta filled into earlier records of A's round."""
    base = Path(a["where"])
    d = Path(playbook_dir) if playbook_dir else playbook.knowledge_dir(base)
    recs = []
    for row in rows:
        pe = pred.get(row["kernel"])
        if pe is None or (not row.get("time_change_real") and row["kernel"] not in kernels
                          and row.get("short_name") not in kernels):
            continue
        recs.append(playbook_record(
            a["artifact"], pe, measured_inrun_speedup=row["measured_inrun_speedup"], measured_e2e_delta_pct=e2e,
            measured_kernel_e2e_gain_pct=row["measured_kernel_e2e_gain_pct"],
            model_contradicted=row["model_contradicted"], verdict=row["verdict"],
            source=f"compare {a['where']} -> {b['where']}"))
    if recs or e2e is not None:
        out["playbook_filled"] = fill_e2e(d, a["artifact"].get("round"), {r["kernel"] for r in recs} or
                                          set(pred), e2e) if e2e is not None else 0
        for r in recs:
            playbook.append_playbook(d, r)
        out["playbook"] = str(d / "backend_playbook.md")
        out["playbook_records"] = len(recs)


def read_records(directory: str | Path) -> list[dict]:
    p = Path(directory)
    jl = p / "backend_playbook.jsonl" if p.is_dir() else p
    if not jl.is_file():
        return []
    return [json.loads(line) for line in jl.read_text(encoding="utf-8").splitlines() if line.strip()]


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
                playbook.append_playbook(td, r)
            for f in ("backend_playbook.jsonl", "backend_playbook.md"):
                os.replace(Path(td) / f, d / f)
    return n


# ----------------------------------------------------------------------------- priors
def propose_priors(records: list[dict], bands: NoiseBands = NoiseBands()) -> dict[str, dict]:
    """Per seed op class (and regime for attention): the evidence count, how many measurements
    contradicted the model, the median measured/predicted speedup (1.00 = calibrated), the median
    e2e error (measured - predicted, % points) and a proposed target_eff: the median of what the
    measurements show reachable, roofline_pct x measured speedup (capped at 1). Only real gains
    (above the isolated band) count as evidence: a speedup inside the band, or a slower re-run,
    says nothing about what a good kernel reaches. Never applied."""
    from roofline import routing

    groups: dict[str, dict] = {}
    for r in records:
        s = r.get("measured_isolated_speedup") or r.get("measured_inrun_speedup")
        if s is None or r.get("roofline_pct") is None:
            continue
        cls = contract.seed_op_class(r.get("op_kind") or r.get("op_class"))
        key = f"attn_{r.get('regime') or 'decode'}" if cls == "attn" else cls
        g = groups.setdefault(key, {"evidence": 0, "contradictions": 0, "ratios": [], "reached": [],
                                    "e2e_errors": [], "priors": []})
        if s <= 1 + bands.isolated and not r.get("model_contradicted"):
            continue   # no real gain (inside the band, or slower): says nothing about what is reachable
        g["evidence"] += 1
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
        out[key] = {"evidence": g["evidence"], "contradictions": g["contradictions"], "prior": prior,
                    "median_measured_over_predicted": statistics.median(g["ratios"]) if g["ratios"] else None,
                    "median_e2e_error_pct": statistics.median(g["e2e_errors"]) if g["e2e_errors"] else None,
                    "proposed_target_eff": statistics.median(g["reached"]) if g["reached"] else None}
    return out

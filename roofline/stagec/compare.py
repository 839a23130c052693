"""Round-over-round comparison (docs/method.md section 9): two rounds of the same workload, before
and after a change; per kernel the measured time change per step judged against the isolated band
(roofline/core/judge.py), the run's e2e delta against the serving band, and the playbook records
of the kernels that changed (roofline/stagec/playbook.py). `roofline compare`.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from roofline.io.errors import FeedbackError
from roofline.stagec import playbook, samework
from roofline.stagec.feedback import _num
from roofline.core.judge import NoiseBands, judge_e2e, judge_isolated
from roofline.core.topn_entry import REGIMES
from roofline.io.values import MAX_DIM, MAX_LATENCY_MS, MIN_LATENCY_MS, finite

def _read(f: Path) -> dict:
    """One round file, read as every input is (bounded size and depth, special files refused,
    NaN / 1e5000 kept as non-finite numbers): a dict with an entries array, else one line."""
    from roofline.core.inputs import read_json
    from roofline.io.errors import InputError

    try:
        doc = read_json(f)
    except InputError as exc:
        raise FeedbackError(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise FeedbackError(f"{f}: neither a Top-N nor an artifact (no entries array)")
    return doc


def _checked_artifact(doc: dict, f: Path) -> dict:
    """An artifact compare may judge and record from: one that validates against its schema."""
    from roofline.io.schema import validate_artifact

    try:
        validate_artifact(doc)
    except Exception as exc:  # noqa: BLE001 - jsonschema.ValidationError: the file's problem, one line
        where = "$." + ".".join(str(x) for x in getattr(exc, "absolute_path", []))
        raise FeedbackError(f"{f}: not a valid artifact: {where}: "
                            f"{' '.join(str(getattr(exc, 'message', exc)).split())[:160]}") from None
    return doc


def _checked_topn(doc: dict, f: Path) -> dict:
    """A Top-N whose file-level fields hold (docs/input_policy.md; its entries are judged one by one)."""
    from roofline.core.inputs import parse_topn
    from roofline.io.errors import InputError

    try:
        parse_topn(doc, str(f))
    except InputError as exc:
        raise FeedbackError(str(exc)) from None
    return doc


def _is_file(f: Path) -> bool:
    """There is something by that name (a FIFO or a device too: its reader says what it is)."""
    try:
        return f.exists() and not f.is_dir()
    except (OSError, ValueError):
        return False


def _load_round(path: str | Path) -> dict:
    """A round: {"artifact": dict|None, "topn": dict|None, "where": str}. `path` is a round
    directory (profile_roofline.json and/or profile_topN.json in it), an artifact or a Top-N."""
    from roofline.io.safeio import path_problem

    p = Path(path)
    bad = path_problem(p)
    if bad:
        raise FeedbackError(f"{p}: {bad}")
    out: dict[str, Any] = {"artifact": None, "topn": None, "where": str(p)}
    if not p.exists():
        raise FeedbackError(f"{p}: no such file or folder: expected a round folder (profile_roofline.json and/or "
                            "profile_topN.json in it), an artifact or a Top-N")
    is_dir = p.is_dir()
    files = [p / "profile_roofline.json", p / "profile_topN.json"] if is_dir else [p]
    if is_dir and not any(_is_file(f) for f in files):
        raise FeedbackError(f"{p}: a folder with no profile_roofline.json or profile_topN.json")
    for f in files:
        if is_dir and not _is_file(f):
            continue
        doc = _read(f)
        if doc.get("skill") == "roofline":
            out["artifact"] = _checked_artifact(doc, f)
            src = samework.inputs_of({"artifact": doc}).get("topn")
            if out["topn"] is None and not is_dir and isinstance(src, str) and _is_file(Path(src)):
                try:
                    out["topn"] = _checked_topn(_read(Path(src)), Path(src))
                except FeedbackError:
                    pass   # the artifact's source Top-N, moved or damaged since: the artifact alone
        else:
            out["topn"] = _checked_topn(doc, f)
    return out


def _time(v) -> float | None:
    """A launch time in ms as the input policy reads it (1e-6..1e9), else None."""
    return float(v) if finite(v) and MIN_LATENCY_MS <= v <= MAX_LATENCY_MS else None


def _launches(v) -> float | None:
    return float(v) if finite(v) and 0 < v <= MAX_DIM else None


def _pct(v) -> float | None:
    return float(v) if finite(v) and 0 <= v <= 100 else None


def _kernel_times(rnd: dict) -> dict[str, dict]:
    """name -> {regime: (t_ms per launch, launches per step)}, from the Top-N, else the artifact. A
    time or launch count outside the input policy's ranges (negative, NaN, a string) is no time:
    that regime of that kernel is not compared, the others are."""
    out: dict[str, dict] = {}
    if rnd["topn"] is not None:
        for t in rnd["topn"]["entries"]:
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                continue
            regs = {}
            bad_pct = "pct_gpu_time" in t and _pct(t["pct_gpu_time"]) is None   # the entry's problem: no times
            for r, v in (t["regimes"].items() if isinstance(t.get("regimes"), dict) and not bad_pct else ()):
                if r in REGIMES and isinstance(v, dict):
                    tm, ln = _time(v.get("base_latency_ms")), _launches(v.get("launches_per_step"))
                    if tm is not None and ln is not None:
                        regs[r] = (tm, ln)
            out.setdefault(t["name"], {"regimes": regs, "pct_gpu_time": _pct(t.get("pct_gpu_time")),
                                       "short_name": t.get("short_name") if isinstance(t.get("short_name"), str)
                                       else None})
    elif rnd["artifact"] is not None:
        for e in rnd["artifact"]["entries"]:
            tm, ln = _time(e.get("t_ms")), _launches(e.get("launches_per_step"))
            if tm is not None and ln is not None and e.get("regime") in REGIMES:
                out.setdefault(e["name"], {"regimes": {e["regime"]: (tm, ln)}, "pct_gpu_time": _pct(e.get("pct_gpu_time"))})
    return out


def _gpu_ms_per_step(topn: dict | None) -> float | None:
    if not topn:
        return None
    tot, sv = topn.get("total_gpu_time_ms"), topn.get("serving")
    sv = sv if isinstance(sv, dict) else {}
    counts = [sv.get(k) for k in ("n_decode_steps", "n_prefill_steps")]
    if not finite(tot) or tot <= 0 or not all(c is None or (finite(c) and 0 <= c <= MAX_DIM) for c in counts):
        return None
    steps = sum(c or 0 for c in counts)
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
    diff = samework.round_differences(a, b)
    if diff:   # a time change of other work is no evidence about any kernel: nothing compared or recorded
        raise FeedbackError(f"{a['where']} and {b['where']} are not the same work ({'; '.join(diff)}): nothing "
                            "compared, nothing recorded")
    ta, tb = _kernel_times(a), _kernel_times(b)
    other = samework.shape_mismatches(a, b)
    if (set(ta) & set(tb)) and not (set(ta) & set(tb)) - other:
        raise FeedbackError(f"{a['where']} and {b['where']} are not the same work (every one of the "
                            f"{len(set(ta) & set(tb))} kernels in both rounds has other captured shapes): nothing "
                            "compared, nothing recorded")
    pred = {e["name"]: e for e in (a["artifact"] or {}).get("entries", [])}
    e2e, e2e_src = _e2e_delta(a, b, e2e_delta_pct)
    rows = [_compare_kernel(name, ta.get(name), tb.get(name), pred.get(name, {}), bands)
            for name in sorted(set(ta) | set(tb), key=lambda n: -float((ta.get(n) or tb.get(n))["pct_gpu_time"] or 0))]
    for row in rows:   # a kernel of other shapes does other work: no time change of it is judged
        if row["kernel"] in other:
            row.update(status="different work: its captured shapes differ between the rounds", verdict="not compared "
                       "(other captured shapes: other work)", measured_inrun_speedup=None, time_change_real=None,
                       measured_kernel_e2e_gain_pct=None, model_contradicted=False)
    e2e_j = judge_e2e(e2e, None, bands)
    out = {"round_a": a["where"], "round_b": b["where"], "e2e_delta_pct": e2e, "e2e_source": e2e_src,
           "e2e_real": e2e_j["real"], "e2e_verdict": e2e_j["verdict"], "noise_bands": asdict(bands),
           "kernels": rows, "warnings": workload_warnings(a, b), "playbook": None, "playbook_records": 0,
           "playbook_filled": 0, "not_compared": sorted(other)}
    workload_differs = bool(out["warnings"])
    if other:
        out["warnings"].append(f"{len(other)} kernel(s) in both rounds have other captured shapes (other work), not "
                               f"compared nor recorded: {', '.join(sorted(r['short_name'] for r in rows if r['kernel'] in other)[:6])}")
    if playbook_dir is not False and a["artifact"] is not None:
        if workload_differs:   # a time change of another workload is no evidence about a kernel's prior
            out["playbook_skipped"] = "the two rounds ran different workloads: nothing recorded"
        else:
            _fill_playbook(out, a, b, rows, pred, e2e, kernels, playbook_dir)
    return out


def _steps(rnd: dict) -> dict:
    sv = (rnd["topn"] or {}).get("serving")
    sv = sv if isinstance(sv, dict) else {}
    return {r: sv.get(f"n_{r}_steps") if finite(sv.get(f"n_{r}_steps")) else 0 for r in ("decode", "prefill")}


def workload_warnings(a: dict, b: dict) -> list[str]:
    """What differs between the two rounds' workloads (env reports: isl, osl, conc, device, dtype;
    Top-Ns: which regimes ran): a change of kernel time then mixes the workload with the fix."""
    out = []
    ea, eb = samework.round_env(a)[0], samework.round_env(b)[0]
    if ea is not None and eb is not None:
        wa, wb = (e.get("workload") if isinstance(e.get("workload"), dict) else {} for e in (ea, eb))
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
    from roofline.core.classify import short_name

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
        pa = row["predicted_attainable_speedup"]
        iso = judge_isolated(s, pa if finite(pa) and pa > 0 else None, bands)
        row.update(time_change_real=iso["real"], verdict=f"in-run {s:.3f}x per step: {iso['verdict']}",
                   model_contradicted=iso["model_contradicted"])
        if finite(row["pct_gpu_time_a"]):
            row["measured_kernel_e2e_gain_pct"] = row["pct_gpu_time_a"] * (1 - 1 / s)
    elif kb is None or ka is None:   # in one round only: its work may have moved into another kernel
        row.update(time_change_real=None, model_contradicted=False,
                   verdict=row["status"] + ": not a measured saving (its work may run in another kernel now)")
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
        s = row["measured_inrun_speedup"]
        if pe is None or row["status"] != "both" or not (finite(s) and s > 0):
            continue   # no measured time change of this kernel in both rounds: nothing to record
        if not row.get("time_change_real") and row["kernel"] not in kernels and row.get("short_name") not in kernels:
            continue
        recs.append(playbook.record(
            a["artifact"], pe, measured_inrun_speedup=row["measured_inrun_speedup"], measured_e2e_delta_pct=e2e,
            measured_kernel_e2e_gain_pct=row["measured_kernel_e2e_gain_pct"],
            model_contradicted=row["model_contradicted"], verdict=row["verdict"],
            source=f"compare {a['where']} -> {b['where']}"))
    if recs or e2e is not None:
        out["playbook_filled"] = playbook.fill_e2e(d, a["artifact"].get("round"), {r["kernel"] for r in recs} or
                                          set(pred), e2e) if e2e is not None else 0
        for r in recs:
            playbook.append_playbook(d, r)
        out["playbook"] = str(d / "backend_playbook.md")
        out["playbook_records"] = len(recs)

"""Stage C for GEMM heads: re-run the head's GEMM(s) in isolation through the ladder level the
dispatch table picks (cuBLAS beside it in the same process), check it first, time it, optionally
collect counters, write the measurement back into the artifact and record predicted vs actual in
the playbook (seed 002 sections 5 and 8).

CPU-side pieces (problem extraction, dispatch, write-back, guards, playbook) are pure and tested
without a GPU; `measure_problems` and `collect_counters` need the device.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from roofline.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT

# The ladder owns its dispatch (shape classes, the stopping rule, the table): re-exported here for
# stage C and for the callers that import them from roofline.rerun.
from roofline.ladder.dispatch import (  # noqa: F401
    DECODE_SKINNY_MAX_M, NOISE_BAND_ISOLATED, PREFILL_ALIGN, build_dispatch_table, choose_level,
    default_dispatch_table, dispatch_order, merge_benches, shape_class)


# The GEMMs of one logical op come from the head's op class registration (roofline/opclasses/:
# dense GEMM, the expert GEMMs of an MoE; [] for other classes), re-exported for stage C.
from roofline.opclasses import Problem, gemm_problems  # noqa: E402,F401


# --------------------------------------------------------------------------- write-back
def _roof_pct(entry: dict, t_ms: float, peaks: dict) -> float | None:
    t_s = t_ms / 1e3
    if entry.get("roof_axis") == "compute":
        pf = (peaks.get("flops") or {}).get(entry.get("compute_dtype"))
        return entry["flops_est"] / t_s / pf if pf else None
    return entry["bytes_est"] / t_s / peaks["hbm_bw_bytes_s"] if peaks.get("hbm_bw_bytes_s") else None


def guard_verdict(measured_speedup: float, predicted: float | None,
                  band: float = NOISE_BAND_ISOLATED) -> tuple[str, bool]:
    """Section 8 guards: sub-noise-band gains are not real; a measured speedup above the predicted
    attainable one means the model was wrong (the measurement wins). `band`: the isolated band."""
    contradiction = predicted is not None and measured_speedup > predicted * (1 + band)
    if measured_speedup < 1.0 - band:
        return "no real gain: the best isolated kernel is slower than the in-run kernel", contradiction
    if measured_speedup < 1.0 + band:
        return f"no real gain (inside the {band:.1%} isolated noise band)", contradiction
    if contradiction:
        return "measured speedup exceeds the predicted attainable: the model was wrong, the measurement wins", True
    return "real gain, within the prediction", False


def write_back(art: dict, name: str, meas: dict) -> dict:
    """Merge one re-run into entry `name`. `meas`: {"problems": [...], "ladder_level", "ladder_t_ms"
    (+p20/p80), "cublas_t_ms" (+p20/p80), "check_ok", "l2_mode", "counters": {...}|None,
    "dispatch_reason"}, times summed over the problems of one logical op. Returns the entry.

    The verdict compares like with like: the best ladder level against the library kernel, both
    isolated under the same L2 state, and projects that ratio onto the in-run time. In-run vs
    isolated is kept only as `isolation_ratio` (what isolation itself costs the library kernel)."""
    e = next(x for x in art["entries"] if x["name"] == name)
    peaks = art["peaks"]
    current = e.get("t_logical_op_ms") or e["t_ms"] * e.get("launches_per_logical_op", 1)
    lad, lib = meas.get("ladder_t_ms"), meas.get("cublas_t_ms")
    library_in_run = _is_library_kernel(e)
    m = {
        "isolated": True, "l2_mode": meas.get("l2_mode"), "l2_mode_reason": meas.get("l2_mode_reason"),
        "problems": meas.get("problems"), "dispatch_reason": meas.get("dispatch_reason"),
        "ladder_level": meas.get("ladder_level"), "ladder_t_ms": lad,
        "ladder_t_ms_p20": meas.get("ladder_t_ms_p20"), "ladder_t_ms_p80": meas.get("ladder_t_ms_p80"),
        "cublas_t_ms": lib, "cublas_t_ms_p20": meas.get("cublas_t_ms_p20"),
        "cublas_t_ms_p80": meas.get("cublas_t_ms_p80"), "check_ok": meas.get("check_ok"),
        "ladder_roofline_pct": _roof_pct(e, lad, peaks) if lad else None,
        "cublas_roofline_pct": _roof_pct(e, lib, peaks) if lib else None,
        "current_t_ms": current, "predicted_attainable_speedup": e.get("attainable_speedup"),
        "device": meas.get("device"), "time_utc": meas.get("time_utc"),
    }
    speedup, basis = _measured_speedup(m, meas, current, lad, lib, library_in_run)
    m["speedup_basis"] = basis
    m["best"] = "ladder" if (lad and (not lib or lad < lib)) else "cublas"
    verdict, contradiction = guard_verdict(speedup, e.get("attainable_speedup"))
    if basis.startswith("ladder vs library") and speedup < 1.0 - NOISE_BAND_ISOLATED:
        verdict = "no real gain: the ladder level is slower than the library kernel (like for like)"
    m.update(measured_attainable_speedup=speedup, verdict=verdict, model_contradicted=contradiction)
    if meas.get("counters"):
        m["counters"] = meas["counters"]
    e["measured"] = m
    e["measured_attainable_speedup"] = speedup
    if contradiction:
        e["suspect_model"] = True
    e["model_contradicted"] = bool(e.get("model_contradicted")) or contradiction   # the artifact-level flag
    note = _rerun_note(m, lad, lib, speedup, basis, verdict, current)
    e["notes"] = (e.get("notes", "") + "; " + note).lstrip("; ")
    art["stage"] = "C"
    return e


def _measured_speedup(m: dict, meas: dict, current: float, lad, lib, library_in_run: bool) -> tuple[float, str]:
    """The measured speedup and its basis; writes the like-for-like ratio, its spread and the
    projected in-run time into m."""
    if lad and lib:
        m["isolation_ratio"] = lib / current
        ratio = lib / lad
        m["ladder_vs_library_speedup"] = ratio
        lo_hi = [meas.get("cublas_t_ms_p20"), meas.get("cublas_t_ms_p80"),
                 meas.get("ladder_t_ms_p20"), meas.get("ladder_t_ms_p80")]
        if all(lo_hi):
            m["ladder_vs_library_speedup_range"] = [lo_hi[0] / lo_hi[3], lo_hi[1] / lo_hi[2]]
        if library_in_run:
            # like for like: both isolated, same L2 state; projected onto the in-run time
            speedup, basis = ratio, "ladder vs library, both isolated"
        else:
            speedup, basis = current / min(lad, lib), "in-run kernel (not a library one) vs the best isolated"
        m["projected_in_run_t_ms"] = current / max(speedup, 1e-12)
    else:
        cands = {k: v for k, v in (("ladder", lad), ("cublas", lib)) if v}
        speedup, basis = current / min(cands.values()), "in-run vs isolated (no like-for-like pair)"
    return speedup, basis


def _rerun_note(m: dict, lad, lib, speedup: float, basis: str, verdict: str, current: float) -> str:
    """The entry's note on one re-run: times, basis, spread, verdict, projection, isolation cost."""
    rng = m.get("ladder_vs_library_speedup_range")
    note = (f"stage C re-run ({m['l2_mode'] or 'cold'} L2): ladder L{m['ladder_level']} {lad:.4g} ms vs library "
            f"{lib:.4g} ms isolated -> {speedup:.3f}x {basis}" if (lad and lib) else
            f"stage C re-run: {speedup:.3f}x {basis}")
    if rng:
        note += f" (p20-p80 spread {rng[0]:.3f}-{rng[1]:.3f}x)"
    note += f"; {verdict}"
    if "projected_in_run_t_ms" in m:
        note += f"; projected in-run {m['projected_in_run_t_ms']:.4g} ms (now {current:.4g} ms)"
    if "isolation_ratio" in m:
        note += f"; isolation costs the library {m['isolation_ratio']:.2f}x its in-run time (kept apart)"
    return note


def counters_record(entry: dict, mix: dict):
    """A re-run's counter mix as the KernelCounters the stage-C merge reads (per LAUNCH, named as the
    entry so it matches it exactly); None when no DRAM byte count was measured (L4)."""
    from roofline.counters.base import KernelCounters

    if not mix or mix.get("error") or not mix.get("dram_bytes"):
        return None
    n_l = entry.get("launches_per_logical_op") or 1
    flops = mix.get("flops_issued")
    return KernelCounters(
        name=entry["name"], launches=1, source=f"rerun {mix.get('source', 'ncu')} ({mix.get('target')} isolated, "
        f"L2 {mix.get('l2_mode')}, {len(mix.get('per_problem', []))} problem(s) of the work mix)",
        t_ms=mix["t_ms"] / n_l if mix.get("t_ms") else None, dram_bytes=mix["dram_bytes"] / n_l,
        tensor_flops_by_dtype={"bf16": flops / n_l} if flops else {},
        l2_bytes=mix["l2_bytes"] / n_l if mix.get("l2_bytes") else None)


def restage(art: dict, artifact_path, records: list) -> dict:
    """Write the re-run's counters back through THE stage-C merge (the one `analyze --counters`
    uses): re-analyse the Top-N behind the artifact with them, then carry each entry's re-run block
    over. Raises FileNotFoundError when the Top-N behind the artifact cannot be found."""
    from roofline import api

    inp = art.get("inputs") or {}
    here = Path(artifact_path).parent
    topn = next((Path(p) for p in (inp.get("topn"), here / "profile_topN.json") if p and Path(p).is_file()), None)
    if topn is None:
        raise FileNotFoundError(f"the Top-N behind {artifact_path} was not found (inputs.topn, or "
                                "profile_topN.json beside it)")
    env = inp.get("env") if inp.get("env") and Path(inp["env"]).is_file() else None
    cfg = inp.get("config") if inp.get("config") and Path(inp["config"]).is_file() else None
    new = api.analyze(topn, env, cfg, stage="C", counters=records,
                      head_threshold_pct=art.get("head_threshold_pct", HEAD_THRESHOLD_PCT),
                      head_cap=art.get("head_cap", HEAD_CAP))
    old = {e["name"]: e for e in art["entries"]}
    for e in new["entries"]:
        o = old.get(e["name"])
        if o and "measured" in o:
            e["measured"] = o["measured"]
            e["measured_attainable_speedup"] = o["measured_attainable_speedup"]
            if o.get("suspect_model"):
                e["suspect_model"] = True
            rn = o["notes"].rsplit("; stage C re-run", 1)
            if len(rn) == 2:
                e["notes"] = (e.get("notes", "") + "; stage C re-run" + rn[1]).lstrip("; ")
    return new


def _is_library_kernel(e: dict) -> bool:
    from roofline.classify import is_library_kernel

    return e.get("editable") is False or is_library_kernel(e.get("name", ""))


# --------------------------------------------------------------------------- playbook
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


# --------------------------------------------------------------------------- GPU side
def device_arch() -> str | None:
    try:
        import cupy as cp

        maj = cp.cuda.Device().compute_capability
        return {"90": "sm_90a", "100": "sm_100a"}.get(maj, f"sm_{maj}")
    except Exception:
        return None


L2_MODES = ("cold", "warm", "auto")
L2_WARM_MAX_BYTES = 30 << 20     # auto: operands under half the H200's 60 MiB L2 stay warm in a run


def l2_mode_for(problems: list[Problem], mode: str = "auto") -> tuple[str, str]:
    """-> (cold|warm, why). auto: warm when one GEMM's operands fit in half the L2 (in a serving run
    its neighbours just wrote the activations and small weights stay resident), else cold."""
    if mode not in L2_MODES:
        raise ValueError(f"l2 mode must be one of {', '.join(L2_MODES)}, got {mode!r}")
    if mode != "auto":
        return mode, f"L2 {mode} (asked)"
    big = max((p.M * p.K + p.N * p.K + p.M * p.N) * 2 for p in problems)
    if big <= L2_WARM_MAX_BYTES:
        return "warm", f"L2 warm: the largest GEMM's operands ({big / 2**20:.1f} MiB) fit in half the L2"
    return "cold", f"L2 cold (flushed before each launch): the largest GEMM's operands are {big / 2**20:.0f} MiB"


def measure_problems(problems: list[Problem], level_id: int, seed: int = 0, l2: str = "cold") -> dict:
    """Check, then time the ladder level and cuBLAS on each problem in this process, both under the
    same L2 state (``l2``: cold = flushed before every launch, warm = not); times are summed over
    one logical op (count x per-GEMM time)."""
    from roofline.ladder import bench, check, gpu
    from roofline.ladder.registry import get_level

    cp = gpu.cupy()
    lv = get_level(level_id)
    timer = bench.Timer(flush_l2=(l2 != "warm"))
    tot = {"ladder": [0.0, 0.0, 0.0], "cublas": [0.0, 0.0, 0.0]}
    per = []
    ok = True
    for p in problems:
        chk = check.check_shape(lv, p.M, p.N, p.K, seed=seed + 7)
        ok = ok and chk.ok
        row = {**asdict(p), "check_ok": chk.ok, "check_rel_err": chk.rel_err_ref}
        if not chk.ok:
            row["check_reason"] = chk.reason
            per.append(row)
            continue
        a = gpu.random_bf16((p.M, p.K), seed=seed + 1)
        b = gpu.random_bf16((p.N, p.K), seed=seed + 2)
        c = cp.empty((p.M, p.N), dtype=cp.uint16)
        for key, fn in (("ladder", lambda: gpu.launch(lv, a, b, c, p.M, p.N, p.K)),
                        ("cublas", lambda: gpu.cublas_tn(a, b, c))):
            med, p20, p80 = bench.quantiles(timer.time(fn))
            row[f"{key}_t_ms"], row[f"{key}_t_ms_p20"], row[f"{key}_t_ms_p80"] = med, p20, p80
            for i, v in enumerate((med, p20, p80)):
                tot[key][i] += p.count * v
        per.append(row)
        del a, b, c
    out = {"problems": per, "ladder_level": level_id, "check_ok": ok, "device": gpu.device_name(), "l2_mode": l2,
           "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if ok:
        for key in ("ladder", "cublas"):
            out[f"{key}_t_ms"], out[f"{key}_t_ms_p20"], out[f"{key}_t_ms_p80"] = tot[key]
    return out


NCU_METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
               "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "dram__bytes.sum.peak_sustained",
               "dram__cycles_elapsed.avg.per_second", "lts__t_bytes.sum"]


def _version_tuple(text: str) -> tuple[int, ...]:
    import re

    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(x) for x in m.groups() if x is not None) if m else ()


def ncu_version(ncu: str | None = None) -> tuple[int, ...]:
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return ()
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    line = next((ln for ln in out.splitlines() if "Version" in ln), out)
    return _version_tuple(line)


NSIGHT_PYTHON_MIN_NCU = (2026, 2, 1)   # nsight-python >= 1.0 refuses older ncu


def counters_backend(ncu: str | None = None) -> tuple[str | None, str]:
    """Which way to collect counters here: ("nsight-python", why) where the installed
    nsight-python supports the installed ncu, else ("ncu-cli", why), else (None, why)."""
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return None, "no ncu on PATH: counters not collected (L4)"
    nv = ncu_version(ncu)
    try:
        from importlib.metadata import version

        import nsight  # noqa: F401

        npv = _version_tuple(version("nsight-python"))
    except Exception:
        return "ncu-cli", f"nsight-python not installed: the ncu CLI {'.'.join(map(str, nv))} is driven directly"
    if npv >= (1, 0) and nv < NSIGHT_PYTHON_MIN_NCU:
        return "ncu-cli", (f"nsight-python {'.'.join(map(str, npv))} needs ncu >= 2026.2.1, this ncu is "
                           f"{'.'.join(map(str, nv))}: the ncu CLI is driven directly")
    return "nsight-python", f"nsight-python {'.'.join(map(str, npv))} with ncu {'.'.join(map(str, nv))}"


def collect_counters(problem: Problem, level_id: int, ncu: str | None = None) -> dict | None:
    """Counters for one isolated launch of the ladder level: through nsight-python where it supports
    the installed ncu, else through the `ncu` CLI and the stage-C reader. Returns None or
    {"error": ...} (L4: the analytic result stays) when neither works."""
    backend, why = counters_backend(ncu)
    if backend is None:
        return None
    if backend == "nsight-python":
        out = _collect_nsight_python(problem, level_id)
        out["backend"] = why
        return out
    out = _collect_ncu_cli(problem, level_id, ncu)
    if out is not None:
        out["backend"] = why
    return out


def _child_env() -> dict:
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def _collect_nsight_python(problem: Problem, level_id: int) -> dict:
    """nsight-python re-runs its script under ncu, so it gets a small script of its own
    (`python -m roofline.rerun --nsight-target ...`), never the CLI that called it."""
    cmd = [sys.executable, "-m", "roofline.rerun", "--nsight-target", str(level_id), str(problem.M),
           str(problem.N), str(problem.K)]
    with tempfile.TemporaryDirectory() as td:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=td, env=_child_env())
    tag = "ROOFLINE_NSIGHT_JSON:"
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith(tag)), None)
    if res.returncode != 0 or line is None:
        return {"error": ((res.stderr or res.stdout).strip().splitlines() or ["nsight-python failed"])[-1]}
    m = json.loads(line[len(tag):])
    bf16 = m.get("sm__ops_path_tensor_src_bf16_dst_fp32.sum")
    rd, wr = m.get("dram__bytes_read.sum"), m.get("dram__bytes_write.sum")
    return {"name": f"gemm_l{level_id:02d}", "t_ms": m["gpu__time_duration.sum"] / 1e6 if m.get("gpu__time_duration.sum") else None,
            "dram_bytes": (rd + wr) if rd is not None and wr is not None else None,
            "flops_issued": bf16, "tensor_flops_by_dtype": {"bf16": bf16}, "l2_bytes": m.get("lts__t_bytes.sum"),
            "source": "nsight-python", "useful_flops": 2.0 * problem.M * problem.N * problem.K}


def _nsight_target(level_id: int, M: int, N: int, K: int) -> None:
    """Run under nsight-python: one annotated launch of the level; prints the metrics as JSON."""
    import nsight

    from roofline.ladder import gpu
    from roofline.ladder.registry import get_level

    cp = gpu.cupy()
    lv = get_level(level_id)
    a, b = gpu.random_bf16((M, K), seed=1), gpu.random_bf16((N, K), seed=2)
    c = cp.empty((M, N), dtype=cp.uint16)
    metrics = [m for m in NCU_METRICS if ".peak_sustained" not in m and "per_second" not in m]

    @nsight.analyze.kernel(configs=[(M, N, K)], runs=1, metrics=metrics, output="quiet", thermal_mode="off")
    def bench(m, n, k):
        with nsight.annotate("ladder"):
            gpu.launch(lv, a, b, c, m, n, k)

    res = bench()
    if res is None:  # the inner run under ncu: nothing to report
        return
    df = res.to_dataframe()
    vals = {str(r["Metric"]): float(r["AvgValue"]) for _, r in df.iterrows()}
    print("ROOFLINE_NSIGHT_JSON:" + json.dumps(vals), flush=True)


def _collect_ncu_cli(problem: Problem, level_id: int, ncu: str | None = None) -> dict | None:
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return None
    kcs = _ncu_counters(ncu, ["--metrics", ",".join(NCU_METRICS), "-k", f"regex:gemm_l{level_id:02d}", "-c", "1"],
                        ["--one-launch", str(level_id), str(problem.M), str(problem.N), str(problem.K)])
    if isinstance(kcs, dict):
        return kcs
    if not kcs:
        return None
    k = kcs[0]
    return {"name": k.name, "t_ms": k.t_ms, "dram_bytes": k.dram_bytes, "flops_issued": k.flops_issued,
            "tensor_flops_by_dtype": k.tensor_flops_by_dtype, "l2_bytes": k.l2_bytes, "source": "ncu-cli",
            "useful_flops": 2.0 * problem.M * problem.N * problem.K}


RANGE = "roofline_rerun"


def collect_mix_counters(problems: list[Problem], level_id: int, target: str = "cublas", l2: str = "cold",
                         ncu: str | None = None) -> dict | None:
    """Counters of ONE logical op's work mix: each problem launched once inside an NVTX range under
    the ncu CLI (every kernel in the range counts: a split-K GEMM's reduce included), then
    sum(count_i x problem_i). ``target``: "cublas" (the library kernel the run used) or "ladder".
    L2: cold = ncu flushes caches before the launch (--cache-control all), warm = it does not.
    Returns None (no ncu), {"error": ...} (L4) or the mix."""
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return None
    per = []
    for p in problems:
        r = _collect_ncu_range(p, level_id, target, l2, ncu)
        if r is None or r.get("error"):
            return r or {"error": f"no kernel counted for {p.M}x{p.N}x{p.K}"}
        per.append(r)
    mix: dict = {"target": target, "l2_mode": l2, "source": "ncu-cli", "per_problem": per}
    for k in ("t_ms", "dram_bytes", "flops_issued", "l2_bytes"):
        vals = [r.get(k) for r in per]
        mix[k] = sum(p.count * v for p, v in zip(problems, vals)) if all(v is not None for v in vals) else None
    mix["useful_flops"] = sum(p.count * 2.0 * p.M * p.N * p.K for p in problems)
    return mix


def _ncu_counters(ncu: str, ncu_args: list[str], target_args: list[str]):
    """Run `python -m roofline.rerun TARGET_ARGS` under the ncu CLI with NCU_ARGS, export the raw
    page as CSV (needs nothing beyond ncu itself: the ncu-report module may be absent) and read it
    with the stage-C reader. -> list of KernelCounters, or {"error": one line} (L4)."""
    from roofline.counters import load

    with tempfile.TemporaryDirectory() as td:
        rep = Path(td) / "rerun"
        cmd = [ncu, "--clock-control", "none", *ncu_args, "-f", "-o", str(rep),
               sys.executable, "-m", "roofline.rerun", *target_args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_child_env())
        path = rep.with_suffix(".ncu-rep")
        if res.returncode != 0 or not path.exists():
            return {"error": ((res.stderr or res.stdout).strip().splitlines() or ["ncu failed"])[-1]}
        csv = Path(td) / "rerun.csv"
        with open(csv, "w") as fh:
            exp = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"],
                                 stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120)
        if exp.returncode != 0:
            return {"error": (exp.stderr.strip().splitlines() or ["ncu --import failed"])[-1]}
        try:
            return load(csv)
        except ValueError as exc:  # CounterReadError: L4, keep the analytic result
            return {"error": str(exc)}


def _collect_ncu_range(problem: Problem, level_id: int, target: str, l2: str, ncu: str) -> dict | None:
    kcs = _ncu_counters(ncu, ["--cache-control", "none" if l2 == "warm" else "all", "--nvtx", "--nvtx-include",
                              f"{RANGE}/", "--metrics", ",".join(NCU_METRICS)],
                        ["--one-launch-range", target, str(level_id), str(problem.M), str(problem.N), str(problem.K)])
    if isinstance(kcs, dict):
        return kcs
    if not kcs:
        return None

    def total(attr):
        vals = [getattr(k, attr) for k in kcs]
        return sum(v * k.launches for v, k in zip(vals, kcs)) if all(v is not None for v in vals) else None
    return {"M": problem.M, "N": problem.N, "K": problem.K, "kernels": [k.name for k in kcs],
            "t_ms": total("t_ms"), "dram_bytes": total("dram_bytes"), "flops_issued": total("flops_issued"),
            "l2_bytes": total("l2_bytes")}


def _one_launch_range(target: str, level_id: int, M: int, N: int, K: int) -> None:
    """Target of collect_mix_counters' ncu run: one warm-up outside the range (handles, cuBLAS
    heuristics, module load), then one launch inside the NVTX range."""
    from roofline.ladder import gpu
    from roofline.ladder.registry import get_level

    cp = gpu.cupy()
    a, b = gpu.random_bf16((M, K), seed=1), gpu.random_bf16((N, K), seed=2)
    c = cp.empty((M, N), dtype=cp.uint16)
    if target == "cublas":
        fn = lambda: gpu.cublas_tn(a, b, c)  # noqa: E731
    else:
        lv = get_level(level_id)
        fn = lambda: gpu.launch(lv, a, b, c, M, N, K)  # noqa: E731
    fn()
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.nvtx.RangePush(RANGE)
    fn()
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.nvtx.RangePop()


def _one_launch(level_id: int, M: int, N: int, K: int) -> None:
    """Target of collect_counters' ncu run: one launch of the level on random data."""
    from roofline.ladder import gpu
    from roofline.ladder.registry import get_level

    cp = gpu.cupy()
    a, b = gpu.random_bf16((M, K), seed=1), gpu.random_bf16((N, K), seed=2)
    c = cp.empty((M, N), dtype=cp.uint16)
    gpu.launch(get_level(level_id), a, b, c, M, N, K)
    cp.cuda.runtime.deviceSynchronize()


if __name__ == "__main__":  # pragma: no cover - the ncu target, and the table builder
    if len(sys.argv) == 6 and sys.argv[1] == "--one-launch":
        _one_launch(*(int(x) for x in sys.argv[2:]))
    elif len(sys.argv) == 7 and sys.argv[1] == "--one-launch-range":
        _one_launch_range(sys.argv[2], *(int(x) for x in sys.argv[3:]))
    elif len(sys.argv) == 6 and sys.argv[1] == "--nsight-target":
        _nsight_target(*(int(x) for x in sys.argv[2:]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "--build-dispatch":
        benches = [json.loads(Path(p).read_text()) for p in sys.argv[2:-1]]
        tbl = build_dispatch_table(merge_benches(benches))
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    else:
        sys.exit("usage: python -m roofline.rerun --build-dispatch BENCH.json [BENCH.json ...] OUT.json")

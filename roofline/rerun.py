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
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

NOISE_BAND_ISOLATED = 0.034   # seed 002 s.8: identical isolated reruns differ by up to ~3.4%
DECODE_SKINNY_MAX_M = 128
PREFILL_ALIGN = 128


@dataclass
class Problem:
    label: str        # "dense", "moe stage1 (gate/up)", ...
    M: int
    N: int
    K: int
    dtype: str
    count: float      # how many such GEMMs make up one logical op (experts hit, for MoE)


def shape_class(M: int, N: int, K: int) -> str:
    """decode-skinny (M <= 128), prefill (every dim a multiple of 128), else ragged."""
    if M <= DECODE_SKINNY_MAX_M:
        return "decode-skinny"
    if M % PREFILL_ALIGN == 0 and N % PREFILL_ALIGN == 0 and K % 64 == 0:
        return "prefill"
    return "ragged"


def gemm_problems(entry: dict) -> list[Problem]:
    """The GEMMs that form one logical op of a head entry. Dense GEMM: itself. MoE: the expert
    GEMMs at the average tokens per hit expert. NB: real routing is skewed; the average is the
    model's assumption, stated in the write-back notes."""
    op, sh = entry.get("op_class"), entry.get("shape") or {}
    dt = (entry.get("dtypes") or {}).get("act", "bf16")
    if op == "gemm" and entry.get("shapes_used"):
        # one kernel name, several captured GEMMs: a launch-weighted mix per launch
        return [Problem(f"dense {u['shape']['M']}x{u['shape']['N']}x{u['shape']['K']}", int(u["shape"]["M"]),
                        int(u["shape"]["N"]), int(u["shape"]["K"]), dt, float(u["shape"].get("batch", 1)) * u["weight"])
                for u in entry["shapes_used"]]
    if op == "gemm" and all(k in sh for k in ("M", "N", "K")):
        return [Problem("dense", int(sh["M"]), int(sh["N"]), int(sh["K"]), dt, float(sh.get("batch", 1)))]
    if op == "moe" and all(k in sh for k in ("M", "E", "top_k", "hidden", "inter")):
        from roofline.models.moe import experts_hit

        pairs = int(sh["M"]) * int(sh["top_k"])
        hit = experts_hit(int(sh["E"]), pairs)
        m_e = max(1, math.ceil(pairs / hit))
        hidden, inter = int(sh["hidden"]), int(sh["inter"])
        stage = sh.get("stage")
        out = []
        if stage in (None, 1):
            out.append(Problem("moe stage1 (gate/up)", m_e, 2 * inter, hidden, dt, hit))
        if stage in (None, 2):
            out.append(Problem("moe stage2 (down)", m_e, hidden, inter, dt, hit))
        return out
    return []


# --------------------------------------------------------------------------- dispatch table
def build_dispatch_table(bench: dict, arch: str = "sm_90a", dtype: str = "bf16") -> dict:
    """From the ladder's own bench results (rows of `roofline ladder bench --out`): per shape class,
    every level that passed the check, ranked by its median % of cuBLAS over the benched shapes of
    that class, the first being the stopping rule's pick (`dispatch_order`). Returns a JSON-ready dict; `choose_level` takes the best level that supports the
    shape (single-tile levels only run tiny shapes)."""
    per: dict[tuple[str, int], list[float]] = {}
    for r in bench.get("rows", []):
        if r.get("level", 0) == 0 or not r.get("check_ok") or "pct_cublas" not in r:
            continue
        per.setdefault((shape_class(r["m"], r["n"], r["k"]), r["level"]), []).append(r["pct_cublas"])
    classes: dict[str, list] = {}
    for (cls, lvl), vals in per.items():
        classes.setdefault(cls, []).append({"level": lvl, "median_pct_cublas": statistics.median(vals),
                                            "shapes_benched": len(vals)})
    for cls, rows in classes.items():
        classes[cls] = dispatch_order(rows)
    return {"arch": arch, "dtype": dtype, "device": bench.get("meta", {}).get("device"),
            "source": bench.get("meta", {}).get("time_utc"), "classes": classes}


def dispatch_order(rows: list[dict], band: float = NOISE_BAND_ISOLATED) -> list[dict]:
    """Seed 000's stopping rule applied to one class's levels: a more complex (higher) level is
    the default only where it beats every simpler level by more than the isolated noise band.
    The first row is the LOWEST level whose median is within `band` of the best median; the
    rest follow by median. Every row says whether it is inside the band of the best."""
    rows = sorted(rows, key=lambda r: -r["median_pct_cublas"])
    if not rows:
        return rows
    best = rows[0]["median_pct_cublas"]
    for r in rows:
        r["within_noise_of_best"] = r["median_pct_cublas"] >= best * (1.0 - band)
    first = min((r for r in rows if r["within_noise_of_best"]), key=lambda r: r["level"])
    return [first] + [r for r in rows if r is not first]


def merge_benches(benches: list[dict]) -> dict:
    """Several bench runs as one: a (level, shape) measured in several runs keeps the LATEST run's
    row (levels change between runs; the newest code is what a re-run would launch)."""
    rows: dict[tuple, dict] = {}
    for b in sorted(benches, key=lambda b: b.get("meta", {}).get("time_utc", "")):
        for r in b.get("rows", []):
            rows[(r.get("level"), r.get("m"), r.get("n"), r.get("k"))] = r
    newest = max(benches, key=lambda b: b.get("meta", {}).get("time_utc", ""))
    return {"meta": newest.get("meta", {}), "rows": list(rows.values())}


def default_dispatch_table() -> dict | None:
    p = resources.files("roofline") / "data" / "ladder_dispatch_sm90a_bf16.json"
    return json.loads(p.read_text()) if p.is_file() else None


def _supports(level_id: int, M: int, N: int, K: int) -> bool:
    try:
        from roofline.ladder.registry import get_level

        return get_level(level_id).supports(M, N, K)
    except KeyError:
        return False


def choose_level(table: dict | None, M: int, N: int, K: int, dtype: str, arch: str = "sm_90a"
                 ) -> tuple[int | None, str]:
    """-> (level id or None, why). The best-measured level of the shape's class that supports the
    shape; if the class was never benched, the best level over all classes that supports it."""
    if table is None:
        return None, "no dispatch table (run `roofline ladder bench --out bench.json` on the device)"
    if dtype != table.get("dtype"):
        return None, f"dtype {dtype} is not supported by the ladder ({table.get('dtype')} only)"
    if arch != table.get("arch"):
        return None, (f"the ladder kernels need {table.get('arch')}; this device is {arch} "
                      "(no portable level in the ladder yet)")
    cls = shape_class(M, N, K)
    rows = [r for r in table["classes"].get(cls, []) if _supports(r["level"], M, N, K)]
    if rows:
        r = rows[0]
        return r["level"], (f"{cls}: level {r['level']} had the best median {r['median_pct_cublas']:.0f}% of "
                            f"cuBLAS over {r['shapes_benched']} benched {cls} shape(s)")
    allrows = sorted((r for rs in table["classes"].values() for r in rs if _supports(r["level"], M, N, K)),
                     key=lambda r: -r["median_pct_cublas"])
    if allrows:
        r = allrows[0]
        return r["level"], (f"{cls}: never benched; level {r['level']} is the best-measured level that "
                            "supports this shape")
    return None, f"no ladder level supports {M}x{N}x{K}"


# --------------------------------------------------------------------------- write-back
def _roof_pct(entry: dict, t_ms: float, peaks: dict) -> float | None:
    t_s = t_ms / 1e3
    if entry.get("roof_axis") == "compute":
        pf = (peaks.get("flops") or {}).get(entry.get("compute_dtype"))
        return entry["flops_est"] / t_s / pf if pf else None
    return entry["bytes_est"] / t_s / peaks["hbm_bw_bytes_s"] if peaks.get("hbm_bw_bytes_s") else None


def guard_verdict(measured_speedup: float, predicted: float | None) -> tuple[str, bool]:
    """Section 8 guards: sub-noise-band gains are not real; a measured speedup above the predicted
    attainable one means the model was wrong (the measurement wins)."""
    contradiction = predicted is not None and measured_speedup > predicted * (1 + NOISE_BAND_ISOLATED)
    if measured_speedup < 1.0 - NOISE_BAND_ISOLATED:
        return "no real gain: the best isolated kernel is slower than the in-run kernel", contradiction
    if measured_speedup < 1.0 + NOISE_BAND_ISOLATED:
        return "no real gain (inside the 3.4% isolated noise band)", contradiction
    if contradiction:
        return "measured speedup exceeds the predicted attainable: the model was wrong, the measurement wins", True
    return "real gain, within the prediction", False


def write_back(art: dict, name: str, meas: dict) -> dict:
    """Merge one re-run into entry `name`. `meas`: {"problems": [...], "ladder_level", "ladder_t_ms"
    (+p20/p80), "cublas_t_ms" (+p20/p80), "check_ok", "counters": {...}|None, "dispatch_reason"},
    times summed over the problems of one logical op. Returns the updated entry."""
    e = next(x for x in art["entries"] if x["name"] == name)
    peaks = art["peaks"]
    current = e.get("t_logical_op_ms") or e["t_ms"] * e.get("launches_per_logical_op", 1)
    cands = {"ladder": meas.get("ladder_t_ms"), "cublas": meas.get("cublas_t_ms")}
    cands = {k: v for k, v in cands.items() if v}
    best_k = min(cands, key=cands.get)
    speedup = current / cands[best_k]
    verdict, contradiction = guard_verdict(speedup, e.get("attainable_speedup"))
    m = {
        "isolated": True, "problems": meas.get("problems"), "dispatch_reason": meas.get("dispatch_reason"),
        "ladder_level": meas.get("ladder_level"), "ladder_t_ms": meas.get("ladder_t_ms"),
        "ladder_t_ms_p20": meas.get("ladder_t_ms_p20"), "ladder_t_ms_p80": meas.get("ladder_t_ms_p80"),
        "cublas_t_ms": meas.get("cublas_t_ms"), "cublas_t_ms_p20": meas.get("cublas_t_ms_p20"),
        "cublas_t_ms_p80": meas.get("cublas_t_ms_p80"), "check_ok": meas.get("check_ok"),
        "ladder_roofline_pct": _roof_pct(e, meas["ladder_t_ms"], peaks) if meas.get("ladder_t_ms") else None,
        "cublas_roofline_pct": _roof_pct(e, meas["cublas_t_ms"], peaks) if meas.get("cublas_t_ms") else None,
        "best": best_k, "current_t_ms": current,
        "measured_attainable_speedup": speedup, "predicted_attainable_speedup": e.get("attainable_speedup"),
        "verdict": verdict, "model_contradicted": contradiction,
        "device": meas.get("device"), "time_utc": meas.get("time_utc"),
    }
    if meas.get("counters"):
        m["counters"] = meas["counters"]
    if meas.get("cublas_t_ms") and _is_library_kernel(e):
        # The in-run kernel IS a cuBLAS kernel: cuBLAS re-run in isolation measures what isolation
        # itself costs (cold L2, no neighbours), and ladder-vs-cuBLAS is the like-for-like ratio.
        m["isolation_ratio"] = meas["cublas_t_ms"] / current
        if meas.get("ladder_t_ms"):
            m["ladder_vs_cublas_speedup"] = meas["cublas_t_ms"] / meas["ladder_t_ms"]
    e["measured"] = m
    e["measured_attainable_speedup"] = speedup
    if contradiction:
        e["suspect_model"] = True
    note = (f"stage C re-run: {best_k} {cands[best_k]:.4g} ms isolated vs {current:.4g} ms in the run -> "
            f"{speedup:.3f}x ({verdict}); isolated = cold L2, one launch, no neighbours")
    if "isolation_ratio" in m:
        note += (f"; cuBLAS (the in-run library) takes {m['isolation_ratio']:.2f}x its in-run time in isolation, "
                 "so part of the gap is the isolation itself")
    e["notes"] = (e.get("notes", "") + "; " + note).lstrip("; ")
    if meas.get("counters"):
        e["confidence"] = "high"
    art["stage"] = "C"
    return e


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


def measure_problems(problems: list[Problem], level_id: int, seed: int = 0) -> dict:
    """Check, then time the ladder level and cuBLAS on each problem in this process; times are
    summed over one logical op (count x per-GEMM time)."""
    from roofline.ladder import bench, check, gpu
    from roofline.ladder.registry import get_level

    cp = gpu.cupy()
    lv = get_level(level_id)
    timer = bench.Timer()
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
    out = {"problems": per, "ladder_level": level_id, "check_ok": ok, "device": gpu.device_name(),
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
    from roofline.counters import load

    with tempfile.TemporaryDirectory() as td:
        rep = Path(td) / "rerun"
        cmd = [ncu, "--clock-control", "none", "--metrics", ",".join(NCU_METRICS), "-k", f"regex:gemm_l{level_id:02d}",
               "-c", "1", "-f", "-o", str(rep), sys.executable, "-m", "roofline.rerun", "--one-launch",
               str(level_id), str(problem.M), str(problem.N), str(problem.K)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_child_env())
        path = rep.with_suffix(".ncu-rep")
        if res.returncode != 0 or not path.exists():
            return {"error": ((res.stderr or res.stdout).strip().splitlines() or ["ncu failed"])[-1]}
        # the raw-page CSV needs nothing beyond ncu itself (the ncu-report module may be absent)
        csv = Path(td) / "rerun.csv"
        with open(csv, "w") as fh:
            exp = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"],
                                 stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120)
        if exp.returncode != 0:
            return {"error": (exp.stderr.strip().splitlines() or ["ncu --import failed"])[-1]}
        try:
            kcs = load(csv)
        except ValueError as exc:  # CounterReadError: L4, keep the analytic result
            return {"error": str(exc)}
    if not kcs:
        return None
    k = kcs[0]
    return {"name": k.name, "t_ms": k.t_ms, "dram_bytes": k.dram_bytes, "flops_issued": k.flops_issued,
            "tensor_flops_by_dtype": k.tensor_flops_by_dtype, "l2_bytes": k.l2_bytes, "source": "ncu-cli",
            "useful_flops": 2.0 * problem.M * problem.N * problem.K}


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
    elif len(sys.argv) == 6 and sys.argv[1] == "--nsight-target":
        _nsight_target(*(int(x) for x in sys.argv[2:]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "--build-dispatch":
        benches = [json.loads(Path(p).read_text()) for p in sys.argv[2:-1]]
        tbl = build_dispatch_table(merge_benches(benches))
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    else:
        sys.exit("usage: python -m roofline.rerun --build-dispatch BENCH.json [BENCH.json ...] OUT.json")

"""Stage C's counters of a re-run: the work mix of one logical op (or one ladder launch) profiled
in isolation through the `ncu` CLI (read back with the stage-C reader, roofline.counters) or
nsight-python where it supports the installed ncu. The profiled process runs this module's
targets (`python -m roofline.stagec.profiler --one-launch ...`), never the CLI that called it.
No ncu, or a failed run, is level L4: the analytic result stays."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from roofline.errors import CounterCollectError
from roofline.opclasses import Problem
from roofline.peaks.gemm import gemm_flops


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
    the installed ncu, else through the `ncu` CLI and the stage-C reader. None where there is no
    ncu (not collected); raises CounterCollectError (one line) when the run fails (L4)."""
    backend, why = counters_backend(ncu)
    if backend is None:
        return None
    if backend == "nsight-python":
        out = _collect_nsight_python(problem, level_id)
        out["backend"] = why
        return out
    out = _collect_ncu_cli(problem, level_id, ncu)
    out["backend"] = why
    return out


def _child_env() -> dict:
    root = str(Path(__file__).resolve().parents[2])   # the source tree holding roofline/
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def _collect_nsight_python(problem: Problem, level_id: int) -> dict:
    """nsight-python re-runs its script under ncu, so it gets a small script of its own
    (`python -m roofline.stagec.profiler --nsight-target ...`), never the CLI that called it."""
    cmd = [sys.executable, "-m", "roofline.stagec.profiler", "--nsight-target", str(level_id), str(problem.M),
           str(problem.N), str(problem.K)]
    with tempfile.TemporaryDirectory() as td:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=td, env=_child_env())
    tag = "ROOFLINE_NSIGHT_JSON:"
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith(tag)), None)
    if res.returncode != 0 or line is None:
        raise CounterCollectError(((res.stderr or res.stdout).strip().splitlines() or ["nsight-python failed"])[-1])
    m = json.loads(line[len(tag):])
    bf16 = m.get("sm__ops_path_tensor_src_bf16_dst_fp32.sum")
    rd, wr = m.get("dram__bytes_read.sum"), m.get("dram__bytes_write.sum")
    return {"name": f"gemm_l{level_id:02d}", "t_ms": m["gpu__time_duration.sum"] / 1e6 if m.get("gpu__time_duration.sum") else None,
            "dram_bytes": (rd + wr) if rd is not None and wr is not None else None,
            "flops_issued": bf16, "tensor_flops_by_dtype": {"bf16": bf16}, "l2_bytes": m.get("lts__t_bytes.sum"),
            "source": "nsight-python", "useful_flops": gemm_flops(problem.M, problem.N, problem.K)}


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


def _collect_ncu_cli(problem: Problem, level_id: int, ncu: str | None = None) -> dict:
    """One launch of the level under the ncu CLI (`ncu`: the binary, found on PATH without it)."""
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        raise CounterCollectError("no ncu on PATH")
    k = _ncu_counters(ncu, ["--metrics", ",".join(NCU_METRICS), "-k", f"regex:gemm_l{level_id:02d}", "-c", "1"],
                      ["--one-launch", str(level_id), str(problem.M), str(problem.N), str(problem.K)], problem)[0]
    return {"name": k.name, "t_ms": k.t_ms, "dram_bytes": k.dram_bytes, "flops_issued": k.flops_issued,
            "tensor_flops_by_dtype": k.tensor_flops_by_dtype, "l2_bytes": k.l2_bytes, "source": "ncu-cli",
            "useful_flops": gemm_flops(problem.M, problem.N, problem.K)}


RANGE = "roofline_rerun"


def collect_mix_counters(problems: list[Problem], level_id: int, target: str = "cublas", l2: str = "cold",
                         ncu: str | None = None) -> dict | None:
    """Counters of ONE logical op's work mix: each problem launched once inside an NVTX range under
    the ncu CLI (every kernel in the range counts: a split-K GEMM's reduce included), then
    sum(count_i x problem_i). ``target``: "cublas" (the library kernel the run used) or "ladder".
    L2: cold = ncu flushes caches before the launch (--cache-control all), warm = it does not.
    Returns None where there is no ncu (not collected), else the mix; raises CounterCollectError
    (one line) when a run fails (L4: the caller records it, the analytic result stays)."""
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return None
    per = [_collect_ncu_range(p, level_id, target, l2, ncu) for p in problems]
    mix: dict = {"target": target, "l2_mode": l2, "source": "ncu-cli", "per_problem": per}
    for k in ("t_ms", "dram_bytes", "flops_issued", "l2_bytes"):
        vals = [r.get(k) for r in per]
        mix[k] = sum(p.count * v for p, v in zip(problems, vals)) if all(v is not None for v in vals) else None
    mix["useful_flops"] = sum(p.count * gemm_flops(p.M, p.N, p.K) for p in problems)
    return mix


def _ncu_counters(ncu: str, ncu_args: list[str], target_args: list[str], problem: Problem) -> list:
    """Run `python -m roofline.stagec.profiler TARGET_ARGS` under the ncu CLI with NCU_ARGS, export the
    raw page as CSV (needs nothing beyond ncu itself: the ncu-report module may be absent) and read
    it with the stage-C reader. -> KernelCounters (at least one); raises CounterCollectError."""
    from roofline.counters import CounterReadError, load

    with tempfile.TemporaryDirectory() as td:
        rep = Path(td) / "rerun"
        cmd = [ncu, "--clock-control", "none", *ncu_args, "-f", "-o", str(rep),
               sys.executable, "-m", "roofline.stagec.profiler", *target_args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_child_env())
        path = rep.with_suffix(".ncu-rep")
        if res.returncode != 0 or not path.exists():
            raise CounterCollectError(((res.stderr or res.stdout).strip().splitlines() or ["ncu failed"])[-1])
        csv = Path(td) / "rerun.csv"
        with open(csv, "w") as fh:
            exp = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"],
                                 stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120)
        if exp.returncode != 0:
            raise CounterCollectError((exp.stderr.strip().splitlines() or ["ncu --import failed"])[-1])
        try:
            kcs = load(csv)
        except CounterReadError as exc:  # L4, keep the analytic result
            raise CounterCollectError(str(exc)) from None
    if not kcs:
        raise CounterCollectError(f"no kernel counted for {problem.M}x{problem.N}x{problem.K}")
    return kcs


def _collect_ncu_range(problem: Problem, level_id: int, target: str, l2: str, ncu: str) -> dict:
    kcs = _ncu_counters(ncu, ["--cache-control", "none" if l2 == "warm" else "all", "--nvtx", "--nvtx-include",
                              f"{RANGE}/", "--metrics", ",".join(NCU_METRICS)],
                        ["--one-launch-range", target, str(level_id), str(problem.M), str(problem.N), str(problem.K)],
                        problem)

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


if __name__ == "__main__":  # pragma: no cover - the targets the ncu / nsight-python runs launch
    if len(sys.argv) == 6 and sys.argv[1] == "--one-launch":
        _one_launch(*(int(x) for x in sys.argv[2:]))
    elif len(sys.argv) == 7 and sys.argv[1] == "--one-launch-range":
        _one_launch_range(sys.argv[2], *(int(x) for x in sys.argv[3:]))
    elif len(sys.argv) == 6 and sys.argv[1] == "--nsight-target":
        _nsight_target(*(int(x) for x in sys.argv[2:]))
    else:
        sys.exit("usage: python -m roofline.stagec.profiler --one-launch|--one-launch-range|--nsight-target ...")

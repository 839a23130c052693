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
from dataclasses import asdict
from pathlib import Path

from roofline.io.errors import CounterCollectError
from roofline.core.opclasses import Problem
from roofline.peaks.gemm import gemm_flops


# tensor-pipe ops per source dtype, both collected for every run (the reader, roofline.counters.ncu
# TENSOR_OPS, files them by dtype): bf16 (dense and grouped bf16 levels, cuBLAS, torch._grouped_mm)
# and fp8 (levels 13-14, torch._scaled_mm), the Hopper names the H200 reports (fixtures/ncu/known_raw.csv:
# an fp8 nvjet GEMM 4096^3 reads sm__ops_path_tensor_src_fp8.sum = 2MNK, its bf16 counter 0)
NCU_METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
               "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
               "dram__bytes.sum.peak_sustained",
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
    return {"name": f"gemm_l{_lid(level_id):02d}", "t_ms": m["gpu__time_duration.sum"] / 1e6 if m.get("gpu__time_duration.sum") else None,
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
    k = _ncu_counters(ncu, ["--metrics", ",".join(NCU_METRICS), "-k", f"regex:gemm_l{_lid(level_id):02d}", "-c", "1"],
                      ["--one-launch", str(level_id), str(problem.M), str(problem.N), str(problem.K)], problem)[0]
    return {"name": k.name, "t_ms": k.t_ms, "dram_bytes": k.dram_bytes, "flops_issued": k.flops_issued,
            "tensor_flops_by_dtype": k.tensor_flops_by_dtype, "l2_bytes": k.l2_bytes, "source": "ncu-cli",
            "useful_flops": gemm_flops(problem.M, problem.N, problem.K)}


RANGE = "roofline_rerun"


def collect_mix_counters(problems: list[Problem], level_id: int, target: str = "cublas", l2: str = "cold",
                         ncu: str | None = None, contract: str = "gemm-bf16", routings: list | None = None,
                         seed: int = 0) -> dict | None:
    """Counters of ONE logical op's work mix: each problem launched once inside an NVTX range under
    the ncu CLI (every kernel in the range counts: a split-K GEMM's reduce, torch._grouped_mm's
    setup kernel included), then sum(count_i x problem_i). ``target``: "cublas" (the library op the
    run used: cuBLAS, torch._grouped_mm, torch._scaled_mm by ``contract``) or "ladder" (the level).
    A grouped problem is launched on ``routings[i]``, the rows per expert the timing drew
    (measure_grouped's routing_counts), and the timing's operands (timing.launchers, ``seed``).
    L2: cold = ncu flushes caches before the launch (--cache-control all), warm = it does not.
    Returns None where there is no ncu (not collected), else the mix; raises CounterCollectError
    (one line) when a run fails (L4: the caller records it, the analytic result stays)."""
    from roofline.stagec.timing import LIBRARY

    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return None
    if contract.startswith("grouped") and (routings is None or len(routings) != len(problems)):
        raise CounterCollectError(f"a grouped counter run needs the timing's routing of each of the "
                                  f"{len(problems)} problem(s), got {None if routings is None else len(routings)}")
    per = [_collect_ncu_range(p, level_id, target, l2, ncu, contract, routings[i] if routings else None, seed)
           for i, p in enumerate(problems)]
    launched = LIBRARY.get(contract, contract) if target == "cublas" else f"ladder level {level_id}"
    mix: dict = {"target": target, "launched": launched, "l2_mode": l2, "source": "ncu-cli", "per_problem": per}
    for k in ("t_ms", "dram_bytes", "flops_issued", "l2_bytes"):
        vals = [r.get(k) for r in per]
        mix[k] = sum(p.count * v for p, v in zip(problems, vals)) if all(v is not None for v in vals) else None
    dtypes = set().union(*(r["tensor_flops_by_dtype"] for r in per))
    mix["tensor_flops_by_dtype"] = {d: sum(p.count * r["tensor_flops_by_dtype"][d] for p, r in zip(problems, per))
                                    for d in sorted(dtypes) if all(d in r["tensor_flops_by_dtype"] for r in per)}
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


def _collect_ncu_range(problem: Problem, level_id: int, target: str, l2: str, ncu: str,
                       contract: str = "gemm-bf16", counts=None, seed: int = 0) -> dict:
    """One problem of the mix under ncu: the dense bf16 target by its arguments, a grouped or fp8 one
    by a small JSON spec (the problem, the drawn routing, the operand seed) the target reads."""
    ncu_args = ["--cache-control", "none" if l2 == "warm" else "all", "--nvtx", "--nvtx-include", f"{RANGE}/",
                "--metrics", ",".join(NCU_METRICS)]
    with tempfile.TemporaryDirectory() as td:
        if contract == "gemm-bf16":
            target_args = ["--one-launch-range", target, str(level_id), str(problem.M), str(problem.N), str(problem.K)]
        else:
            spec = Path(td) / "launch.json"
            spec.write_text(json.dumps({"contract": contract, "target": target, "level": level_id,
                                        "problem": asdict(problem), "counts": counts, "seed": seed}))
            target_args = ["--one-launch-spec", str(spec)]
        kcs = _ncu_counters(ncu, ncu_args, target_args, problem)

    def total(attr):
        vals = [getattr(k, attr) for k in kcs]
        return sum(v * k.launches for v, k in zip(vals, kcs)) if all(v is not None for v in vals) else None
    by_dtype = {}
    for d in set().union(*(k.tensor_flops_by_dtype for k in kcs)):
        vals = [k.tensor_flops_by_dtype.get(d) for k in kcs]
        if all(v is not None for v in vals):
            by_dtype[d] = sum(v * k.launches for v, k in zip(vals, kcs))
    return {"M": problem.M, "N": problem.N, "K": problem.K, "kernels": [k.name for k in kcs],
            "t_ms": total("t_ms"), "dram_bytes": total("dram_bytes"), "flops_issued": total("flops_issued"),
            "tensor_flops_by_dtype": by_dtype, "l2_bytes": total("l2_bytes")}


def _one_launch_range(target: str, level_id: int, M: int, N: int, K: int) -> None:
    """Target of collect_mix_counters' ncu run (dense bf16): one warm-up outside the range (handles,
    cuBLAS heuristics, module load), then one launch inside the NVTX range."""
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
    _warm_then_range(fn)


def _one_launch_spec(path: str) -> None:
    """Target of collect_mix_counters' ncu run (grouped, fp8): the problem of the JSON spec at `path`
    on the timing's operands and routing (timing.launchers), warmed up, then once in the range."""
    from roofline.ladder.registry import get_level
    from roofline.stagec.timing import launchers

    spec = json.loads(Path(path).read_text())
    p = Problem(**spec["problem"])
    fns = launchers(spec["contract"], get_level(spec["level"]), p, spec["seed"], spec.get("counts"))
    _warm_then_range(fns[spec["target"]])


def _warm_then_range(fn) -> None:
    from roofline.ladder import gpu

    cp = gpu.cupy()
    fn()
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.nvtx.RangePush(RANGE)
    fn()
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.nvtx.RangePop()


def _lid(level) -> int:
    """The level id of a level id or a named build (its kernel is gemm_lNN either way)."""
    from roofline.ladder.registry import get_level

    return get_level(level).id


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
        _one_launch(sys.argv[2], *(int(x) for x in sys.argv[3:]))
    elif len(sys.argv) == 7 and sys.argv[1] == "--one-launch-range":
        _one_launch_range(sys.argv[2], sys.argv[3], *(int(x) for x in sys.argv[4:]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--one-launch-spec":
        _one_launch_spec(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "--nsight-target":
        _nsight_target(sys.argv[2], *(int(x) for x in sys.argv[3:]))
    else:
        sys.exit("usage: python -m roofline.stagec.profiler --one-launch|--one-launch-range|--one-launch-spec|--nsight-target ...")

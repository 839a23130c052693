"""Stage C's timing on the device: the GPU's arch, the L2 state a re-run uses, and the isolated
check-then-time of a ladder level beside cuBLAS on the GEMM problems of one logical op
(roofline.core.opclasses.gemm_problems). Needs CuPy and a CUDA device (device_arch says None without)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import asdict

from roofline.core.opclasses import Problem


def device_arch() -> str | None:
    try:
        import cupy as cp

        maj = cp.cuda.Device().compute_capability
        return {"90": "sm_90a", "100": "sm_100a"}.get(maj, f"sm_{maj}")
    except Exception:
        return None


GPU_EXTRA = 'pip install -e ".[gpu]" in the repository (CuPy, cuda-python, nsight-python, torch)'


def no_gpu_reason() -> str:
    """Why device_arch() found no device, in words a user can act on."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return f"CuPy is not installed, and a re-run needs it and an sm_90a GPU: {GPU_EXTRA}"
    return "no GPU: CuPy is installed but cannot see a CUDA device"


L2_MODES = ("cold", "warm", "auto")
L2_WARM_FRACTION = 0.5   # auto: operands under half the L2 stay warm in a run (the L2 size: the peak table)


def l2_mode_for(problems: list[Problem], mode: str = "auto", device: str | None = None) -> tuple[str, str]:
    """-> (cold|warm, why). auto: warm when one GEMM's operands fit in half the device's L2 (its
    peak table's l2_bytes; in a serving run the neighbours just wrote the activations and small
    weights stay resident), else cold; cold when the table has no L2 size."""
    from roofline.peaks.gemm import device_l2_bytes, gemm_fewest_bytes

    if mode not in L2_MODES:
        raise ValueError(f"l2 mode must be one of {', '.join(L2_MODES)}, got {mode!r}")
    if mode != "auto":
        return mode, f"L2 {mode} (asked)"
    l2 = device_l2_bytes(device)
    if l2 is None:
        return "cold", f"L2 cold: no L2 size for {device!r} in the peak tables"
    # a grouped problem's weights are E x N x K (the experts the drawn routing does not hit stay cold)
    big = max(gemm_fewest_bytes(p.M, p.N, p.K, b_copies=p.E or 1) for p in problems)
    if big <= L2_WARM_FRACTION * l2:
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
    out = {"problems": per, **_level_fields(level_id), "check_ok": ok, "device": gpu.device_name(), "l2_mode": l2,
           "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if ok:
        for key in ("ladder", "cublas"):
            out[f"{key}_t_ms"], out[f"{key}_t_ms_p20"], out[f"{key}_t_ms_p80"] = tot[key]
    return out


def draw_routing(p: Problem, seed: int = 0) -> tuple[list[int], str]:
    """Rows per expert for a grouped problem (the trace has the rows and experts, not the split):
    top_k distinct experts per token, uniform, when tokens and top_k are known; else each row's
    expert uniform and independent. Seeded: the same split every re-run."""
    from roofline.ladder.routing import topk_counts, uniform_counts

    if p.tokens and p.top_k:
        return topk_counts(p.tokens, p.E, p.top_k, seed), f"topk_counts(tokens={p.tokens}, E={p.E}, top_k={p.top_k}, seed={seed})"
    return uniform_counts(p.M, p.E, seed), f"uniform_counts(rows={p.M}, E={p.E}, seed={seed})"


# the library op each contract's level is timed (and profiled) beside
def _library_names() -> dict:
    from roofline.ladder.level import CONTRACT_TABLES

    return {name: library for name, (library, _) in CONTRACT_TABLES.items()}


LIBRARY = _library_names()   # the ladder's Contract records name it


def launchers(contract: str, lv, p: Problem, seed: int = 0, counts=None) -> dict:
    """The two launches a re-run puts side by side on one problem, on the same operands:
    {"ladder": the level, "cublas": the library op}. grouped-bf16: `counts` rows per expert (the
    drawn routing), A and W from check.grouped_operands(seed + 1), beside torch._grouped_mm
    (grouped-fp8: the same in e4m3 with unit scales, beside torch._scaled_grouped_mm);
    gemm-fp8: e4m3 A (seed + 1) and B (seed + 2), unit rowwise scales, beside torch._scaled_mm.
    One builder for the timing here and the counter run (roofline/stagec/profiler.py), so both
    launch the same problem on the same data. The closures hold the operands."""
    from roofline.ladder import check, gpu, gpu_moe_fp8

    cp = gpu.cupy()
    if contract == "grouped-bf16":
        a, w, offs = check.grouped_operands(counts, p.N, p.K, p.w_layout, seed + 1)
        c = cp.empty((p.M, p.N), dtype=cp.uint16)
        return {"ladder": lambda: gpu_moe_fp8.launch_grouped(lv, a, w, offs, c, p.E, p.N, p.K, p.w_layout),
                "cublas": lambda: gpu_moe_fp8.torch_grouped(a, w, offs, p.w_layout)}
    if contract == "grouped-fp8":   # e4m3 A and W [E, N, K], unit rowwise / per-expert colwise scales
        a, w, offs = check.grouped_operands(counts, p.N, p.K, "enk", seed + 1, fp8=True)
        sa, sw = cp.ones(p.M, dtype=cp.float32), cp.ones((p.E, p.N), dtype=cp.float32)
        c = cp.empty((p.M, p.N), dtype=cp.uint16)
        return {"ladder": lambda: gpu_moe_fp8.launch_grouped(lv, a, w, offs, c, p.E, p.N, p.K, "enk", sa, sw),
                "cublas": lambda: gpu_moe_fp8.torch_scaled_grouped(a, w, offs, sa, sw)}
    if contract == "gemm-fp8":
        a, b = gpu_moe_fp8.random_fp8((p.M, p.K), seed + 1), gpu_moe_fp8.random_fp8((p.N, p.K), seed + 2)
        sa, sb = cp.ones(p.M, dtype=cp.float32), cp.ones(p.N, dtype=cp.float32)
        c = cp.empty((p.M, p.N), dtype=cp.uint16)
        return {"ladder": lambda: gpu_moe_fp8.launch_fp8(lv, a, b, sa, sb, c, p.M, p.N, p.K),
                "cublas": lambda: gpu_moe_fp8.torch_scaled(a, b, sa, sb)}
    raise ValueError(f"no side-by-side launchers for contract {contract!r}")


def measure_grouped(problems: list[Problem], level_id: int, seed: int = 0, l2: str = "cold",
                    contract: str = "grouped-bf16") -> dict:
    """Check, then time a grouped level and torch._grouped_mm on each grouped problem with a drawn
    routing, same operands, same L2 state; the routing (its rule, its rows per expert
    `routing_counts`, which the counter run launches again) and the experts it hit go with the result."""
    from roofline.ladder import bench, check
    from roofline.ladder.registry import get_level
    from roofline.ladder.routing import experts_hit

    lv = get_level(level_id)
    timer = bench.Timer(flush_l2=(l2 != "warm"))
    tot = {"ladder": [0.0, 0.0, 0.0], "cublas": [0.0, 0.0, 0.0]}
    per, ok = [], True
    for p in problems:
        counts, rule = draw_routing(p, seed)
        chk = check.check_grouped(lv, counts, p.N, p.K, layout=p.w_layout, seed=seed + 7)
        ok = ok and chk.ok
        row = {**asdict(p), "routing": rule, "routing_counts": list(counts), "experts_hit_drawn": experts_hit(counts),
               "check_ok": chk.ok, "check_rel_err": chk.rel_err_ref}
        if chk.ok:
            _time_pair(timer, row, tot, p.count, **launchers(contract, lv, p, seed, counts))
        else:
            row["check_reason"] = chk.reason
        per.append(row)
    return _summed(per, level_id, ok, l2, tot, LIBRARY[contract])


def measure_fp8(problems: list[Problem], level_id: int, seed: int = 0, l2: str = "cold") -> dict:
    """Check, then time an fp8 level and torch._scaled_mm (rowwise scales) on each problem."""
    from roofline.ladder import bench, check
    from roofline.ladder.registry import get_level

    lv = get_level(level_id)
    timer = bench.Timer(flush_l2=(l2 != "warm"))
    tot = {"ladder": [0.0, 0.0, 0.0], "cublas": [0.0, 0.0, 0.0]}
    per, ok = [], True
    for p in problems:
        chk = check.check_fp8(lv, p.M, p.N, p.K, seed=seed + 7)
        ok = ok and chk.ok
        row = {**asdict(p), "check_ok": chk.ok, "check_rel_err": chk.rel_err_ref}
        if chk.ok:
            _time_pair(timer, row, tot, p.count, **launchers("gemm-fp8", lv, p, seed))
        else:
            row["check_reason"] = chk.reason
        per.append(row)
    return _summed(per, level_id, ok, l2, tot, LIBRARY["gemm-fp8"])


def _time_pair(timer, row: dict, tot: dict, count: float, **fns) -> None:
    """Time the ladder level and the library op of one problem (median, p20, p80 ms) into its row,
    and add them, weighted by the problem's share of the logical op, into the totals."""
    from roofline.ladder import bench

    for key, fn in fns.items():
        med, p20, p80 = bench.quantiles(timer.time(fn))
        row[f"{key}_t_ms"], row[f"{key}_t_ms_p20"], row[f"{key}_t_ms_p80"] = med, p20, p80
        for i, v in enumerate((med, p20, p80)):
            tot[key][i] += count * v


def _level_fields(level_id) -> dict:
    """The level that ran (its id) and, for a named build, which (a dispatch row's "build")."""
    from roofline.ladder.registry import build_key, get_level

    lv = get_level(level_id)
    return {"ladder_level": lv.id, "ladder_build": build_key(lv)}


def _summed(per, level_id, ok, l2, tot, library: str) -> dict:
    from roofline.ladder import gpu

    out = {"problems": per, **_level_fields(level_id), "check_ok": ok, "device": gpu.device_name(), "l2_mode": l2,
           "library": library, "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if ok:
        for key in ("ladder", "cublas"):
            out[f"{key}_t_ms"], out[f"{key}_t_ms_p20"], out[f"{key}_t_ms_p80"] = tot[key]
    return out

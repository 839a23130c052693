"""Where the user's GEMM stands, for `roofline ladder advise`: its time at its level from a ladder
bench result, or from an Nsight Compute report of the user's own kernel, with the library's time
and the roofline bound at measured ceilings beside it (measured figures vs assumptions)."""
from __future__ import annotations

import statistics
from pathlib import Path

from roofline.io.errors import RooflineError
from roofline.peaks.gemm import gemm_fewest_bytes, roofline_bound_s

from .evidence import AdviseError, Obs, library_ms
from .advise_text import fmt_value
from .route import level_name

def gemm_flops(m, n, k) -> float:
    from .bench import gemm_flops as f  # the bench's definition (one source)

    return f(m, n, k)


def gemm_min_bytes(m, n, k, elem_bytes=2) -> float:
    from .bench import gemm_min_bytes as f

    return f(m, n, k, elem_bytes)


def standing_from_bench(data: dict, path: str, level: int, shape) -> dict:
    """The kernel's measurement at `level` on `shape` in one bench result."""
    rows = [r for r in data["rows"] if r["level"] == level and (r["m"], r["n"], r["k"]) == tuple(shape)
            and r.get("t_ms_median") is not None and r.get("name") == level_name(level)]
    if not rows:
        have = sorted({f"{r['m']}x{r['n']}x{r['k']}" for r in data["rows"]
                       if r["level"] == level and r.get("t_ms_median") is not None})
        raise AdviseError(f"{path}: no timed level-{level} row for shape {'x'.join(map(str, shape))}"
                          + (f" (level {level} shapes: {', '.join(have)})" if have else f" (no level-{level} rows)"))
    r = rows[0]
    m, n, k = shape
    lib = [x["t_ms_median"] for x in data["rows"] if x["level"] == 0 and (x["m"], x["n"], x["k"]) == tuple(shape)
           and x.get("t_ms_median")]
    c = data.get("ceilings") or {}
    fl = (c.get("cublas_bf16_8192") or {}).get("flops_s")
    bw = (c.get("hbm_copy") or {}).get("bytes_s")
    measured = [
        {"what": f"level {level} time at {m}x{n}x{k}", "value": r["t_ms_median"], "unit": "ms",
         "source": f"{path} (median; p20-p80 {fmt_value(r.get('t_ms_p20'), '')}-{fmt_value(r.get('t_ms_p80'), '')})"},
    ]
    st = {"t_ms": float(r["t_ms_median"]), "t_p20_ms": r.get("t_ms_p20"), "t_p80_ms": r.get("t_ms_p80"),
          "library_ms": float(lib[0]) if lib else None, "library_source": f"cuBLAS in the same run ({path})" if lib else None,
          "roof_ms": None, "roof_source": None, "check_ok": r.get("check_ok"), "measured": measured,
          "assumed": [], "dtype": "bf16", "counters": None}
    if lib:
        measured.append({"what": "cuBLAS (the library) same shape, same process", "value": lib[0], "unit": "ms", "source": path})
    if fl and bw:
        st["roof_ms"] = roofline_bound_s(gemm_flops(m, n, k), gemm_min_bytes(m, n, k), fl, bw) * 1e3
        st["roof_source"] = (f"ceilings measured in the same run: cuBLAS 8192^3 {fl / 1e12:.0f} TFLOP/s, "
                             f"HBM copy {bw / 1e12:.2f} TB/s")
    else:
        st["assumed"].append("no measured ceilings in the result: the roof gap is unknown")
    if r.get("check_ok") is False:
        raise AdviseError(f"{path}: level {level} failed its correctness check at {m}x{n}x{k}: fix it before advancing")
    return st


def _measured_roofs(device: str | None, dtype: str):
    """(compute FLOP/s, HBM B/s, source) from the peak table's MEASURED figures, falling back to
    the table's convention (and saying so)."""
    from roofline import peaks as _peaks

    try:
        pk = _peaks.resolve(gpu_name=device, gfx=None)
    except RooflineError:          # no table and nothing to derive from: the caller says so
        return None, None, None
    raw = pk.raw or {}
    fig = ((raw.get("flops") or {}).get(dtype) or {}).get("measured") or {}
    bwf = (raw.get("hbm_bw_bytes_s") or {}).get("measured") or {}
    fl = fig.get("value") or pk.compute_peak(dtype)
    bw = bwf.get("value") or pk.hbm_bw_bytes_s
    kinds = ("measured" if fig.get("value") else pk.flops_kind.get(dtype, "?"),
             "measured" if bwf.get("value") else pk.hbm_bw_kind)
    src = (f"{Path(pk.table_file).name if pk.table_file else pk.device}: {dtype} {fl / 1e12:.0f} TFLOP/s ({kinds[0]}), "
           f"HBM {bw / 1e12:.2f} TB/s ({kinds[1]})") if fl and bw else None
    return fl, bw, src


def pick_kernel(records, kernel: str | None, path: str):
    """The GEMM kernel of a counter report: by substring, else the one with tensor FLOPs."""
    if kernel:
        hits = [r for r in records if kernel in r.name]
        if len(hits) != 1:
            names = "; ".join(r.name[:80] for r in records)
            raise AdviseError(f"{path}: --kernel {kernel!r} matches {len(hits)} kernels (kernels: {names})")
        return hits[0]
    gemms = [r for r in records if sum((r.tensor_flops_by_dtype or {}).values()) > 0]
    if len(gemms) != 1:
        names = "; ".join(r.name[:80] for r in gemms) or "none"
        raise AdviseError(f"{path}: {len(gemms)} kernels with tensor-core FLOPs; pick one with --kernel SUBSTRING "
                          f"(tensor kernels: {names})")
    return gemms[0]


def standing_from_counters(rec, path: str, level: int, shape, obs: list[Obs]) -> dict:
    m, n, k = shape
    tens = {d: v for d, v in (rec.tensor_flops_by_dtype or {}).items() if v}
    if not tens:
        raise AdviseError(f"{path}: kernel {rec.name[:80]!r} issued no tensor-core FLOPs: not a tensor-core GEMM")
    if rec.t_ms is None or not rec.t_ms > 0:
        raise AdviseError(f"{path}: kernel {rec.name[:80]!r} has no duration (gpu__time_duration)")
    dtype = max(tens, key=tens.get)
    issued = tens[dtype]
    useful = gemm_flops(m, n, k)
    ratio = issued / useful
    # NB: issued tensor FLOPs count padding; below the useful count means the shape is wrong
    if ratio < 1.0 - 1e-6:
        raise AdviseError(f"{path}: the kernel issued {issued:.4g} tensor FLOPs, fewer than 2MNK = {useful:.4g} "
                          f"for --shape {m}x{n}x{k}: the shape does not match this kernel")
    measured = [
        {"what": f"kernel time ({rec.launches} launch(es) averaged)", "value": rec.t_ms, "unit": "ms", "source": path},
        {"what": f"tensor FLOPs issued ({dtype}) / useful 2MNK", "value": ratio, "unit": "ratio", "source": path},
    ]
    ex = rec.extra or {}
    st = {"t_ms": float(rec.t_ms), "t_p20_ms": None, "t_p80_ms": None, "library_ms": None, "library_source": None,
          "roof_ms": None, "roof_source": None, "check_ok": None, "measured": measured, "assumed": [],
          "dtype": dtype, "counters": {"kernel": rec.name, "device": rec.device_name}}
    _counter_figures(st, ex, issued, rec.t_ms, dtype, path)
    # NB: fewest bytes: A and B in the compute dtype, C in bf16 (how cuBLAS runs fp8 GEMMs, and
    # the ladder's contract for bf16)
    eb = 1 if dtype == "fp8" else 2
    fewest = gemm_fewest_bytes(m, n, k, eb, eb, 2)
    if rec.dram_bytes is not None:
        measured.append({"what": "DRAM bytes / fewest bytes", "value": rec.dram_bytes / fewest, "unit": "ratio", "source": path})
    fl, bw, src = _measured_roofs(rec.device_name, dtype)
    if fl and bw:
        st["roof_ms"] = roofline_bound_s(useful, fewest, fl, bw) * 1e3
        st["roof_source"] = f"peak table, measured roofs: {src}"
    else:
        st["assumed"].append(f"no peak table for {rec.device_name!r}: the roof gap is unknown")
    lib = library_ms(obs, shape)
    if lib and dtype == "bf16":
        st["library_ms"] = statistics.median(lib)
        st["library_source"] = f"recorded cuBLAS at {m}x{n}x{k} (median of {len(lib)} run(s) of the evidence base)"
        measured.append({"what": "cuBLAS same shape (recorded, not this report)", "value": st["library_ms"], "unit": "ms",
                         "source": "evidence base"})
    else:
        st["assumed"].append(f"no recorded cuBLAS time at {m}x{n}x{k} ({dtype}): % of library unknown")
    if dtype != "bf16":
        st["assumed"].append(f"the kernel computes in {dtype}; the ladder evidence is bf16 (TN, bf16 out): "
                             "what each level bought is assumed to carry over")
    st["assumed"].append("stall reasons: not in the report (not collected); the bottleneck behind the gap is inferred")
    st["assumed"].append("ncu timings: --clock-control none and a cache flush per pass; the ladder evidence uses CUDA events "
                         "with an L2 flush, so the two differ by the clock the kernel ran at")
    return st


def _counter_figures(st: dict, ex: dict, issued: float, t_ms: float, dtype: str, path: str) -> None:
    """The report's own figures into st: tensor pipe utilisation (with a dense peak per cycle and
    a measured SM clock), throughputs, occupancy, registers, launch geometry."""
    measured = st["measured"]
    peak_pc = ex.get(f"peak_tensor_ops_per_cycle_dense.{dtype}")
    clk = ex.get("sm_clock_hz_measured")
    if peak_pc and clk:
        util = issued / (t_ms * 1e-3 * peak_pc * clk)
        st["counters"]["tensor_pipe_util"] = util
        measured.append({"what": "tensor pipe utilisation (issued / (t x dense peak per cycle x measured SM clock))",
                         "value": util, "unit": "fraction", "source": path})
    for key, what in (("sm_throughput_pct", "SM throughput % of peak"), ("dram_throughput_pct", "DRAM throughput % of peak"),
                      ("achieved_occupancy_pct", "achieved occupancy %"), ("registers_per_thread", "registers per thread"),
                      ("block_size", "threads per CTA"), ("grid_size", "CTAs")):
        if key in ex:
            st["counters"][key] = ex[key]
            measured.append({"what": what, "value": ex[key], "unit": "", "source": path})

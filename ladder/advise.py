"""`roofline ladder advise`: "my GEMM is at level N; what next?" (seed 000, trigger questions 2-3).

Input: where the user's GEMM stands, either a ladder bench result (`roofline ladder bench --out`,
`ladder run --json`) or an Nsight Compute report of the user's own kernel, plus the level the
user says it is at. Output: the seed's five required outputs, as data (`advise()` returns a
dict; `render_text` formats it; nothing here prints):

1. conclusion: advance to ONE next level, or stop;
2. evidence (measured) against assumptions;
3. the contract of the next level: what changes, correctness gate, performance gate against the
   previous level, the library and the roof, resource budget from the registry;
4. minimal validation, with one falsifiable experiment;
5. risks, fallback and the stopping rule as applied.

The evidence base is the project's own ladder measurements (fixtures/ladder/*.json, every
bench row of a registry level: what each level bought on the H200 per shape and shape class).
The level list is read from registry.LEVELS; a level the registry does not have yet is named from
the seed's nine-level route (SEED_ROUTE) and reported as "not built".

Decision, in this order (BAND = roofline.ladder.dispatch.NOISE_BAND_ISOLATED, seed 002 s.8: identical
isolated re-runs differ by up to ~3.4 %):
  a. stop if the kernel is within BAND of the practical roof: t <= (1 + BAND) x t_practical,
     t_practical = min(the library's time on the same shape, the roofline bound at the MEASURED
     ceilings) (the tighter of what is demonstrated and what is derived);
  b. stop at the end of the ladder (no registry level and no seed level after N);
  c. the next level N' is not built, or built but never measured: advance to it (the seed's
     order), every gate an assumption;
  d. the recorded evidence for N -> N' (the same shape if recorded, else the shape class, else
     every recorded shape; the nearest recorded shape decides when some shapes of the class gain
     and others do not): a gain
     beyond BAND in every run -> advance to N';
  e. N' brings no stable gain, but a later built level beats N beyond BAND on the same evidence
     -> advance to N' as its foundation, gated on "no loss beyond BAND";
  f. otherwise stop and keep level N (added complexity without a stable gain).
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import RooflineError

from . import registry
from .dispatch import NOISE_BAND_ISOLATED as BAND
from .dispatch import shape_class

# Evidence is not runtime data: the recorded benches live in the repository's fixtures/ladder/ (a
# source checkout or an editable install finds them beside this folder; a wheel has none, and
# `roofline ladder advise --results` names them).
RESULTS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "ladder"
# Result files whose rows carry a registry level name but time an older version of its code.
SUPERSEDED = {
    "h200_bench_v1_serial_copy.json": "levels 2-3 with the first (serial-copy) loads, replaced by v2 (notes/l03.md)",
}

# The seed's nine-level route (seed 000, "A1" and "E"): names and what each level must add. The
# BUILT levels and their numbers come from registry.LEVELS; this only names levels not built.
SEED_ROUTE: dict[int, tuple[str, str]] = {
    1: ("single tile", "a single 128x128 output tile: synchronous copy, one MMA, accumulator readback, store"),
    2: ("K loop", "K-loop accumulation: initial accumulator, per-K-tile accumulation, the K tail"),
    3: ("spatial tiling", "multiple CTAs covering M/N: grid -> tile mapping, boundary masks"),
    4: ("TMA", "TMA async load/store: descriptor/swizzle, load barrier, store drain"),
    5: ("multi-stage pipeline", "PIPE_DEPTH stages: prologue/steady/epilogue, stage/phase ledger"),
    6: ("persistent scheduler", "a fixed set of resident CTAs walks the tiles; tail and tile order"),
    7: ("warp specialization", "producer/MMA/writeback roles, the four classes of handoff, warpgroup-scoped sync"),
    8: ("2-CTA cluster", "cluster tile, DSMEM/multicast, remote barrier"),
    9: ("multi-consumer", "several consumers partition the output so one staged operand feeds more MMA"),
}
SEED_LAST = max(SEED_ROUTE)

# What goes wrong when a level is added (seed 000 "E" and "B"), and what to fall back to.
RISKS: dict[int, tuple[str, ...]] = {
    1: ("descriptor/layout errors show up as plausible wrong numbers: check element-wise, not just the norm",),
    2: ("the K tail (K not a multiple of the K tile) and the first-step accumulator init",),
    3: ("edge tiles: masks on loads and stores when M, N are not multiples of the tile",),
    4: ("TMA needs 16-byte row strides (K % 8 for bf16) and a matching swizzle; misaligned K needs a padded "
        "copy or the synchronous path", "the store drain: a TMA store still in flight when the CTA exits"),
    5: ("stage/phase ledger errors deadlock or read a stage before it lands (racecheck, synccheck)",
        "shared memory: more stages mean fewer CTAs per SM; the single-CTA tile loses small shapes"),
    6: ("tail and tile order: wave quantization, and an order that re-streams an operand bigger than L2",
        "the epilogue stalls the MMA unless the next tile's loads overlap it"),
    7: ("warp specialization is not a guaranteed speedup: the added roles cost occupancy and the handoffs "
        "cost sync (seed 000, failure modes)", "register split (setmaxnreg) and the producer's empty-barrier waits"),
    8: ("needs cluster launch (sm_90+) and remote barriers; a CTA that exits while its partner still reads "
        "its shared memory", "multicast only pays when both CTAs of the pair need the same operand tile"),
    9: ("write conflicts between consumers, register pressure of the larger accumulator",),
}


class AdviseError(RooflineError):
    """A bad advise input (file, level, shape, kernel): one line, the CLI exits 2."""


@dataclass(frozen=True)
class Obs:
    """One timed row of a recorded run."""
    run: str          # result file name
    level: int
    m: int
    n: int
    k: int
    t_ms: float
    pct_cublas: float | None


# ---------------------------------------------------------------- level list (registry + seed)
def built_levels() -> dict[int, registry.Level]:
    return {lv.id: lv for lv in registry.LEVELS}


def next_level_id(level: int) -> int | None:
    """The level after `level`: the next registry level, else the seed's next, else None."""
    later = sorted(i for i in built_levels() if i > level)
    if later:
        return later[0]
    return level + 1 if level + 1 <= SEED_LAST else None


def level_name(level: int) -> str:
    lv = built_levels().get(level)
    if lv is not None:
        return lv.name
    return SEED_ROUTE[level][0] if level in SEED_ROUTE else f"level {level}"


# ---------------------------------------------------------------- evidence base
def default_evidence_files() -> list[Path]:
    """The recorded bench results (files with timed rows; check logs and superseded runs left out)."""
    out = []
    for p in sorted(RESULTS_DIR.glob("*.json")):
        if p.name in SUPERSEDED:
            continue
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and isinstance(d.get("rows"), list) and any(
                isinstance(r, dict) and "t_ms_median" in r for r in d["rows"]):
            out.append(p)
    return out


def read_bench(path: Path) -> dict:
    """A bench result ({meta, ceilings, rows}) or AdviseError."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AdviseError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AdviseError(f"{path}: not a JSON bench result ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise AdviseError(f"{path}: not a ladder bench result (needs a 'rows' list; see `roofline ladder bench --out`)")
    for i, r in enumerate(data["rows"]):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), int) for k in ("level", "m", "n", "k")):
            raise AdviseError(f"{path}: rows[{i}]: expected level, m, n, k integers")
        t = r.get("t_ms_median")
        if t is not None and not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0):
            raise AdviseError(f"{path}: rows[{i}].t_ms_median: expected a positive time in ms, got {t!r}")
    return data


def observations(data: dict, run: str) -> list[Obs]:
    """The timed rows of registry levels (their shipped name) and cuBLAS (level 0); variants
    (other names under a level id) are not that level and are left out."""
    names = {lv.id: lv.name for lv in registry.LEVELS}
    names[0] = "cublas"
    out = []
    for r in data["rows"]:
        if r.get("t_ms_median") is None or names.get(r["level"]) != r.get("name"):
            continue
        out.append(Obs(run, r["level"], r["m"], r["n"], r["k"], float(r["t_ms_median"]),
                       float(r["pct_cublas"]) if isinstance(r.get("pct_cublas"), (int, float)) else None))
    return out


def load_evidence(paths) -> list[Obs]:
    obs: list[Obs] = []
    seen = set()
    for p in paths:
        p = Path(p)
        key = p.resolve()
        if key in seen:
            continue
        seen.add(key)
        obs += observations(read_bench(p), p.name)
    return obs


def _gains(obs: list[Obs], a: int, b: int) -> dict[tuple[int, int, int], list[tuple[str, float]]]:
    """shape -> [(run, t_a / t_b - 1)] over runs that timed both levels on that shape."""
    t = {(o.run, o.level, o.m, o.n, o.k): o.t_ms for o in obs}
    out: dict[tuple[int, int, int], list[tuple[str, float]]] = {}
    for (run, lvl, m, n, k), ta in t.items():
        if lvl != a:
            continue
        tb = t.get((run, b, m, n, k))
        if tb:
            out.setdefault((m, n, k), []).append((run, ta / tb - 1.0))
    return out


def verdict(gains: list[float]) -> str:
    """'gain' (every run beyond +BAND), 'loss' (every run beyond -BAND), else 'flat'."""
    if gains and min(gains) > BAND:
        return "gain"
    if gains and max(gains) < -BAND:
        return "loss"
    return "flat"


def _dist(a, b) -> float:
    return math.sqrt(sum(math.log2(x / y) ** 2 for x, y in zip(a, b)))


def transition(obs: list[Obs], a: int, b: int, shape: tuple[int, int, int]) -> dict:
    """What level b bought over level a in the recorded runs, for `shape`: the scope that decided
    (exact shape / shape class / all shapes / none), the verdict, and the per-shape rows."""
    g = _gains(obs, a, b)
    rows = [{"shape": list(s), "shape_class": shape_class(*s), "runs": [r for r, _ in v],
             "gains": [x for _, x in v], "verdict": verdict([x for _, x in v])} for s, v in sorted(g.items())]
    cls = shape_class(*shape)
    by_class = {}
    for r in rows:
        c = by_class.setdefault(r["shape_class"], {"shapes": 0, "gains": [], "verdicts": {}})
        c["shapes"] += 1
        c["gains"].append(statistics.median(r["gains"]))
        c["verdicts"][r["verdict"]] = c["verdicts"].get(r["verdict"], 0) + 1
    summary = {k: {"shapes": v["shapes"], "median_gain": statistics.median(v["gains"]),
                   "min_gain": min(v["gains"]), "max_gain": max(v["gains"]), "verdicts": v["verdicts"]}
               for k, v in sorted(by_class.items())}
    res = _decide(rows, shape, cls, g, a, b)
    res["by_class"] = summary
    return res


def _decide(rows, shape, cls, g, a, b) -> dict:
    if tuple(shape) in g:
        exact = next(r for r in rows if tuple(r["shape"]) == tuple(shape))
        return {"from": a, "to": b, "scope": "exact shape", "verdict": exact["verdict"], "decided_by": exact,
                "rows": rows, "shape_class": cls}
    for scope, members in (("shape class " + cls, [r for r in rows if r["shape_class"] == cls]),
                           ("all recorded shapes", rows)):
        if not members:
            continue
        kinds = {r["verdict"] for r in members}
        if kinds == {"gain"} or "gain" not in kinds:   # uniform: every shape gains, or none does
            v = "gain" if kinds == {"gain"} else ("loss" if kinds == {"loss"} else "flat")
            return {"from": a, "to": b, "scope": scope, "verdict": v, "decided_by": None,
                    "rows": rows, "shape_class": cls}
        near = min(members, key=lambda r: _dist(r["shape"], shape))
        return {"from": a, "to": b, "scope": scope + " (mixed: the nearest recorded shape decides)",
                "verdict": near["verdict"], "decided_by": near, "rows": rows, "shape_class": cls}
    return {"from": a, "to": b, "scope": "none", "verdict": "unknown", "decided_by": None, "rows": rows,
            "shape_class": cls}


def library_ms(obs: list[Obs], shape) -> list[float]:
    return [o.t_ms for o in obs if o.level == 0 and (o.m, o.n, o.k) == tuple(shape)]


def level_pct_cublas(obs: list[Obs], level: int, shape) -> list[float]:
    return [o.pct_cublas for o in obs if o.level == level and (o.m, o.n, o.k) == tuple(shape)
            and o.pct_cublas is not None]


# ---------------------------------------------------------------- where the kernel stands
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
         "source": f"{path} (median; p20-p80 {_fmt(r.get('t_ms_p20'), '')}-{_fmt(r.get('t_ms_p80'), '')})"},
    ]
    st = {"t_ms": float(r["t_ms_median"]), "t_p20_ms": r.get("t_ms_p20"), "t_p80_ms": r.get("t_ms_p80"),
          "library_ms": float(lib[0]) if lib else None, "library_source": f"cuBLAS in the same run ({path})" if lib else None,
          "roof_ms": None, "roof_source": None, "check_ok": r.get("check_ok"), "measured": measured,
          "assumed": [], "dtype": "bf16", "counters": None}
    if lib:
        measured.append({"what": "cuBLAS (the library) same shape, same process", "value": lib[0], "unit": "ms", "source": path})
    if fl and bw:
        st["roof_ms"] = max(gemm_flops(m, n, k) / fl, gemm_min_bytes(m, n, k) / bw) * 1e3
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
    fewest = (m * k + n * k) * eb + m * n * 2
    if rec.dram_bytes is not None:
        measured.append({"what": "DRAM bytes / fewest bytes", "value": rec.dram_bytes / fewest, "unit": "ratio", "source": path})
    fl, bw, src = _measured_roofs(rec.device_name, dtype)
    if fl and bw:
        st["roof_ms"] = max(useful / fl, fewest / bw) * 1e3
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


# ---------------------------------------------------------------- the advice
def _pct(a, b):
    return None if a is None or b is None else 100.0 * a / b


def _gate_texts(level: int) -> list[str]:
    from . import check

    return [
        "every level passes the correctness suite before it is timed (house rule 6)",
        f"relative error vs a float64 reference <= {check.REL_TOL:g} (bf16 operands), and every element within "
        f"2^{round(math.log2(check.ELEM_REL))} |ref| + 2^{round(math.log2(check.ELEM_ABS))} (|A| |B|^T)",
        "no output element left unwritten (NaN-poisoned output); NaN/+Inf/-Inf in A, B give exactly the reference's pattern",
        "shapes: 200 random (device_suite check --n-random 200), K = 1, a single and many K tiles, "
        "tails in M, N, K (not multiples of the tile), K % 8 != 0 and N % 8 != 0 (misaligned rows)",
        "compute-sanitizer memcheck 0 errors, racecheck 0 hazards, synccheck 0 errors on the small shapes",
    ]


def _budget(level: int) -> dict:
    lv = built_levels().get(level)
    if lv is None:
        return {"built": False, "text": "not built: no registry entry yet; the new entry must state regs_max, "
                "smem_bytes, dyn_smem_bytes and no_spills, which tests/test_ladder_build.py then checks against ptxas"}
    return {"built": True, "threads": lv.threads, "regs_max": lv.regs_max, "smem_bytes_total": lv.total_smem_bytes,
            "no_spills": lv.no_spills, "tile_mnk": list(lv.tile_mnk),
            "text": f"registers <= {lv.regs_max}/thread, {lv.threads} threads, shared memory {lv.total_smem_bytes} B "
                    f"(static {lv.smem_bytes} + dynamic {lv.dyn_smem_bytes}), "
                    f"{'0 spills' if lv.no_spills else 'spills allowed'} (registry.py, checked by tests/test_ladder_build.py)"}


def _what_changes(level: int) -> str:
    lv = built_levels().get(level)
    if lv is not None:
        return f"{lv.adds} ({lv.description})"
    return SEED_ROUTE.get(level, ("?", "not in the seed's route"))[1]


def _advance_or_stop(level: int, nxt, nb, gap, t: float, t_practical, lib, obs: list[Obs], shape, assumed: list[str]):
    """Advance or stop: within the band of the practical roof, the last level, no evidence for the
    next one, its recorded gain, or a later level built on it that gains.
    Returns (action, reason, transition to the next level, lookahead transitions, foundation_of)."""
    tr = None
    later = []
    action, reason, foundation_of = None, None, None
    if gap is not None and gap <= BAND:
        action = "stop"
        reason = (f"within the {BAND:.1%} isolated band of the practical roof: {t:.4g} ms vs {t_practical:.4g} ms "
                  f"({'library' if t_practical == lib else 'roofline at measured ceilings'}), gap {gap:+.1%}")
    elif nxt is None:
        action, reason = "stop", f"level {level} is the last level of the seed's route and of the registry"
    else:
        tr = transition(obs, level, nxt, shape)
        if nxt not in nb or tr["scope"] == "none":
            action = "advance"
            reason = (("the seed's next level, not built yet: no project evidence" if nxt not in nb
                       else f"built but has no recorded measurement beside level {level}")
                      + (f"; the gap to the practical roof is {gap:+.1%}" if gap is not None else ""))
            assumed.append(f"no project evidence for level {level} -> {nxt}: its gains below are hypotheses")
        elif tr["verdict"] == "gain":
            action = "advance"
            reason = f"level {nxt} gained beyond the {BAND:.1%} band in every recorded run ({tr['scope']})"
        else:
            for later_id in sorted(i for i in nb if i > nxt):
                t2 = transition(obs, level, later_id, shape)
                later.append(t2)
                if t2["scope"] != "none" and t2["verdict"] == "gain":
                    foundation_of = later_id
                    break
            if foundation_of is not None:
                action = "advance"
                reason = (f"level {nxt} alone brings no stable gain ({tr['scope']}: {tr['verdict']}), but level "
                          f"{foundation_of}, built on it, gains beyond the band over level {level}")
            else:
                action = "stop"
                reason = (f"level {nxt} ({level_name(nxt)}) brings no stable gain beyond the {BAND:.1%} band "
                          f"({tr['scope']}: {tr['verdict']}); keep the simpler level {level}")
    return action, reason, tr, later, foundation_of


def advise(standing: dict, level: int, shape, obs: list[Obs], source: str) -> dict:
    """The five outputs for a kernel at `level` measured as `standing` on `shape`."""
    if level not in built_levels() and level not in SEED_ROUTE:
        raise AdviseError(f"--level {level}: not a ladder level (registry: {sorted(built_levels())}, seed route 1-{SEED_LAST})")
    m, n, k = shape
    t = standing["t_ms"]
    lib, roof = standing["library_ms"], standing["roof_ms"]
    floors = [x for x in (lib, roof) if x]
    t_practical = min(floors) if floors else None
    gap = t / t_practical - 1.0 if t_practical else None
    measured = list(standing["measured"])
    assumed = list(standing["assumed"])
    if lib:
        measured.append({"what": "% of the library", "value": _pct(lib, t), "unit": "%", "source": standing["library_source"]})
    if roof:
        measured.append({"what": "% of the roofline bound (practical: measured ceilings)", "value": _pct(roof, t),
                         "unit": "%", "source": standing["roof_source"]})
    assumed.append(f"the kernel is at level {level} ({level_name(level)}) of this ladder: as given (--level)")
    nxt = next_level_id(level)
    nb = built_levels()
    action, reason, tr, later, foundation_of = _advance_or_stop(level, nxt, nb, gap, t, t_practical, lib, obs, shape,
                                                                assumed)
    if tr is not None and tr["scope"] not in ("none", "exact shape"):
        assumed.append(f"your shape {m}x{n}x{k} behaves like the recorded {tr['scope']}")

    target = nxt if action == "advance" else None
    conclusion = {
        "action": action, "level": level, "next_level": target,
        "next_name": level_name(target) if target else None,
        "built": (target in nb) if target else None,
        "reason": reason,
        "text": (f"advance to level {target} ({level_name(target)})" + ("" if target in nb else ": NOT BUILT yet in this ladder")
                 if action == "advance" else f"stop: keep level {level} ({level_name(level)})") + f"; {reason}",
    }
    cont = _contract(level, nxt, shape, standing, tr, obs, foundation_of) if nxt is not None else None
    return {
        "source": source, "level": level, "shape": [m, n, k], "shape_class": shape_class(m, n, k),
        "band": BAND, "conclusion": conclusion,
        "evidence": {"measured": measured, "assumed": assumed,
                     "transition": tr, "lookahead": later},
        "standing": {"t_ms": t, "library_ms": lib, "roof_ms": roof, "t_practical_ms": t_practical, "gap": gap,
                     "pct_library": _pct(lib, t), "pct_roof": _pct(roof, t), "counters": standing.get("counters")},
        "contract": cont,
        "validation": _validation(level, nxt, shape, tr, action, foundation_of) if nxt is not None else None,
        "risks": _risks(level, nxt, action, gap, t_practical, tr),
    }


def _contract(level, nxt, shape, standing, tr, obs, foundation_of) -> dict:
    m, n, k = shape
    t = standing["t_ms"]
    if foundation_of is not None:
        prev = f"t(level {nxt}) <= {t * (1 + BAND):.4g} ms (no loss beyond the {BAND:.1%} band vs level {level}: it is the foundation of level {foundation_of})"
    else:
        prev = f"t(level {nxt}) <= {t * (1 - BAND):.4g} ms at {m}x{n}x{k} (a gain beyond the {BAND:.1%} band over level {level}'s {t:.4g} ms), in two runs on separate machine starts"
    rec = level_pct_cublas(obs, nxt, shape)
    lib = standing["library_ms"]
    if rec:
        libg = (f">= {min(rec) * (1 - BAND):.1f} % of cuBLAS (recorded level {nxt} here: "
                f"{', '.join(f'{x:.1f}' for x in rec)} %, less the band)")
    elif lib:
        libg = f">= {100 * lib / t * (1 + BAND):.1f} % of cuBLAS (level {level}'s {100 * lib / t:.1f} % plus the band)"
    else:
        libg = "time cuBLAS beside it in the same process (roofline ladder run); no recorded library time for this shape"
    roof = standing["roof_ms"]
    roofg = (f"report % of the roofline bound ({roof:.4g} ms at the measured ceilings); at >= {100 / (1 + BAND):.1f} % "
             "of the practical roof the ladder stops there" if roof else "no measured ceilings: measure them (roofline peaks measure)")
    return {
        "level": nxt, "name": level_name(nxt), "built": nxt in built_levels(),
        "what_changes": _what_changes(nxt),
        "correctness_gate": _gate_texts(nxt),
        "performance_gate": {"vs_previous": prev, "vs_library": libg, "vs_roof": roofg},
        "resource_budget": {"next": _budget(nxt), "current": _budget(level)},
    }


def _validation(level, nxt, shape, tr, action, foundation_of) -> dict:
    m, n, k = shape
    s = f"{m}x{n}x{k}"
    tests = [
        "CPU: pytest tests/test_ladder_build.py tests/test_ladder_registry.py (ptxas vs the registry budget)",
        f"GPU: roofline ladder run --level {nxt} --shape {s} (checks, then times beside cuBLAS)",
        "GPU: python3 -m roofline.ladder.device_suite check --n-random 200 (the correctness gate's shapes)",
        "GPU: compute-sanitizer --tool memcheck|racecheck|synccheck on the small shapes (`bash ladder/device.sh`, stage san)",
        f"GPU: roofline ladder bench --level {level} --level {nxt} --shape {s} twice (separate machine starts)",
    ]
    dec = (tr or {}).get("decided_by")
    if tr and tr.get("scope") != "none" and tr["rows"]:
        rows = [dec] if dec else [r for r in tr["rows"] if tr["scope"].startswith("all") or r["shape_class"] == tr["shape_class"]]
        gains = [g for r in rows for g in r["gains"]]
        pred = (f"level {nxt} / level {level} time ratio at {s} in [{1 / (1 + max(gains)):.3f}, {1 / (1 + min(gains)):.3f}] "
                f"(recorded: {tr['scope']})")
    else:
        pred = f"level {nxt} is faster than level {level} at {s} by more than the {BAND:.1%} band"
    variants = [v for v in registry.VARIANTS.values() if v.id == nxt]
    abl = (f"; ablation: the registry variant{'s' if len(variants) > 1 else ''} "
           + ", ".join(v.name for v in variants) + f" of level {nxt} isolate{'s' if len(variants) == 1 else ''} "
           "its mechanism on the same shape") if variants else ""
    if action == "stop" and tr is None:
        exp = (f"prediction: level {level} at {s} stays within the {BAND:.1%} band of the practical roof; re-time "
               f"level {level} and cuBLAS side by side in two runs (roofline ladder run --level {level} --shape {s}). "
               f"Falsified if cuBLAS is faster than level {level} by more than the band in either run: then the gap is "
               f"real and level {nxt} is the next step")
    elif action == "stop":
        exp = (f"prediction: {pred}, i.e. no gain beyond the {BAND:.1%} band. Falsified if level {nxt} at {s} is "
               f"faster than (1 - {BAND:.3f}) x level {level}'s time in both of two runs: then reopen and advance{abl}")
    elif foundation_of is not None:
        exp = (f"prediction: level {nxt} within +-{BAND:.1%} of level {level} at {s}, and level {foundation_of} faster "
               f"than level {level} beyond the band; falsified if level {foundation_of} does not gain")
    else:
        exp = (f"prediction: {pred}. Falsified if the measured level {nxt} time at {s} is above "
               f"(1 - {BAND:.3f}) x level {level}'s in either run{abl}")
    return {"tests": tests, "experiment": exp}


def _risks(level, nxt, action, gap, t_practical, tr) -> dict:
    risks = list(RISKS.get(nxt, ())) if nxt else []
    if tr and tr.get("verdict") in ("flat", "loss"):
        risks.append(f"the recorded level {nxt} does not pay on {tr['scope']}: expect no gain there")
    fallback = (f"keep level {level} (the simpler version) as the shipped kernel; every level stays built and "
                "checked, so a level that fails its gates is dropped, not debugged in place"
                + (f"; if the hardware, toolkit or shared memory cannot host level {nxt}, stop at level {level}" if nxt else ""))
    rule = {
        "band": BAND,
        "near_roof": (gap is not None and gap <= BAND),
        "gap_to_practical_roof": gap,
        "t_practical_ms": t_practical,
        "next_level_gain_verdict": (tr or {}).get("verdict"),
        "text": ("stop when within the band of the practical roof (t <= (1 + band) x min(library, roofline at measured "
                 "ceilings)) or when the next level brings no stable gain beyond the band; keep the simpler level. "
                 + (f"Applied: gap {gap:+.1%} {'<=' if gap <= BAND else '>'} {BAND:.1%}" if gap is not None else
                    "Applied: the roof gap is unknown")
                 + ((f"; level {nxt} on {tr['scope']}: {tr['verdict']}" if tr["scope"] != "none"
                    else f"; no recorded evidence for level {nxt}") if tr else "")
                 + f" -> {action}."),
    }
    return {"risks": risks, "fallback": fallback, "stopping_rule": rule}


# ---------------------------------------------------------------- rendering
def _fmt(v, unit):
    if isinstance(v, float):
        v = f"{v:.4g}"
    return f"{v} {unit}".strip()


def render_text(adv: dict) -> str:
    c = adv["conclusion"]
    s = adv["standing"]
    m, n, k = adv["shape"]
    out = [f"roofline ladder advise: level {adv['level']} ({level_name(adv['level'])}) at {m}x{n}x{k} "
           f"({adv['shape_class']}), from {adv['source']}", "",
           "1. Conclusion", f"   {c['text']}", "",
           "2. Evidence (measured)"]
    out += _text_evidence(adv["evidence"])
    out.append("")
    out += _text_contract(adv["contract"], adv["level"], c["action"])
    out.append("")
    v = adv["validation"]
    out.append("4. Minimal validation")
    if v:
        out += [f"   - {t}" for t in v["tests"]]
        out.append(f"   - falsifiable experiment: {v['experiment']}")
    else:
        out.append("   - keep the current level's gates (nothing to add)")
    out.append("")
    r = adv["risks"]
    out.append("5. Risks, fallback, stopping rule")
    out += [f"   - risk: {x}" for x in r["risks"]]
    out.append(f"   - fallback: {r['fallback']}")
    out.append(f"   - stopping rule: {r['stopping_rule']['text']}")
    if s["pct_library"] is not None or s["pct_roof"] is not None:
        out.append(f"   - standing: {_fmt(s['t_ms'], 'ms')}; "
                   + (f"{s['pct_library']:.1f} % of the library; " if s["pct_library"] is not None else "")
                   + (f"{s['pct_roof']:.1f} % of the roofline bound" if s["pct_roof"] is not None else ""))
    return "\n".join(out)


def _text_evidence(ev: dict) -> list[str]:
    """Section 2 lines: measured figures, the recorded transition, lookahead, assumptions."""
    out = []
    for e in ev["measured"]:
        out.append(f"   - {e['what']}: {_fmt(e['value'], e['unit'])}  [{e['source']}]")
    tr = ev["transition"]
    if tr and tr["rows"]:
        out.append(f"   - what level {tr['to']} bought over level {tr['from']} in the recorded runs "
                   f"(t_{tr['from']}/t_{tr['to']} - 1), per shape class: "
                   + "; ".join(f"{k} median {v['median_gain']:+.1%} over {v['shapes']} shapes "
                               f"({v['min_gain']:+.1%} .. {v['max_gain']:+.1%})" for k, v in tr["by_class"].items()))
        out.append(f"     per shape and run; decided by {tr['scope']}: {tr['verdict']}")
        for r in tr["rows"]:
            mark = " <-" if tr.get("decided_by") and r["shape"] == tr["decided_by"]["shape"] else ""
            out.append(f"       {'x'.join(map(str, r['shape'])):>16s} {r['shape_class']:>13s}  "
                       + ", ".join(f"{g:+.1%}" for g in r["gains"]) + f"  {r['verdict']}{mark}")
    for t2 in ev["lookahead"]:
        out.append(f"   - level {t2['to']} over level {t2['from']}: {t2['scope']}: {t2['verdict']}")
    out.append("   Assumptions (to verify)")
    for a in ev["assumed"]:
        out.append(f"   - {a}")
    return out


def _text_contract(ct: dict | None, level: int, action: str) -> list[str]:
    """Section 3 lines: the next level's contract table (or none)."""
    out = []
    out.append("3. Contract for the next level")
    if ct is None:
        out.append("   none: no level after this one")
    else:
        b = ct["resource_budget"]
        out += [f"   level {ct['level']} ({ct['name']}){'' if ct['built'] else ', NOT BUILT'}"
                + (" -- not recommended now (see 1); the gates to meet if it is reopened" if action == "stop" else ""),
                "   | item | contract |", "   |---|---|",
                f"   | what changes | {ct['what_changes']} |"]
        out += [f"   | correctness | {g} |" for g in ct["correctness_gate"]]
        out += [f"   | performance vs level {level} | {ct['performance_gate']['vs_previous']} |",
                f"   | performance vs library | {ct['performance_gate']['vs_library']} |",
                f"   | performance vs roof | {ct['performance_gate']['vs_roof']} |",
                f"   | resource budget (level {ct['level']}) | {b['next']['text']} |",
                f"   | resource budget (level {level}, now) | {b['current']['text']} |"]
    return out

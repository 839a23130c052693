"""Compute roofs as envelopes: the highest median any recorded run reached on any large shape.

One `roofline peaks measure` call is one *run* (one machine start, one date): per dtype it times
several large GEMM shapes, each shape giving a median with its p20/p80 spread and the SM clock
seen while it ran. The SM clock on this class of part moves with power (1500-1980 MHz seen on the
H200 under the same product), so one run's median under-reads what the device sustains, and a
library kernel timed in a fast moment of a real run would read above 100% of the roof (L3
suspect) when it is simply at the wall.

Policy (the same for every dtype, and for the HBM copy figure):
- envelope value = max over runs r and shapes s of median(r, s); the p20/p80 spread and SM clock
  of the figure are those of the winning (run, shape); every run is kept beside it under `runs:`
  with its date, its SM clock readings and its per-shape medians and p20/p80.
- the bf16/fp16 5% rule (docs/method.md section 8) compares envelope to envelope: those are the roofs
  the analysis uses, and both come from the same runs and the same round-robin blocks. Each run's
  own bf16/fp16 gap is recorded in its run record (`bf16_fp16_gap`) so that a single run over 5%
  is visible, but it does not flag the table on its own.
- the memory roof is untouched: it stays the vendor's pin rate (docs/method.md section 8,
  roofline.peaks.from_table); the measured copy figure beside it is an envelope the same way.

Pure functions on plain dicts (no torch, no YAML): `roofline.peaks.measure` uses them on the device
machine, `roofline peaks envelope` / `measure --merge` on any machine.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Iterable

from roofline.io.errors import PeaksError
from roofline.peaks import bf16_fp16_gap
from roofline.peaks.gemm import gemm_flops

HOW = {"fp8": "torch._scaled_mm e4m3 (cuBLASLt)",
       "tf32": "torch.matmul fp32 inputs, float32_matmul_precision=high (cuBLAS tf32)"}


def shape_key(shape, layout: str = "nn") -> str:
    """'MxNxK' for the a @ b layout (every run before layouts were recorded), 'MxNxK/linear' for
    a @ w.t() (nn.Linear's form). fp8 is only ever timed in the linear form, under the plain key."""
    base = "x".join(str(int(v)) for v in shape)
    return base if layout == "nn" else f"{base}/{layout}"


def parse_key(key: str) -> tuple[tuple[int, int, int], str]:
    dims, _, layout = key.partition("/")
    m, n, k = (int(v) for v in dims.split("x"))
    return (m, n, k), layout or "nn"


def quantiles(xs: list[float]) -> dict[str, float]:
    """median, p20, p80 (linear interpolation between order statistics), n, min, max."""
    s = sorted(xs)
    if not s:
        raise ValueError("no samples")

    def q(p):
        pos = p * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {"median": statistics.median(s), "p20": q(0.2), "p80": q(0.8), "n": len(s),
            "min": s[0], "max": s[-1]}


def _r(x: float, sig: int = 4) -> float:
    return float(f"{x:.{sig}g}")


def _clk(c: Any) -> dict | None:
    if not isinstance(c, dict) or c.get("median") is None:
        return None
    return {k: c[k] for k in ("median", "min", "max", "n") if k in c}


def _rate_block(samples_ms: list[float], work: float, clk: Any) -> dict:
    """Per-shape figure from raw per-call milliseconds: quantiles of work / t."""
    q = quantiles([work / (t * 1e-3) for t in samples_ms if t > 0])
    out = {"median": _r(q["median"]), "p20": _r(q["p20"]), "p80": _r(q["p80"]), "n": q["n"]}
    c = _clk(clk)
    if c:
        out["sm_clock_mhz"] = c
    return out


def run_from_raw(raw: dict, label: str, source: str = "") -> dict:
    """One run record from a `peaks measure` raw.json (every format written so far).

    New files carry `gemms_by_shape` {shape: {dtype: {ms, shape, sm_clock_mhz, ...}}}: every shape
    gets its median and p20/p80 from its samples. Older files kept the samples of the best shape per
    dtype only (`gemms`) and the medians of the others (`shapes_tried`): those shapes are recorded
    with their median alone (`spread: not recorded`)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("gemms"), dict):
        raise PeaksError(f"{source or label}: not a `roofline peaks measure` raw file (no 'gemms')")
    env = raw.get("env") or {}
    date = env.get("date")
    if not date:
        raise PeaksError(f"{source or label}: the raw file has no env.date")
    gemm: dict[str, dict[str, dict]] = {}
    by_shape = raw.get("gemms_by_shape")
    if isinstance(by_shape, dict) and by_shape:
        for sk, per in by_shape.items():
            (m, n, k), _ = parse_key(sk)
            for d, r in per.items():
                if [int(v) for v in r["shape"]] != [m, n, k]:
                    raise PeaksError(f"{source or label}: gemms_by_shape[{sk!r}].{d} has shape {r['shape']}")
                gemm.setdefault(d, {})[sk] = _rate_block(r["ms"], gemm_flops(m, n, k), r.get("sm_clock_mhz"))
    else:
        for d, r in raw["gemms"].items():
            work = 2.0 * float(r["shape"][0]) * float(r["shape"][1]) * float(r["shape"][2])
            shapes = {shape_key(r["shape"]): _rate_block(r["ms"], work, r.get("sm_clock_mhz"))}
            for sk, med in (r.get("shapes_tried") or {}).items():
                if sk not in shapes:
                    shapes[sk] = {"median": _r(float(med)), "spread": "not recorded"}
            gemm[d] = shapes
    run: dict[str, Any] = {"run": label, "date": str(date), "source": source, "gemm": gemm,
                           "env": {k: env[k] for k in ("torch", "cuda", "gpu_name", "wall_s", "idle_clocks_mhz", "method")
                                   if k in env}}
    hbm = raw.get("hbm")
    if isinstance(hbm, dict) and hbm.get("ms"):
        run["hbm"] = _rate_block(hbm["ms"], float(hbm["bytes_per_copy"]), hbm.get("sm_clock_mhz"))
        run["hbm"]["bytes_per_copy"] = int(hbm["bytes_per_copy"])
    return run


def load_raw_runs(paths: Iterable[str | Path]) -> list[dict]:
    import json

    runs = []
    for p in paths:
        p = Path(p)
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PeaksError(f"{p}: cannot read a raw run ({exc.__class__.__name__}: {exc})".splitlines()[0]) from exc
        label = p.name[:-len(".raw.json")] if p.name.endswith(".raw.json") else p.stem
        try:
            runs.append(run_from_raw(raw, label, str(p)))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise PeaksError(f"{p}: malformed raw run ({exc.__class__.__name__}: {exc})".splitlines()[0]) from exc
    return runs


def _best(shapes: dict[str, dict]) -> tuple[str, dict]:
    return max(shapes.items(), key=lambda kv: kv[1]["median"])


def runs_of_table(table: dict) -> list[dict]:
    """The run records a previous envelope table carries (per-figure `runs:` lists, regrouped by run)."""
    by: dict[str, dict] = {}
    meta = {m.get("run"): m for m in ((table.get("microbench") or {}).get("runs") or []) if isinstance(m, dict)}

    def get(rr):
        lab = rr["run"]
        if lab not in by:
            m = meta.get(lab, {})
            by[lab] = {"run": lab, "date": str(rr.get("date") or m.get("date")), "source": m.get("source", ""),
                       "gemm": {}, "env": dict(m.get("env") or {})}
        return by[lab]

    hb = (table.get("hbm_bw_bytes_s") or {}).get("measured") or {}
    for rr in hb.get("runs") or []:
        rec = get(rr)
        rec["hbm"] = {k: v for k, v in rr.items() if k not in ("run", "date")}
    for d, fig in (table.get("flops") or {}).items():
        for rr in ((fig or {}).get("measured") or {}).get("runs") or []:
            get(rr)["gemm"][d] = {k: dict(v) for k, v in (rr.get("shapes") or {}).items()}
    return list(by.values())


def merge_runs(old: list[dict], new: list[dict]) -> list[dict]:
    """Runs of `old` and `new`; a run of `new` replaces one of `old` with the same label. Sorted by
    date then label (the table reads in the order the runs were made)."""
    out = {r["run"]: r for r in old}
    for r in new:
        out[r["run"]] = r
    return sorted(out.values(), key=lambda r: (r["date"], r["run"]))


def envelope_table(base: dict, runs: list[dict]) -> dict:
    """`base` (device, names, datasheet figures) with the `measured` block of every dtype that a run
    covers rebuilt as the envelope over `runs` (whatever base had there is replaced); a dtype no run
    measured keeps base's block as it is."""
    if not runs:
        raise PeaksError("no runs to build an envelope from")
    t: dict[str, Any] = {k: v for k, v in base.items()}
    n_runs = len(runs)
    # memory: the copy figure, same policy (the roof itself stays the pin rate)
    t["hbm_bw_bytes_s"] = _hbm_envelope(t, runs)
    flops = {k: dict(v) for k, v in (t.get("flops") or {}).items()}
    dtypes = sorted({d for r in runs for d in r["gemm"]}, key=lambda d: list(flops).index(d) if d in flops else 99)
    for d in dtypes:
        flops.setdefault(d, {})["measured"] = _dtype_envelope(d, runs)
    t["flops"] = flops
    t["microbench"] = _microbench_meta(t, runs, n_runs)
    return t


def _hbm_envelope(t: dict, runs: list[dict]) -> dict:
    """The HBM figure with its measured block the envelope of the runs' copy benchmark (the roof
    itself stays the pin rate); without a run measuring it, the table's own block is kept."""
    hb = {k: v for k, v in (t.get("hbm_bw_bytes_s") or {}).items() if k != "measured"}
    with_hbm = [r for r in runs if r.get("hbm")]
    if with_hbm:
        win = max(with_hbm, key=lambda r: r["hbm"]["median"])
        w = win["hbm"]
        blk = {"value": w["median"],
               "source": (f"microbench roofline peaks measure: device-to-device copy of "
                          f"{w.get('bytes_per_copy', 0) / 2 / 2**30:.0f} GiB, read+write bytes, CUDA events; "
                          f"envelope = highest median over {len(with_hbm)} run(s), here run {win['run']}, "
                          f"median of {w.get('n', '?')} (the memory ROOF is the datasheet pin rate)"),
               "date": win["date"]}
        if "p20" in w:
            blk["spread"] = {"p20": w["p20"], "p80": w["p80"]}
        if w.get("sm_clock_mhz"):
            blk["sm_clock_mhz"] = w["sm_clock_mhz"]["median"]
        blk["envelope_of"] = {"run": win["run"]}
        blk["runs"] = [{"run": r["run"], "date": r["date"], **{k: v for k, v in r["hbm"].items()}} for r in with_hbm]
        hb["measured"] = blk
    elif "measured" in (t.get("hbm_bw_bytes_s") or {}):
        hb["measured"] = t["hbm_bw_bytes_s"]["measured"]
    return hb


def _dtype_envelope(d: str, runs: list[dict]) -> dict:
    """The measured block of one dtype: the highest median over the runs and their shapes."""
    cand = []  # (median, run, shape key, block)
    per_run = []
    for r in runs:
        shapes = r["gemm"].get(d)
        if not shapes:
            continue
        sk, blk = _best(shapes)
        cand.append((blk["median"], r, sk, blk))
        rec = {"run": r["run"], "date": r["date"], "best_shape": sk, "shapes": shapes}
        per_run.append(rec)
    med, win, sk, wb = max(cand, key=lambda c: c[0])
    (m, n, k), lay = parse_key(sk)
    all_shapes = sorted({s for r in runs for s in (r["gemm"].get(d) or {})})
    blk = {"value": med,
           "source": (f"microbench roofline peaks measure: {HOW.get(d, 'torch.matmul (cuBLAS)')}, random "
                      f"data, CUDA events; envelope = highest median over {len(cand)} run(s) x "
                      f"{len(all_shapes)} shape(s), here run {win['run']} at {m}x{n}x{k} ({'linear' if d == 'fp8' else lay} layout), median of "
                      f"{wb.get('n', '?')}"),
           "date": win["date"]}
    if "p20" in wb:
        blk["spread"] = {"p20": wb["p20"], "p80": wb["p80"]}
    if wb.get("sm_clock_mhz"):
        blk["sm_clock_mhz"] = wb["sm_clock_mhz"]["median"]
    blk["envelope_of"] = {"run": win["run"], "shape": sk}
    blk["runs"] = per_run
    return blk


def _microbench_meta(t: dict, runs: list[dict], n_runs: int) -> dict:
    """The table's microbench block: the envelope policy and one record per run."""
    mb = dict(t.get("microbench") or {})
    for k in ("date", "wall_s", "idle_clocks_mhz", "gpu_name", "torch", "cuda"):
        mb.pop(k, None)
    mb["policy"] = ("compute roofs (and the HBM copy figure) are envelopes: the highest median over the "
                    "recorded runs (separate machine starts) and large shapes; bf16 vs fp16 5% rule compares "
                    "envelope to envelope; see peaks/envelope.py")
    meta = []
    for r in runs:
        rec = {"run": r["run"], "date": r["date"]}
        if r.get("source"):
            rec["source"] = r["source"]
        if r.get("env"):
            rec["env"] = r["env"]
        b, h = r["gemm"].get("bf16"), r["gemm"].get("fp16")
        if b and h:
            rec["bf16_fp16_gap"] = _r(bf16_fp16_gap(_best(b)[1]["median"], _best(h)[1]["median"]), 3)
        meta.append(rec)
    mb["runs"] = meta
    mb["n_runs"] = n_runs
    return mb


def check_envelope_block(where: str, blk: dict) -> list[str]:
    """Consistency of one measured block that carries `runs`: the value is the highest recorded
    median, every run has a date, every recorded spread brackets its median."""
    errs = []
    runs = blk.get("runs")
    if runs is None:
        return errs
    if not isinstance(runs, list) or not runs:
        return [f"{where}.runs: expected a non-empty list of run records"]
    meds = []
    for i, rr in enumerate(runs):
        if not isinstance(rr, dict) or not rr.get("run") or not rr.get("date"):
            errs.append(f"{where}.runs[{i}]: every run needs a run label and a date")
            continue
        shapes = rr.get("shapes") if "shapes" in rr else {"-": rr}
        if shapes is not None and not isinstance(shapes, dict):
            errs.append(f"{where}.runs[{i}].shapes: expected a mapping of shape -> median, got {type(shapes).__name__}")
            continue
        for sk, s in (shapes or {}).items():
            if not isinstance(s, dict) or not isinstance(s.get("median"), (int, float)):
                errs.append(f"{where}.runs[{i}] {sk}: no median")
                continue
            meds.append(s["median"])
            if ("p20" in s or "p80" in s) and not all(isinstance(s.get(q), (int, float)) and not isinstance(s.get(q), bool)
                                                      for q in ("p20", "p80")):
                # NB: YAML reads 1e-09 (no dot) as a string
                errs.append(f"{where}.runs[{i}] {sk}: p20 / p80 must both be numbers")
                continue
            if "p20" in s and not s["p20"] <= s["median"] <= s["p80"]:
                errs.append(f"{where}.runs[{i}] {sk}: median {s['median']} outside its spread [{s['p20']}, {s['p80']}]")
    v = blk.get("value")
    if meds and isinstance(v, (int, float)) and abs(v - max(meds)) > 1e-9 * max(meds):
        errs.append(f"{where}: value {v} is not the envelope (highest recorded median {max(meds)})")
    return errs


def build_envelope(base: dict | None, gpu_name: str, runs: list[dict]) -> dict:
    """The peak table: base's device block and datasheet figures, measured blocks = envelopes (a
    GPU without a table gets a bare device block)."""
    base = dict(base) if base else {"device": gpu_name, "vendor": "nvidia", "names": [gpu_name]}
    return envelope_table(base, runs)

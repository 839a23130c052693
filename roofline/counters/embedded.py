"""Counters carried INSIDE a Top-N: `roofline topn report.ncu-rep` writes each kernel's measured
per-launch counters into its entry (`entries[i].counters`, docs/topn.md), so the Top-N of an Nsight
Compute report is a complete input on its own: `roofline analyze` reads them back as the stage-C
records of those entries (the same merge as `--counters`, roofline/core/procedure.py). An explicit
`--counters` file wins over them.

Values are per launch, in base units (bytes, FLOPs, ms), exactly the fields of
:class:`~roofline.counters.base.KernelCounters`; absent = not measured.
"""
from __future__ import annotations

import math

from .base import KernelCounters

KEY = "counters"
_SCALARS = ("t_ms", "dram_bytes", "dram_read_bytes", "dram_write_bytes", "cuda_core_flops", "l2_bytes",
            "l1_bytes", "report_peak_hbm_bw_bytes_s", "report_sm_clock_hz")


def to_topn(kc: KernelCounters) -> dict:
    """The JSON block of one record (None fields left out; NaN never written)."""
    d: dict = {"source": kc.source, "launches": kc.launches}
    for f in _SCALARS:
        v = getattr(kc, f)
        if v is not None and math.isfinite(v):
            d[f] = v
    if kc.tensor_flops_by_dtype:
        d["tensor_flops_by_dtype"] = {k: v for k, v in kc.tensor_flops_by_dtype.items() if v is not None}
    if kc.extra:
        d["extra"] = {k: v for k, v in kc.extra.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    if kc.device_name:
        d["device_name"] = kc.device_name
    if kc.unstable:
        d["unstable"] = True
    if kc.derived_from_rate:
        d["derived_from_rate"] = list(kc.derived_from_rate)
    if kc.groups:
        d["groups"] = [{k: v for k, v in g.items() if v is not None and (k == "launches" or math.isfinite(v))}
                       for g in kc.groups]
    return d


def _num(v, where: str, file: str) -> float:
    from roofline.io.errors import InputError

    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)) or v < 0:
        raise InputError(file, where, f"expected a non-negative number, got {v!r}"[:160])
    return float(v)


def from_topn(name: str, d, where: str, file: str) -> KernelCounters:
    """One entry's block back into a record; a malformed block is an InputError naming its path."""
    from roofline.io.errors import InputError

    if not isinstance(d, dict):
        raise InputError(file, where, f"expected an object of per-launch counters, got {type(d).__name__}")
    src = d.get("source", "ncu-rep")
    if not isinstance(src, str):
        raise InputError(file, f"{where}.source", "expected a string")
    launches = d.get("launches", 1)
    if isinstance(launches, bool) or not isinstance(launches, int) or launches < 1:
        raise InputError(file, f"{where}.launches", f"expected a positive integer, got {launches!r}")
    kc = KernelCounters(name=name, launches=launches, source=f"{src} (in the Top-N)")
    for f in _SCALARS:
        if d.get(f) is not None:
            setattr(kc, f, _num(d[f], f"{where}.{f}", file))
    for key, attr in (("tensor_flops_by_dtype", kc.tensor_flops_by_dtype), ("extra", kc.extra)):
        block = d.get(key) or {}
        if not isinstance(block, dict):
            raise InputError(file, f"{where}.{key}", "expected an object of numbers")
        for k, v in block.items():
            attr[str(k)] = _num(v, f"{where}.{key}.{k}", file)
    if isinstance(d.get("device_name"), str):
        kc.device_name = d["device_name"]
    kc.unstable = d.get("unstable") is True
    dfr = d.get("derived_from_rate") or []
    if not isinstance(dfr, list) or not all(isinstance(x, str) for x in dfr):
        raise InputError(file, f"{where}.derived_from_rate", "expected a list of metric names")
    kc.derived_from_rate = list(dfr)
    kc.groups = _groups(d.get("groups") or [], f"{where}.groups", file)
    return kc


def _groups(block, where: str, file: str) -> list[dict]:
    """The launch groups of a record whose launches differ (KernelCounters.groups)."""
    from roofline.io.errors import InputError

    if not isinstance(block, list):
        raise InputError(file, where, "expected a list of launch groups")
    out = []
    for i, g in enumerate(block):
        if not isinstance(g, dict):
            raise InputError(file, f"{where}[{i}]", "expected an object")
        n = g.get("launches")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(file, f"{where}[{i}].launches", f"expected a positive integer, got {n!r}")
        out.append({"launches": n, **{k: (_num(g[k], f"{where}[{i}].{k}", file) if g.get(k) is not None else None)
                                      for k in ("t_ms", "dram_bytes", "flops_issued")}})
    return out


def from_topn_entries(topn) -> list[KernelCounters]:
    """Every entry's embedded counters (a parsed TopN), one record per entry that has them."""
    out = []
    for e in topn.entries:
        raw = e.raw.get(KEY) if isinstance(e.raw, dict) else None
        if raw is not None:
            out.append(from_topn(e.name, raw, f"entries[{e.index}].{KEY}", topn.path))
    return out

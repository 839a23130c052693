"""Per-launch averaging over the launches of one kernel name, and the `unstable` flag."""
from __future__ import annotations

from statistics import fmean

from .base import KernelCounters

# Launches of one kernel name are flagged `unstable` when (max - min) / mean of their duration,
# DRAM bytes or issued FLOPs exceeds this band. On the H200 fixture two launches of one GEMM
# differ by 0.3% in time and 0.2% in DRAM bytes (tensor FLOPs: exactly equal), so 20% is far
# above counter noise and catches the real cause of disagreement: one kernel name launched on
# different shapes (whose average is not the per-launch work of any of them).
UNSTABLE_BAND = 0.20

_SCALARS = ("t_ms", "dram_bytes", "dram_read_bytes", "dram_write_bytes", "cuda_core_flops",
            "l2_bytes", "l1_bytes", "report_peak_hbm_bw_bytes_s", "report_sm_clock_hz")
_STABILITY_KEYS = ("t_ms", "dram_bytes", "flops_issued")


PEAK_S = "dram_peak_s"     # roofline.counters.ncu.PEAK_SECONDS: seconds at the DRAM peak, additive like a count


def _mean(values):
    vals = [v for v in values if v is not None]
    return fmean(vals) if vals else None


def spread(values) -> float | None:
    """(max - min) / mean over the measured values, None with fewer than two."""
    vals = [float(v) for v in values if v is not None]
    if len(vals) < 2:
        return None
    m = fmean(vals)
    if m == 0:
        return 0.0 if max(vals) == min(vals) else float("inf")
    return (max(vals) - min(vals)) / abs(m)


def average(name: str, launches: list[KernelCounters], source: str,
            band: float = UNSTABLE_BAND) -> KernelCounters:
    """One KernelCounters per name: field-wise mean over the launches that measured it."""
    if len(launches) == 1:
        kc = launches[0]
        kc.launches = 1
        return kc
    out = KernelCounters(name=name, launches=len(launches), source=source)
    for f in _SCALARS:
        setattr(out, f, _mean(getattr(k, f) for k in launches))
    dtypes = [d for k in launches for d in k.tensor_flops_by_dtype]
    for d in dict.fromkeys(dtypes):
        out.tensor_flops_by_dtype[d] = _mean(k.tensor_flops_by_dtype.get(d) for k in launches)
    for key in dict.fromkeys(x for k in launches for x in k.extra):
        out.extra[key] = _mean(k.extra.get(key) for k in launches)
    out.device_name = next((k.device_name for k in launches if k.device_name), None)
    out.derived_from_rate = list(dict.fromkeys(m for k in launches for m in k.derived_from_rate))
    out.dram_bytes_derived = next((k.dram_bytes_derived for k in launches if k.dram_bytes_derived), None)
    worst = 0.0
    for key in _STABILITY_KEYS:
        s = spread(getattr(k, key) for k in launches)
        if s is not None:
            out.extra[f"launch_spread.{key}"] = s
            worst = max(worst, s)
    out.unstable = worst > band or any(k.unstable for k in launches)
    if out.unstable:
        out.groups = launch_groups(launches, band)
    return out


def launch_groups(launches: list[KernelCounters], band: float = UNSTABLE_BAND) -> list[dict]:
    """Launches of one kernel name that do different work (gate_up and down of one grouped GEMM,
    cats of different sizes), split into groups of like launches: sorted by DRAM bytes (by time where
    a launch has no DRAM count), a group starts where a launch exceeds its group's smallest by more
    than ``band`` (the noise band above: two launches of the same work differ by < 1%). Each group:
    its launches and their per-launch means (t_ms, dram_bytes, flops_issued; None where unmeasured),
    largest total time first. Every launch is in exactly one group, so the groups' summed bytes and
    time are the kernel's: sum(bytes) / sum(time) over a group is its achieved bandwidth."""
    by_bytes = all(k.dram_bytes is not None for k in launches)
    key = (lambda k: k.dram_bytes) if by_bytes else (lambda k: k.t_ms if k.t_ms is not None else 0.0)
    groups: list[list[KernelCounters]] = []
    lo = None
    for k in sorted(launches, key=key):
        v = key(k)
        if groups and lo is not None and (v <= lo * (1.0 + band) or (lo == 0 and v == 0)):
            groups[-1].append(k)
            continue
        groups.append([k])
        lo = v
    rows = [{"launches": len(g), "t_ms": _mean(k.t_ms for k in g), "dram_bytes": _mean(k.dram_bytes for k in g),
             "flops_issued": _mean(k.flops_issued for k in g),
             **({PEAK_S: _mean(k.extra.get(PEAK_S) for k in g)} if any(PEAK_S in k.extra for k in g) else {})}
            for g in groups]
    return sorted(rows, key=lambda r: -(r["t_ms"] or 0.0) * r["launches"])


_ADDITIVE = ("t_ms", "dram_bytes", "dram_read_bytes", "dram_write_bytes", "cuda_core_flops", "l2_bytes", "l1_bytes")


def combine(a: KernelCounters, b: KernelCounters) -> KernelCounters:
    """Two launches that form ONE logical op (a split-K GEMM and the reduce that completes it):
    counts and times add (unknown if either side did not measure one); the first launch's name,
    peaks and corroborating metrics stay."""
    out = KernelCounters(name=a.name, launches=1, source=a.source, device_name=a.device_name or b.device_name,
                         report_peak_hbm_bw_bytes_s=a.report_peak_hbm_bw_bytes_s, report_sm_clock_hz=a.report_sm_clock_hz,
                         extra=dict(a.extra), unstable=a.unstable or b.unstable)
    for f in _ADDITIVE:
        va, vb = getattr(a, f), getattr(b, f)
        setattr(out, f, None if va is None or vb is None else va + vb)
    if a.tensor_flops_by_dtype and b.tensor_flops_by_dtype:
        out.tensor_flops_by_dtype = {d: a.tensor_flops_by_dtype.get(d, 0.0) + b.tensor_flops_by_dtype.get(d, 0.0)
                                     for d in dict.fromkeys([*a.tensor_flops_by_dtype, *b.tensor_flops_by_dtype])}
    out.derived_from_rate = list(dict.fromkeys(a.derived_from_rate + b.derived_from_rate))
    out.dram_bytes_derived = a.dram_bytes_derived or b.dram_bytes_derived
    pa, pb = a.extra.get(PEAK_S), b.extra.get(PEAK_S)     # seconds at the DRAM peak add like a count
    if PEAK_S in out.extra:
        out.extra[PEAK_S] = None if pa is None or pb is None else pa + pb
    if b.t_ms is not None:
        out.extra["folded_launch_t_ms"] = b.t_ms
    return out


def scaled(kc: KernelCounters, factor: float) -> KernelCounters:
    """The record's counts and time x factor (a reduce's per-launch counters spread over the launches
    of the GEMM it folds into)."""
    if factor == 1.0:
        return kc
    out = KernelCounters(name=kc.name, launches=kc.launches, source=kc.source, device_name=kc.device_name,
                         extra=dict(kc.extra), unstable=kc.unstable, derived_from_rate=list(kc.derived_from_rate),
                         dram_bytes_derived=kc.dram_bytes_derived)
    if out.extra.get(PEAK_S) is not None:
        out.extra[PEAK_S] *= factor
    for f in _ADDITIVE:
        v = getattr(kc, f)
        setattr(out, f, None if v is None else v * factor)
    out.tensor_flops_by_dtype = {d: v * factor for d, v in kc.tensor_flops_by_dtype.items()}
    return out


def group_average(named: list[tuple[str, KernelCounters]], source: str) -> list[KernelCounters]:
    """Average launches that share a name; order of first appearance is kept."""
    groups: dict[str, list[KernelCounters]] = {}
    for name, kc in named:
        groups.setdefault(name, []).append(kc)
    return [average(n, ks, source) for n, ks in groups.items()]

"""Fill an entry's shape for its op class: captured `shapes` (stage B) first, then the profiler's
`est_shape`, then config.json and the workload (stage A: the fill its op class registers, in
roofline/core/opclasses/). Every filled field is recorded as an assumption so that `notes` can say
what was assumed."""
from __future__ import annotations

from roofline.core import opclasses
from roofline.io.errors import EntryError
from roofline.core.inputs import DIM_KEYS, Entry, Env
from roofline.io.values import MAX_DIM, finite
from roofline.core.opclasses.stage_a import fill as _fill


def resolve_shapes(op_class: str, e: Entry, env: Env, config: dict | None, regime: str
                   ) -> tuple[list[dict], str, list[str]]:
    """-> (shapes, source, assumptions). source is "captured" (stage B) or "estimated" (stage A).
    Raises EntryError when a needed dimension cannot be found anywhere."""
    assumed: list[str] = []
    if e.shapes:
        bases, source = [dict(s) for s in e.shapes], "captured"
    else:
        bases, source = [dict(e.est_shape or {})], "estimated"
    out = []
    for s in bases:
        if e.est_shape and source == "captured":
            for k, v in e.est_shape.items():
                _fill(s, k, v, "from est_shape", assumed)
        oc = opclasses.get(op_class)
        fill = oc.fill if oc is not None and oc.has("fill") else None
        if fill is None:
            raise EntryError(f"op class {op_class!r} has no byte/FLOP model")
        need = fill(s, op_class, e, env.workload, config, regime, assumed)
        missing = [k for k in need if k not in s]
        if missing:
            raise EntryError(f"{op_class} shape is missing {', '.join(missing)} and neither the Top-N, "
                             f"config.json nor the workload gives it{_missing_how(op_class, e, config)}")
        _check_filled(op_class, s, assumed)
        out.append(s)
    return out, source, assumed


def _check_filled(op_class: str, s: dict, assumed: list[str]) -> None:
    """A dimension filled from config.json or the workload is a positive number like one the Top-N
    gives (a config's 0, "none", is no dimension): else the entry degrades, naming it."""
    for k, v in s.items():
        if k in DIM_KEYS and not (finite(v) and 0 < v <= MAX_DIM):
            src = next((a.split(" (", 1)[1].rstrip(")") for a in assumed if a.startswith(f"{k}=")), "the Top-N")
            raise EntryError(f"{op_class} shape: {k} = {v} from {src} is not a positive dimension")


def _missing_how(op_class: str, e: Entry, config: dict | None) -> str:
    """What would give a missing dimension, for the L2 reason."""
    if e.raw.get("cuda_graph_replayed"):
        return (": it was replayed from a CUDA graph, and replayed kernels carry no shapes; one eager step "
                "in the profiled window gives them, or counters at stage C (--counters)")
    oc = opclasses.get(op_class)
    if oc is not None and oc.missing_hint:
        return oc.missing_hint
    if not config:
        return (": give the model's config.json (`roofline analyze --config FILE`, or "
                "`roofline topn --config FILE`)")
    return ""


def _num_list(v, n: int) -> list[float] | None:
    if isinstance(v, list) and len(v) == n and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                    and x >= 0 for x in v):
        return [float(x) for x in v]
    return None


def work_mix(op_class: str, e: Entry, env: Env, config: dict | None, regime: str
             ) -> tuple[list[dict], list[float], list[dict], list[float] | None, list[float] | None, str,
                        list[str], list[str]]:
    """THE one place an entry's shapes become its per-launch work, used by the analysis and by the
    stage-C re-run (timing and counters) alike.

    -> (shapes, weights, shape_dtypes, shape_t_ms, shape_launches, source, assumed, notes): the shapes of the
    analysed regime; their weights, each shape's share of the launches (they sum to 1; from
    `shape_launches` whenever the Top-N gives it, equal shares otherwise, and the notes say which);
    per-shape dtype overrides (`shape_dtypes`, else {}); per-shape mean launch time
    (`shape_base_latency_ms`, else None); per-shape launch counts (`shape_launches`, else None).
    NB: the per-launch FLOPs / bytes of a mix are sum(w_i * x_i): the launch-weighted mean, which
    times the launch count gives the kernel's total work exactly."""
    shapes, source, assumed = resolve_shapes(op_class, e, env, config, regime)
    n = len(shapes)
    raw = e.raw if isinstance(e.raw, dict) else {}
    notes: list[str] = []
    idx = list(range(n))
    launches = _num_list(raw.get("shape_launches"), n) if source == "captured" else None
    regs = raw.get("shape_regimes") if source == "captured" else None
    if isinstance(regs, list) and len(regs) == n:
        keep = [i for i, r in enumerate(regs) if isinstance(r, str) and regime in r.split("+")]
        if keep and len(keep) < n:
            notes.append(f"{len(keep)} of {n} captured shapes belong to the {regime} regime")
            idx = keep
    if launches is not None and sum(launches[i] for i in idx) > 0:
        tot = sum(launches[i] for i in idx)
        weights = [launches[i] / tot for i in idx]
        if len(idx) > 1:
            notes.append(f"{len(idx)} captured shapes, per-launch work weighted by their launches "
                         f"({', '.join(f'{launches[i]:g}' for i in idx)})")
    else:
        weights = [1.0 / len(idx)] * len(idx)
        if len(idx) > 1:
            notes.append(f"{len(idx)} shapes without launch counts: equal weights ASSUMED")
    sdt = raw.get("shape_dtypes") if source == "captured" else None
    dts = [dict(sdt[i]) if isinstance(sdt, list) and len(sdt) == n and isinstance(sdt[i], dict) else {}
           for i in idx]
    lat = _num_list(raw.get("shape_base_latency_ms"), n) if source == "captured" else None
    return ([shapes[i] for i in idx], weights, dts, [lat[i] for i in idx] if lat else None,
            [launches[i] for i in idx] if launches else None, source, assumed, notes)

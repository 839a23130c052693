"""The values between the per-entry steps of roofline.core.procedure, and the one place they become
an artifact entry (`entry_fields`, in the artifact's field order; roofline.core.contract.complete_entry
then puts the contract's fields first).

  Head (what the Top-N says of the kernel) -> Placement (the regime analysed and its time)
  -> Figures (the work on the roof: bytes, FLOPs, rates, the byte model) -> Target (the class prior,
  the ratio read) -> Flags (bound type, the no-verdict cases) -> Verdict (headroom class, speedup, gain)

Each is frozen: a step takes values and returns a value. What a class's own job or stage C adds
(a collective's transfer split, the counters) comes in as the small field dicts
they fill, placed where the artifact has always held them. Units: ms, bytes, FLOPs, /s.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Head:
    """The kernel as the Top-N names it: its class (the contract's op_class) and finer kind."""
    name: str
    short_name: str
    pct_gpu_time: Any           # as the Top-N wrote it (40 stays 40)
    op_class: str
    op_kind: str
    editable: Any


@dataclass(frozen=True)
class Placement:
    """The regime analysed, its time per launch and its share of the GPU time; one logical op."""
    regime: str
    t_ms: float | None
    launches_per_step: Any
    launches_per_logical_op: int
    regime_pct_gpu_time: float
    t_logical_op_ms: float | None = None


@dataclass(frozen=True)
class Figures:
    """The work of one logical op on the roof: the bytes on the memory axis, the FLOPs, the rates and
    utilizations (`rates`: achieved_bw_bytes_s, achieved_flops, hbm_util, compute_util, arithmetic
    intensity, ridge point), the roof axis, dtypes, shapes and the byte model chosen."""
    bytes_est: float
    flops_est: float
    rates: dict
    roof_axis: str
    compute_dtype: str
    dtypes: dict
    shape: dict
    shape_source: str
    byte_model: str
    roofline_pct_raw: float
    shapes_used: list | None = None
    per_shape: list | None = None
    alternatives: list | None = None


@dataclass(frozen=True)
class Target:
    """The class prior and the ratio read against it (clamped into [0, 1]; the raw one kept)."""
    target_eff: float | None
    roofline_pct_raw: float
    roofline_pct: float
    roofline_pct_range: list | None = None
    attainable_speedup_range: list | None = None
    at_compute_wall: bool = False


@dataclass(frozen=True)
class Flags:
    """The bound type and the cases that give no verdict (dispatch floor, L3 suspect, L2-served, the class's)."""
    bound_type: str
    verdict: bool
    suspect: bool = False
    dispatch_bound: bool = False
    stage_c_candidate: bool = False
    bytes_upper_bound: float | None = None
    l2_resident: bool = False           # the L2 serves it (its class's residency rule)


@dataclass(frozen=True)
class Verdict:
    """The headroom class (a band only with a verdict at medium or high confidence; else provisional),
    the attainable speedup and the e2e gain on the regime's share."""
    headroom_class: str
    attainable_speedup: float | None
    expected_e2e_gain_pct: float | None
    confidence: str
    provisional_headroom_class: str | None = None
    attainable_speedup_uncapped: float | None = None


UNSET = type("Unset", (), {"__repr__": lambda self: "UNSET"})()   # a field the step did not write (absent, not null)


@dataclass(frozen=True)
class Measured:
    """What stage C's counters say of the entry (roofline.core.merge): the counters as read, and where
    they are usable the measured bytes beside the model's, the useful and issued FLOPs, the padding,
    each group of like launches. UNSET fields are absent from the entry (a null is written as null)."""
    counters: dict
    bytes_model: Any = UNSET
    bytes_measured: Any = UNSET
    flops_useful: Any = UNSET
    flops_issued: Any = UNSET
    padding_waste_ratio: Any = UNSET
    bytes_measured_over_model: Any = UNSET
    measured_groups: Any = UNSET

    def get(self, name: str):
        """A field's value, None where it is UNSET."""
        v = getattr(self, name)
        return None if v is UNSET else v


@dataclass(frozen=True)
class Necessity:
    """The fewest bytes (and FLOPs) the same result needs per launch, the evidence that says so, and
    the share of GPU time that doing only them would save (None: unknown, never zero)."""
    bytes_necessary: float | None
    flops_necessary: float | None
    necessary_evidence: list
    avoidable_gain_pct: float | None


@dataclass(frozen=True)
class Sides:
    """What a class's jobs and stage C give beside the steps' values: the memory roof where it is not
    HBM (`memory_roof`: a collective's link), the split of the time the roof judges (`split`: its
    t_transfer_ms, t_waiting_ms, waiting_share; a class's judged_time job) with the speedup of that
    part (`judged_speedup`), and stage C's counters (`measured`, where counters matched)."""
    memory_roof: str | None = None
    split: Any = None
    judged_speedup: float | None = None
    measured: Measured | None = None


@dataclass(frozen=True)
class Levers:
    """The route (docs/method.md section 5) in a word and in words, and the levers with their evidence."""
    route: str
    route_reason: str
    other_levers: list
    levers_detail: list
    byte_reduction_levers: list


def entry_fields(head: Head, place: Placement, sides: Sides, fig: Figures, tgt: Target, flags: Flags,
                 v: Verdict, nec: Necessity) -> dict:
    """The artifact entry of one analysed head, written once from the steps' values."""
    out: dict[str, Any] = {"name": head.name, "short_name": head.short_name, "pct_gpu_time": head.pct_gpu_time,
                           "op_class": head.op_class, "op_kind": head.op_kind, "editable": head.editable,
                           "modeled": True, "regime": place.regime, "t_ms": place.t_ms,
                           "launches_per_step": place.launches_per_step,
                           "launches_per_logical_op": place.launches_per_logical_op,
                           "regime_pct_gpu_time": place.regime_pct_gpu_time}
    _put(out, memory_roof=sides.memory_roof)
    if sides.split is not None:
        out.update(t_transfer_ms=sides.split.t_transfer_ms, t_waiting_ms=sides.split.t_waiting_ms,
                   waiting_share=sides.split.waiting_share)
    out["t_logical_op_ms"] = place.t_logical_op_ms
    if flags.l2_resident:
        out["l2_resident"] = True
    if sides.measured is not None:
        out.update((f.name, getattr(sides.measured, f.name)) for f in fields(Measured)
                   if getattr(sides.measured, f.name) is not UNSET)
    out.update(bytes_est=fig.bytes_est, flops_est=fig.flops_est, **fig.rates)
    out.update(roof_axis=fig.roof_axis, compute_dtype=fig.compute_dtype, dtypes=fig.dtypes, shape=fig.shape)
    _put(out, shapes_used=fig.shapes_used, per_shape=fig.per_shape)
    out.update(shape_source=fig.shape_source, byte_model=fig.byte_model)
    _put(out, alternatives=fig.alternatives)
    out["target_eff"] = tgt.target_eff
    _put(out, roofline_pct_range=tgt.roofline_pct_range, attainable_speedup_range=tgt.attainable_speedup_range)
    out.update(roofline_pct_raw=tgt.roofline_pct_raw, roofline_pct=tgt.roofline_pct)
    if tgt.at_compute_wall:
        out["at_compute_wall"] = True
    out.update(suspect=flags.suspect, dispatch_bound=flags.dispatch_bound, stage_c_candidate=flags.stage_c_candidate)
    _put(out, bytes_upper_bound=flags.bytes_upper_bound)
    out["bound_type"] = flags.bound_type
    _put(out, attainable_speedup_uncapped=v.attainable_speedup_uncapped)
    if v.attainable_speedup is not None:    # the judged part's speedup stands beside a kernel speedup only
        _put(out, attainable_speedup_transfer=sides.judged_speedup)
    out.update(headroom_class=v.headroom_class, attainable_speedup=v.attainable_speedup,
               expected_e2e_gain_pct=v.expected_e2e_gain_pct)
    _put(out, provisional_headroom_class=v.provisional_headroom_class)
    out["confidence"] = v.confidence
    out["bytes_necessary"] = nec.bytes_necessary
    _put(out, flops_necessary=nec.flops_necessary)
    out.update(necessary_evidence=nec.necessary_evidence, avoidable_gain_pct=nec.avoidable_gain_pct)
    return out


def with_levers(out: dict, lv: Levers, notes: list[str]) -> dict:
    """The entry with the last step's value, its route and levers, and the notes of every step."""
    out.update(route=lv.route, route_reason=lv.route_reason, other_levers=lv.other_levers,
               levers_detail=lv.levers_detail, byte_reduction_levers=lv.byte_reduction_levers)
    out["notes"] = "; ".join(notes)
    return out


# What the run adds to each analysed entry once every head is analysed (roofline.core.analysis): the
# entry's other regimes, the aten ops behind it, every rank's figures, its share of the step's wall
# time, its gain over the workload, a stage-C note. Each is computed where it is known and written here.

def with_run_context(ent: dict, regime_verdicts: list | None, ranks: dict | None, collective: dict | None,
                     aten_ops: dict) -> dict:
    """The entry with its verdicts in the other regimes (the entry's own first), its per-rank block and
    collective split (a Top-N of several ranks), and the aten ops that launched it."""
    _put(ent, regime_verdicts=regime_verdicts, ranks=ranks, collective=collective)
    ent["aten_ops"] = aten_ops
    return ent


def with_wall_shares(e: dict, share_pct: float | None, gain_pct: float | None) -> None:
    """The entry's share of its regime's step wall time and the gain on it (roofline.core.wall)."""
    e.update(pct_of_step_wall=share_pct, expected_gain_pct_of_step_wall=gain_pct)


def with_workload_gain(v: dict, gain_pct: float | None) -> None:
    """An entry's (or regime verdict's) gain over the user's workload (roofline.core.workload)."""
    v["expected_workload_gain_pct"] = gain_pct


def with_note(e: dict, note: str) -> None:
    """A note the run adds to an analysed entry, after the steps' own."""
    e["notes"] = (e.get("notes") or "") + ("; " if e.get("notes") else "") + note


def _put(out: dict, **fields) -> None:
    """The fields that are not None (an optional field is absent, not null, where it does not apply)."""
    out.update((k, x) for k, x in fields.items() if x is not None)

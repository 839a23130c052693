"""Is the work necessary? (docs/method.md section 12: `roofline_pct` says how well a
kernel moves its bytes, never whether it needs to move them.)

Per head: `bytes_necessary`, the fewest bytes the same result needs per launch (the unit of
bytes_est), from each op class's `necessary` job (roofline/core/opclasses/) on each of the entry's shapes,
launch-weighted like bytes_est; `flops_necessary` where the useful FLOPs differ from those the kernel
issues; `avoidable_gain_pct`, the share of GPU time removing the avoidable bytes saves, on the same
regime share as expected_e2e_gain_pct. Pure: nothing printed or written.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from roofline.core import opclasses
from roofline.core.entry import Necessity
from roofline.core.opclasses.base import Necessary, NecessaryCtx

MEASURED_ONLY = ("the counters are the only evidence of this kernel's work (no shape): what it moves is measured, "
                 "whether it needs to is not; a trace with record_shapes (roofline topn TRACE) gives the shapes the "
                 "necessary rules read")
AVOIDABLE_MIN_FRAC = 0.02   # an avoidable part under 2% of the kernel's time is within the model's own error: none


@dataclass
class Assessment:
    """The entry's necessary work per launch, and what supports it."""
    bytes: float | None
    flops: float | None
    kinds: list = field(default_factory=list)       # the kinds of avoidable work found
    evidence: list = field(default_factory=list)
    missing: str | None = None
    removable: bool = False                          # every launch need not run
    levers: list = field(default_factory=list)      # (kind, text, evidence, its share of the avoidable bytes,
                                                     #  the kernels it removes as well)
    flops_dtype: str | None = None                   # the roof the necessary FLOPs run at (None: the kernel's)


def tp_degree(raw, env_tp: int | None = None) -> tuple[int | None, str]:
    """The run's tensor-parallel degree -> (degree or None, where it comes from / why it is not known), for
    the origin rule's weight shards (docs/method.md section 12), from:
    1. the env report's `tp` (the user's word);
    2. the group size of the Top-N's all-reduces (comm shapes, the collective record's `Group size`): a TP
       layer all-reduces its row-parallel partial sums over the TP group; several sizes: not known;
    3. the world size of a Top-N of several ranks (`ranks.world_size`, the traces' distributedInfo),
       taken as one TP group (a data- or pipeline-parallel world is larger: its all-reduces say the TP
       group, 2., and win).
    `tp` and an all-reduce group size that disagree: not known (the notes say both)."""
    raw = raw if isinstance(raw, dict) else {}
    sizes = sorted({s["group_size"] for e in raw.get("entries") or [] if isinstance(e, dict)
                    for s in (e["shapes"] if isinstance(e.get("shapes"), list) else [])   # a bad one: its entry's problem
                    if isinstance(s, dict) and s.get("coll") == "all_reduce"
                    and isinstance(s.get("group_size"), int) and not isinstance(s.get("group_size"), bool)
                    and s["group_size"] >= 1})
    unknown = "the run's tensor-parallel degree is not known"
    if env_tp is not None:
        if sizes and sizes != [env_tp]:
            return None, (f"{unknown}: the env report's tp {env_tp} and the group size of the run's all-reduces "
                          f"({', '.join(map(str, sizes))}) disagree")
        return env_tp, f"TP {env_tp}: the env report's tp"
    if len(sizes) == 1:
        return sizes[0], f"TP {sizes[0]}: the group size of the run's all-reduces (Top-N comm shapes)"
    if len(sizes) > 1:
        return None, f"{unknown}: its all-reduces have group sizes {', '.join(map(str, sizes))}"
    rk = raw.get("ranks") if isinstance(raw.get("ranks"), dict) else {}
    ws, ranks = rk.get("world_size"), rk.get("ranks")
    if isinstance(ws, int) and not isinstance(ws, bool) and ws >= 1 and isinstance(ranks, list) and len(ranks) > 1:
        return ws, f"TP {ws}: world_size {ws} of the Top-N's {len(ranks)} ranks, taken as one TP group"
    return None, f"{unknown} (no env report tp, a Top-N of one rank, no all-reduce group size)"


def context(topn, env, config, regime: str, w, e=None, chosen_i: int = 0) -> NecessaryCtx:
    steps = topn.n_decode_steps if regime == "decode" else topn.n_prefill_steps
    ev = topn.raw.get("trace_evidence") if isinstance(topn.raw, dict) else None
    raw = e.raw if e is not None and isinstance(e.raw, dict) else {}
    ops = raw.get("aten_ops") if isinstance(raw.get("aten_ops"), dict) else {}
    per = [r.candidates[min(chosen_i, len(r.candidates) - 1)].bytes_est for r in w.results]
    tp, tp_ev = tp_degree(topn.raw, env.tp)
    return NecessaryCtx(config=config, workload=dict(env.workload or {}), regime=regime, shapes=list(w.shapes),
                        launches=list(w.shape_launches) if w.shape_launches else None, steps=steps,
                        trace_evidence=ev if isinstance(ev, dict) else {}, dts=list(w.dts), weights=list(w.weights),
                        aten_ops=dict(ops), bytes_per_launch=sum(wt * b for wt, b in zip(w.weights, per)) or None,
                        tp=tp, tp_evidence=tp_ev, kernel=getattr(e, "name", None))


def assess(op_class: str, w, chosen_i: int, ctx: NecessaryCtx) -> Assessment:
    """Each shape through its class's necessary job (the model's own bytes where the class has
    none: they count every operand once, the fewest the op itself needs); launch-weighted."""
    oc = opclasses.get(op_class)
    hook = oc.necessary if oc is not None else None       # its rules, then its own job (None: the model's bytes)
    per: list[Necessary] = []
    measured = w.shape_source == "measured"
    for sh, dt, r in zip(w.shapes, w.dts, w.results):
        c = r.candidates[min(chosen_i, len(r.candidates) - 1)]
        if measured:
            # NB: counters stand in for a model: no shape to reason about, so whether the bytes are needed is
            # unknown (never "all of them": an ncu report alone of a materialised copy is not proof it must run)
            per.append(Necessary(None, missing=MEASURED_ONLY))
            continue
        n = hook(sh, dt, c.bytes_est, ctx) if hook is not None else None
        per.append(n if n is not None else Necessary(c.bytes_est))
    miss = [n.missing for n in per if n.bytes is None]
    a = Assessment(None, None)
    if miss:
        a.missing = "; ".join(dict.fromkeys(m or "the evidence is absent" for m in miss))
    else:
        a.bytes = sum(wt * n.bytes for wt, n in zip(w.weights, per))
        if any(n.flops is not None for n in per):
            a.flops = sum(wt * (n.flops if n.flops is not None else r.candidates[
                min(chosen_i, len(r.candidates) - 1)].flops_est) for wt, n, r in zip(w.weights, per, w.results))
    a.removable = all(n.removable for n in per)
    a.flops_dtype = next((n.flops_dtype for n in per if n.flops_dtype), None)
    # each kind's share of the avoidable bytes (launch-weighted): what its lever saves of the whole
    avoid: dict[str, float] = {}
    for wt, n, r in zip(w.weights, per, w.results):
        moved = r.candidates[min(chosen_i, len(r.candidates) - 1)].bytes_est
        if n.bytes is not None and n.kind != "as_modelled":
            avoid[n.kind] = avoid.get(n.kind, 0.0) + wt * max(0.0, moved - n.bytes)
    total = sum(avoid.values())
    for n in per:
        if n.kind != "as_modelled" and n.kind not in a.kinds:
            a.kinds.append(n.kind)
        for x in n.evidence:
            if x not in a.evidence:
                a.evidence.append(x)
        if n.lever and n.kind not in [lv[0] for lv in a.levers]:
            covers = frozenset().union(*(m.covers for m in per if m.kind == n.kind))
            a.levers.append((n.kind, n.lever, "; ".join(n.evidence), avoid.get(n.kind, 0.0) / total if total else None,
                             covers))
    return a


def time_kept(bytes_est: float, flops_est: float, bytes_nec: float, flops_nec: float, peak_bw: float,
              peak_flops: float | None, peak_flops_nec: float | None = None) -> float:
    """The share of a launch's time that stays when only the necessary work is done at the same
    efficiency: max(bytes/BW, FLOPs/peak) of the necessary work over that of the modelled work.
    NB: a memory-bound kernel keeps bytes_nec / bytes_est of its time, a compute-bound one the
    FLOP ratio; a launch with nothing necessary keeps none (it need not run). ``peak_flops_nec``: the
    roof of the necessary FLOPs where another kernel does them (a fused kernel's tensor cores)."""
    def t(b, f, pf):
        return max(b / peak_bw, (f / pf) if pf else 0.0)
    t0 = t(bytes_est, flops_est, peak_flops)
    pn = peak_flops_nec or peak_flops
    return min(1.0, t(bytes_nec, flops_nec, pn) / t0) if t0 > 0 else 1.0


def record(a: Assessment, model_bytes: float, model_flops: float, peak_bw: float, peak_flops: float | None,
           share_pct: float, notes: list[str], peaks=None, flops_issued: float | None = None) -> Necessity:
    """The entry's necessity: bytes_necessary / flops_necessary / necessary_evidence / avoidable_gain_pct
    (``share_pct``: the regime's share of the GPU time, what the gain is on; ``flops_issued``: stage C's
    issued FLOPs where counters gave them; ``peaks``: the roof of the necessary FLOPs where they run at
    another dtype's, a.flops_dtype)."""
    peak_flops_nec = peaks.compute_peak(a.flops_dtype) if peaks is not None and a.flops_dtype else None
    if a.bytes is None:
        notes.append(f"bytes_necessary unknown: {a.missing}")
        return Necessity(None, a.flops, list(a.evidence), None)
    flops_nec = a.flops if a.flops is not None else model_flops
    issued = flops_issued or model_flops
    kept = 0.0 if a.removable else time_kept(model_bytes, issued, a.bytes, flops_nec, peak_bw, peak_flops,
                                             peak_flops_nec)
    gain = share_pct * (1.0 - kept)
    avoidable = gain if (1.0 - kept) >= AVOIDABLE_MIN_FRAC else 0.0
    if a.kinds:
        notes.append(f"necessary work: {a.bytes / 1e6:.4g} MB per launch of the {model_bytes / 1e6:.4g} MB moved "
                     f"({', '.join(a.kinds)}): removing the rest saves {avoidable:.2f}% of GPU time")
    return Necessity(a.bytes, a.flops, list(a.evidence), avoidable)


def larger_gain(e: dict) -> float | None:
    """The larger of the tuning gain and the avoidable gain (None when neither is known)."""
    g = [x for x in (e.get("expected_e2e_gain_pct"), e.get("avoidable_gain_pct")) if x is not None]
    return max(g) if g else None

"""Build a profile_topN.json (docs/topn.md) from parsed profiler output.

Two sources feed the same builder: a PyTorch trace (:mod:`roofline.ingest.torch_trace`) and an
Nsight Compute report (:mod:`roofline.ingest.ncu`). Both reduce to *launches*: (kernel name,
duration, regime, linked op signature).

Steps and regimes, in order of precedence:
1. explicit ``decode_steps`` / ``prefill_steps``;
2. step ranges in the trace (record_function / user_annotation names matching ``decode_range`` /
   ``prefill_range``; kernels are placed by their GPU-side ``gpu_user_annotation`` interval, else by
   their launch's CPU time), counted per regime;
3. ``ProfilerStep#N`` ranges (torch.profiler's ``prof.step()``), all in ``default_regime``;
4. otherwise the whole window is assumed to be one step of ``default_regime``.
Whatever was assumed is written to ``notes`` (and the CLI echoes it to stderr).
"""
from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from roofline.core.classify import classify, is_library_kernel, is_splitk_reduce, short_name
from roofline.io.errors import RooflineError
from roofline.core.opclasses import trace_shape
from roofline.core import opclasses
from roofline.ingest.regime_shapes import _launch_neighbours, _regime_of_agg, window_regime
from roofline.ingest.splitk import _pair_splitk, _pair_splitk_py  # noqa: F401  (the split-K pairing)

REGIMES = ("decode", "prefill")
# the shape key of a split op: launches of the kernel per op call, each one that share of the op's work
# (TensorIterator splits an op whose byte offsets exceed 32 bits into sub-launches)
SPLIT_KEY = "op_launches"
UNSHAPED_TIME_MAX = 0.10   # unshaped launches holding more of a kernel's time than this: no shapes used


class TopNError(RooflineError):
    """The profiler output holds nothing to rank (e.g. no kernels)."""


@dataclass
class StepPlan:
    decode_steps: int | None = None
    prefill_steps: int | None = None
    default_regime: str = "decode"
    decode_range: str = "decode"      # regexes, case-insensitive
    prefill_range: str = "prefill"


@dataclass
class KernelAgg:
    name: str
    count: Counter = field(default_factory=Counter)        # regime -> launches
    total_us: Counter = field(default_factory=Counter)     # regime -> summed duration (us)
    sigs: Counter = field(default_factory=Counter)         # (sig idx, regime) -> launches
    launch_dims: Counter = field(default_factory=Counter)  # (grid, block) -> launches
    sig_us: Counter = field(default_factory=Counter)       # (sig idx, regime) -> summed duration (us)
    sig_calls: dict = field(default_factory=dict)          # (sig idx, regime) -> its op calls' External ids (SPLIT_KEY)
    folded: dict = field(default_factory=dict)             # split-K reduce name -> [launches, us]
    before: Counter = field(default_factory=Counter)       # kernel launched just before -> times
    after: Counter = field(default_factory=Counter)        # kernel launched just after -> times
    dataflow: dict | None = None                            # producers / consumers (roofline.ingest.evidence)
    unlinked: list = field(default_factory=lambda: [0, 0.0])  # launches linked to no op (not graph replays), us

    @property
    def all_us(self) -> float:
        return sum(self.total_us.values())

    @property
    def all_count(self) -> int:
        return sum(self.count.values())


def _regime_of_name(name: str, plan: StepPlan) -> str | None:
    if re.search(plan.decode_range, name, re.IGNORECASE):
        return "decode"
    if re.search(plan.prefill_range, name, re.IGNORECASE):
        return "prefill"
    return None


def aggregate_trace(pt, plan: StepPlan, graph_corr: set | None = None):
    """Per-kernel aggregates, steps per regime, and notes, from a ParsedTrace. ``graph_corr``: the
    correlation ids of the trace's CUDA-graph launches (roofline.ingest.graphs), to say how many
    steps replayed a graph."""
    notes: list[str] = list(pt.notes)   # what the readers' checks changed (roofline/ingest/trace_checks.py)
    if pt.n_kernels == 0:
        raise TopNError(f"the trace holds no GPU kernel events (cat 'kernel'; {pt.n_events} events read)")
    cpu_r, gpu_r, prof_steps = _step_ranges(pt, plan)
    if cpu_r or gpu_r:
        regime_of, steps = _regimes_from_ranges(pt, plan, cpu_r, gpu_r, notes, graph_corr)
    else:
        regime_of, steps = _regimes_without_ranges(pt, plan, prof_steps, notes)
    fold_into, extra_us = _splitk_folds(pt, notes)
    aggs, linked = _aggregate(pt, regime_of, fold_into, extra_us, graph_corr or set())
    _launch_neighbours(pt, aggs, fold_into)
    from roofline.ingest.evidence import dataflow

    flows = dataflow(pt, cpu_r, gpu_r, fold_into)
    for a in aggs:
        a.dataflow = flows.get(a.name)
    if not pt.sigs:
        notes.append("the trace has no record_shapes data (Input Dims): no shapes/dtypes filled; "
                     "profile with record_shapes=True (vLLM: VLLM_TORCH_PROFILER_RECORD_SHAPES=1)")
    else:
        notes.append(f"{linked} of {pt.n_kernels - len(fold_into)} kernel launches linked to the aten op that "
                     "launched them (External id)")
    if pt.mem:
        mem_ms = sum(pt.mem.values()) / 1000
        notes.append(f"memcpy/memset activity ({sum(pt.mem_count.values())} events, {mem_ms:.3f} ms) is not a kernel: "
                     "not in total_gpu_time_ms")
    return aggs, steps, notes


def _explicit(plan: StepPlan) -> dict:
    return {"decode": plan.decode_steps, "prefill": plan.prefill_steps}


def _step_ranges(pt, plan: StepPlan):
    """-> (CPU-side ranges per regime, GPU-side ranges per regime, names of ProfilerStep# ranges)."""
    cpu_r = defaultdict(list)
    gpu_r = defaultdict(list)
    prof_steps = set()
    for r in pt.ranges:
        if r.name.startswith("ProfilerStep#"):
            if not r.gpu:
                prof_steps.add(r.name)
            continue
        reg = _regime_of_name(r.name, plan)
        if reg is None:
            continue
        (gpu_r if r.gpu else cpu_r)[reg].append(r)
    return cpu_r, gpu_r, prof_steps


def step_ranges(pt, plan: StepPlan):
    """-> (CPU-side step ranges per regime, GPU-side ones per regime, ProfilerStep# names)."""
    return _step_ranges(pt, plan)


def _step_label(reg: str, n: int, cpu_r, gpu_r, graph: dict) -> str:
    """'decode: 7 x 'decode_step' (1 eager, 6 replaying a CUDA graph)': the count by range name
    (several names: each with its count), and how many steps ran a graph replay."""
    names = Counter(r.name for r in cpu_r[reg]) or Counter(r.name for r in {r.ext_id: r for r in gpu_r[reg]}.values())
    if len(names) == 1:
        label = f"{reg}: {n} x '{next(iter(names))}'"
    else:
        label = f"{reg}: {n} steps (" + ", ".join(f"{c} x '{nm}'" for nm, c in sorted(names.items())) + ")"
    g = graph.get(reg)
    if g:
        label += f" ({n - g} eager, {g} replaying a CUDA graph)"
    return label


def _regimes_from_ranges(pt, plan: StepPlan, cpu_r, gpu_r, notes: list[str], graph_corr=None):
    """Step ranges in the trace: each launch's regime (placed by the GPU-side ranges, else by its
    launch's CPU time; "outside" when in none) and the step count per regime."""
    from roofline.ingest.walltime import graph_steps

    steps: dict[str, int] = {}
    for reg in REGIMES:
        c = len(cpu_r[reg]) or len({r.ext_id for r in gpu_r[reg]})
        if c:
            steps[reg] = c
    use_gpu = any(gpu_r.values())   # NB: gpu_r is a defaultdict: the count above leaves empty lists in it
    regime_of, outside, outside_us = _place_launches(pt, gpu_r if use_gpu else cpu_r, use_gpu)
    if use_gpu and any(cpu_r.values()):
        regime_of, outside, outside_us = _cross_check(pt, cpu_r, gpu_r, regime_of, notes)
    where = "GPU-side ranges (gpu_user_annotation)" if use_gpu else "CPU-side ranges (launch time)"
    graph = graph_steps(pt, gpu_r, graph_corr) if graph_corr and use_gpu else {}
    notes.append("regimes and step counts from step ranges in the trace ("
                 + ", ".join(_step_label(k, v, cpu_r, gpu_r, graph) for k, v in steps.items())
                 + f"); kernels placed by {where}")
    if outside:
        notes.append(f"{outside} launches ({outside_us/1000:.3f} ms) ran outside any step range: counted in "
                     "total_gpu_time_ms and pct_gpu_time, not in regimes")
    explicit = _explicit(plan)
    for reg in REGIMES:
        if explicit[reg] is not None:
            if reg in steps and steps[reg] != explicit[reg]:
                notes.append(f"--{reg}-steps {explicit[reg]} overrides the {steps[reg]} {reg} ranges in the trace")
            steps[reg] = explicit[reg]
    return regime_of, steps


def _cross_check(pt, cpu_r: dict, gpu_r: dict, regime_of: list, notes: list[str]):
    """Each launch's GPU-side step against the CPU step range its launch call sits in. Where the
    regime has GPU step ranges they agree by construction (the profiler draws a GPU step range around
    the kernels its CPU range launched; a clock offset moves the ranges with the kernels): a launch
    outside its launching step's GPU range has left it (a damaged trace). Where the regime has no
    GPU step range (torch.compile draws its GPU ranges around compiled graphs, not steps), the CPU
    range is all there is. Either way the launching step places it, and the note says which.
    -> (regime of each launch, launches outside every range, their summed time in us)"""
    cpu_of, _, _ = _place_launches(pt, cpu_r, False)
    out = list(regime_of)
    moved = {True: [0, 0.0], False: [0, 0.0]}     # the CPU regime has GPU ranges -> [launches, us]
    for i, (g, c) in enumerate(zip(regime_of, cpu_of)):
        if c != "outside" and g != c:
            out[i] = c
            m = moved[bool(gpu_r.get(c))]
            m[0] += 1
            m[1] += pt.k_dur[i]
    n, us = moved[True]
    if n:
        notes.append(f"{n} launches ({us / 1000:.3f} ms) ran outside the GPU step range of the CPU step range that "
                     "launched them: their GPU timestamps left their own steps (a damaged trace: a clock offset moves "
                     "the step ranges with the kernels); placed by the launching step instead, and the steps' GPU "
                     "busy/idle split is not to be trusted")
    n, us = moved[False]
    if n:
        notes.append(f"{n} launches ({us / 1000:.3f} ms) of regimes with no GPU-side step range placed by the CPU "
                     "step range that launched them")
    gone = [i for i, r in enumerate(out) if r == "outside"]
    return out, len(gone), sum(pt.k_dur[i] for i in gone)


def _place_launches(pt, ranges: dict, use_gpu: bool):
    """-> (regime of each launch, launches outside every range, their summed time in us)."""
    ivs = []
    for reg, rs in ranges.items():
        ivs.extend((r.ts_us, r.ts_us + r.dur_us, reg) for r in rs)
    ivs.sort()
    starts = [a for a, _, _ in ivs]
    corr_ts = pt.corr_ts if not use_gpu else {}
    regime_of = []
    outside = 0
    outside_us = 0.0
    for i in range(pt.n_kernels):
        t = pt.k_ts[i] if use_gpu else corr_ts.get(pt.k_corr[i])
        reg = None
        if t is not None:
            j = bisect.bisect_right(starts, t) - 1
            if j >= 0 and t <= ivs[j][1]:
                reg = ivs[j][2]
        if reg is None:
            outside += 1
            outside_us += pt.k_dur[i]
            reg = "outside"
        regime_of.append(reg)
    return regime_of, outside, outside_us


def _regimes_without_ranges(pt, plan: StepPlan, prof_steps, notes: list[str]):
    """No step ranges: every launch in one regime (the one whose steps were given, else the one the
    shapes say, else the default), its steps given, else counted from ProfilerStep# ranges, else ONE
    (said so)."""
    explicit = _explicit(plan)
    given = [r for r in REGIMES if explicit[r] is not None]
    if len(given) == 2:
        raise TopNError("both --decode-steps and --prefill-steps given, but the trace has no step ranges "
                        f"matching {plan.decode_range!r} / {plan.prefill_range!r} to tell the regimes apart; "
                        "profile one regime per trace or name the ranges")
    reg = given[0] if given else plan.default_regime
    if not given:
        inferred, why = window_regime(pt)
        if inferred is not None:
            reg = inferred
            notes.append(f"ASSUMED: regime '{reg}' inferred from the shapes ({why}); pass --decode-steps or "
                         "--prefill-steps, or profile inside step ranges, to say it")
    steps: dict[str, int] = {}
    if given:
        steps[reg] = explicit[reg]
        notes.append(f"all kernels in regime '{reg}'; {steps[reg]} steps from --{reg}-steps")
    elif prof_steps:
        steps[reg] = len(prof_steps)
        notes.append(f"ASSUMED: all kernels in regime '{reg}' (no --decode-steps/--prefill-steps); "
                     f"{steps[reg]} steps counted from ProfilerStep# ranges")
    else:
        steps[reg] = 1
        notes.append(f"ASSUMED: all kernels in regime '{reg}' and the whole profiled window is ONE step "
                     "(no --decode-steps/--prefill-steps, no step ranges): launches_per_step = launches in "
                     "the window; pass --decode-steps N or --prefill-steps N")
    return [reg] * pt.n_kernels, steps


def _splitk_folds(pt, notes: list[str]):
    """split-K: a reduce launch is the second half of the GEMM launch just before it.
    -> (reduce launch -> the GEMM launch it folds into, GEMM launch -> the reduce time it adds)."""
    fold_into: dict[int, int] = {}
    extra_us: dict[int, float] = {}
    fold_arr = None
    if pt.n_kernels <= PY_SPLITK_MAX:     # a small trace: importing numpy (~0.1 s cold) costs more
        fold_into, extra_us = _pair_splitk_py(pt)
    else:
        fold_arr, extra_arr = _pair_splitk(pt)
    if fold_arr is not None:
        import numpy as np

        nz = np.nonzero(fold_arr >= 0)[0]
        fold_into = dict(zip(nz.tolist(), fold_arr[nz].tolist()))
        extra_us = dict(zip(fold_arr[nz].tolist(), extra_arr[fold_arr[nz]].tolist()))
    if fold_into:
        notes.append(f"split-K: {len(fold_into)} reduce launches folded into the GEMM launch each one "
                     "completes (the launch just before it); the pair is one logical op, timed as their sum")
    return fold_into, extra_us


def _agg_of(aggs: dict, pt, k: int) -> KernelAgg:
    a = aggs.get(k)
    if a is None:
        a = aggs[k] = KernelAgg(pt.kernel_names[k])
        a.launch_dims = pt.launch_dims.get(k, Counter())
    return a


def _aggregate(pt, regime_of: list, fold_into: dict, extra_us: dict, graph_corr=frozenset()):
    """Per kernel name: launches and time per regime, the linked op signatures, the folded
    split-K reduces, the launches linked to no op (CUDA-graph replays aside: they never link).
    -> (aggregates, launches linked to an op)."""
    aggs: dict[int, KernelAgg] = {}
    op_by_ext = pt.op_by_ext
    corr_ext = None                      # built only if some kernel lacks a linked External id
    linked = 0
    for i in range(pt.n_kernels):
        k = pt.k_name[i]
        if i in fold_into:
            a = _agg_of(aggs, pt, pt.k_name[fold_into[i]])
            f = a.folded.setdefault(pt.kernel_names[k], [0, 0.0])
            f[0] += 1
            f[1] += pt.k_dur[i]
            continue
        a = _agg_of(aggs, pt, k)
        reg = regime_of[i]
        dur = pt.k_dur[i] + extra_us.get(i, 0.0)
        a.count[reg] += 1
        a.total_us[reg] += dur
        ext = pt.k_ext[i]
        s = op_by_ext.get(ext) if ext >= 0 else None
        if s is None:
            if corr_ext is None:
                corr_ext = pt.corr_ext
            x = corr_ext.get(pt.k_corr[i])
            if x is not None:
                s, ext = op_by_ext.get(x), x
        if s is not None:
            a.sigs[(s, reg)] += 1
            a.sig_us[(s, reg)] += dur
            a.sig_calls.setdefault((s, reg), set()).add(ext)
            linked += 1
        elif pt.sigs and pt.k_corr[i] not in graph_corr:
            a.unlinked[0] += 1
            a.unlinked[1] += dur
    return list(aggs.values()), linked


PY_SPLITK_MAX = 50_000     # launches: below this the pairing runs in plain Python (same result)


def build_topn(aggs, steps, notes, *, sigs=None, top: int | None = 30, min_pct: float = 0.0,
               round_no: int = 0, source: dict | None = None) -> dict:
    """The Top-N document. ``aggs``: KernelAgg list; ``steps``: regime -> step count."""
    unnamed = [a for a in aggs if not a.name.strip()]
    if unnamed:
        # every profiler names the kernels it records: a kernel without one is a corrupt source, and
        # no entry may be named '' (docs/input_policy.md, "Profiler output")
        n = sum(a.all_count for a in unnamed)
        raise TopNError(f"{n} kernel launch(es) have an empty name ({sum(a.all_us for a in unnamed):.6g} us of "
                        "GPU time): expected every kernel event to carry the kernel's name")
    total_us = sum(a.all_us for a in aggs)
    if total_us <= 0:
        raise TopNError("the kernels' total GPU time is zero")
    aggs = sorted(aggs, key=lambda a: (-a.all_us, a.name))
    entries = []
    shown_us = 0.0
    for a in aggs:
        pct = 100.0 * a.all_us / total_us
        if (top is not None and len(entries) >= top) or pct < min_pct:
            break
        entries.append(_entry(a, pct, steps, sigs))
        shown_us += a.all_us
    notes = list(notes)
    if len(entries) < len(aggs):
        notes.append(f"{len(entries)} of {len(aggs)} kernel names listed, {100*shown_us/total_us:.2f}% of GPU time")
    serving = {"n_decode_steps": int(steps.get("decode", 0)), "n_prefill_steps": int(steps.get("prefill", 0))}
    doc = {
        "schema_version": 1,
        "round": round_no,
        "total_gpu_time_ms": total_us / 1000.0,
        "serving": serving,
        "entries": entries,
        "notes": notes,
    }
    if source:
        doc["source"] = source
    return doc


def _entry(a: KernelAgg, pct: float, steps: dict, sigs) -> dict:
    top_sig = None
    if a.sigs and sigs is not None:
        (s0, _), _ = a.sigs.most_common(1)[0]
        top_sig = sigs[s0]
    cls = classify(a.name, hint=top_sig.name if top_sig is not None else None)
    e = {"name": a.name, "short_name": short_name(a.name), "pct_gpu_time": round(pct, 6)}
    if cls != opclasses.FALLBACK:
        e["classification"] = cls
    if is_library_kernel(a.name):
        e["editable"] = False
    regimes = {}
    for reg in REGIMES:
        c = a.count.get(reg, 0)
        if c and steps.get(reg):
            regimes[reg] = {"base_latency_ms": a.total_us[reg] / c / 1000.0,
                            "launches_per_step": c / steps[reg]}
    if not regimes and steps:
        # every launch ran outside the step ranges: the regime its ops' shapes say (else the first
        # regime), and say so
        reg, why = _regime_of_agg(a, sigs)
        if reg not in steps:
            reg, why = ("decode" if "decode" in steps else next(iter(steps))), "no shape says; the first regime"
        c = a.all_count
        regimes[reg] = {"base_latency_ms": a.all_us / c / 1000.0, "launches_per_step": c / steps[reg]}
        e["regime_assumed"] = True
        e["regime_note"] = (f"every launch ran outside the step ranges: regime {reg} ASSUMED ({why}); "
                            f"launches_per_step = launches / {reg} steps")
    e["regimes"] = regimes
    # provenance (extra fields: the analysis ignores them)
    e["launches"] = a.all_count
    e["total_ms"] = a.all_us / 1000.0
    e["op_class"] = cls
    if a.launch_dims:
        (g, b), _ = a.launch_dims.most_common(1)[0]
        if g is not None:
            e["grid"] = list(g)
        if b is not None:
            e["block"] = list(b)
    if a.folded:
        e["folded_kernels"] = [{"name": nm, "short_name": short_name(nm), "launches": c, "total_ms": us / 1000.0}
                               for nm, (c, us) in sorted(a.folded.items())]
        e["timing_note"] = ("split-K: each launch's time includes its reduce kernel (folded_kernels): "
                            "one logical op")
    if a.before or a.after:
        e["launch_neighbours"] = {"before": dict(a.before), "after": dict(a.after)}
    if a.dataflow:
        e["dataflow"] = a.dataflow
    if a.unlinked[0]:
        n, c = a.unlinked[0], a.all_count
        e["link_note"] = (f"{n} of its {c} launches ({a.unlinked[1] / a.all_us:.0%} of its time) are linked to no aten "
                          "op (no External id, no correlation to a launch that has one): "
                          + (f"its shapes and dtypes are those of its {c - n} linked launches" if n < c
                             else "no captured shape"))
    if a.sigs and sigs is not None:
        _shapes_of(e, a, cls, steps, sigs)
    return e


def _shapes_of(e: dict, a: KernelAgg, cls: str, steps: dict, sigs) -> None:
    """The aten ops linked to the kernel's launches and the shapes they give (most launched first:
    shapes, launches, mean time, regimes, dtypes), or why no shape can be counted."""
    ops = Counter()
    # (shape, dtypes) -> [shape, launches, regimes, summed us, dtypes]
    shapes: dict[tuple, list] = {}
    unshaped = Counter()
    for (s, reg), c in a.sigs.most_common():
        sig = sigs[s]
        ops[sig.name] += c
        r = trace_shape(cls, sig)
        if r is None:
            unshaped[sig.name] += c
            continue
        shp, dt = r
        calls = len(a.sig_calls.get((s, reg)) or ())
        if calls and c > calls and SPLIT_KEY in opclasses.of(cls).shape_keys:    # a class whose model divides by it
            shp = dict(shp, **{SPLIT_KEY: round(c / calls, 3) if c % calls else c // calls})
        key = (tuple(sorted(shp.items())), tuple(sorted(dt.items())))
        if key not in shapes:
            shapes[key] = [shp, 0, set(), 0.0, dt]
        shapes[key][1] += c
        shapes[key][2].add(reg)
        shapes[key][3] += a.sig_us[(s, reg)]
    e["aten_ops"] = dict(ops.most_common())
    us_un = sum(a.sig_us[(s, reg)] for (s, reg) in a.sigs if trace_shape(cls, sigs[s]) is None) if unshaped else 0.0
    us_all = sum(a.sig_us.values())
    if shapes and us_all > 0 and us_un / us_all > UNSHAPED_TIME_MAX:
        # NB: the shaped launches are not the kernel's work when the unshaped ones hold its time: no
        # shapes are written (the analysis would take the shaped minority for the whole kernel)
        e["shape_unknown"] = (f"{us_un / us_all:.0%} of the kernel's linked launch time comes from ops with no "
                              f"shape rule ({', '.join(sorted(unshaped))}, op class {cls}): the shaped launches "
                              "do not represent its work")
        return
    if shapes:
        lst = sorted(shapes.values(), key=lambda x: -x[1])
        e["shapes"] = [x[0] for x in lst]
        e["shape_launches"] = [x[1] for x in lst]
        # NB: mean time of the linked launches of each shape; launches with no linked op (CUDA
        # graph replays) carry no shape and are not in it
        e["shape_base_latency_ms"] = [x[3] / x[1] / 1000.0 for x in lst]
        if len(steps) > 1 or any(x[2] != {next(iter(steps), None)} for x in lst):
            # NB: also with one regime when some shapes ran outside its step ranges ("outside"): the
            # analysis keeps those out of the regime's per-launch work
            e["shape_regimes"] = ["+".join(sorted(x[2])) for x in lst]
        dts = [x[4] for x in lst]
        if any(dts):
            e["dtypes"] = next(d for d in dts if d)     # the most launched shape's
            if any(d != dts[0] for d in dts):
                e["shape_dtypes"] = dts
    if unshaped and not shapes:
        e["shape_unknown"] = ("no shape rule for " + ", ".join(sorted(unshaped))
                              + f" (op class {cls}): the kernel's bytes cannot be counted from the trace")


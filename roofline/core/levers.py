"""Levers with their evidence (docs/method.md section 12): `levers_detail` = [{kind, text, evidence,
saves_pct}], and the contract's `byte_reduction_levers` strings drawn from it (saturated heads only;
other heads carry the same texts in `other_levers`). A lever is given only where the evidence
supports it:

* avoidable bytes (the op class's necessary job: a materialised broadcast, a re-copied cache,
  attention over empty slots or broadcast KV heads): saves avoidable_gain_pct;
* fusion: only a producer or consumer of the same tensor, launched next to it in the same step
  (Top-N `dataflow`, roofline.ingest.evidence), never mere adjacency; none with a kernel that an
  avoidable-bytes lever of this kernel removes as well (the other ops of an eager attention's score
  chain, which a fused attention does not launch: one lever per cause);
* stop reading unrouted experts: the MoE model's experts_hit below E;
* padding: issued tensor work (counters) above the useful 2·rows·N·K;
* lower-precision weights / KV: only where bytes bind (memory-bound), on the operand the class's
  origin rule says is a weight or the KV cache (opclasses/origin.py), saving at least 10% of the
  kernel's bytes; fp8 math: only where compute binds (compute-bound at a 16-bit roof).
Pure: nothing printed or written."""
from __future__ import annotations

from roofline.core import opclasses

MAX_FUSE_LEVERS = 5
PADDING_MIN = 1.05          # issued / useful above this: padding worth naming
# the kinds that make the kernel move fewer bytes or do fewer FLOPs (byte_reduction_levers)
BYTE_KINDS = ("materialised_broadcast", "reference_path", "materialised_scores", "cache_append", "cache_window", "kv_heads_broadcast", "empty_slots",
              "fusion", "stop_reading_experts", "padding", "lower_precision_weights", "lower_precision_kv",
              "fp8_math")


def _lever(kind: str, text: str, evidence: str, saves_pct: float | None) -> dict:
    return {"kind": kind, "text": text, "evidence": evidence, "saves_pct": saves_pct}


def _share(out: dict) -> float:
    return float(out.get("regime_pct_gpu_time", out.get("pct_gpu_time", 0.0)) or 0.0)


def fusion(out: dict, me: dict, all_light: list[dict], covered: frozenset = frozenset()) -> list[dict]:
    """Fusable Top-N kernels that produce a tensor this kernel reads, or consume the one it writes (none
    that an avoidable-bytes lever of this kernel removes as well: `covered`)."""
    flow = me.get("dataflow") or {}
    partners = {**{n: "producer" for n in flow.get("producers") or {}}, **{n: "consumer" for n in flow.get("consumers") or {}}}
    ex = flow.get("examples") or {}
    cands = sorted((o for o in all_light if o.get("name") in partners and o.get("name") != out.get("name")
                    and o.get("name") not in covered and opclasses.of(opclasses.kind_of(o)).fusable),
                   key=lambda o: -o["pct_gpu_time"])
    lv = []
    for o in cands[:MAX_FUSE_LEVERS]:
        kind = opclasses.kind_of(o)
        lv.append(_lever("fusion", f"fuse {o['short_name']} ({kind}, {o['pct_gpu_time']:.2f}% GPU) into this kernel: "
                         "removes an activation round-trip and that kernel's own time",
                         f"{partners[o['name']]} of the same tensor: {ex.get(o['name'], 'matching shapes, launched next to it')}",
                         o["pct_gpu_time"]) | {"partner": o["name"]})
    if len(cands) > MAX_FUSE_LEVERS:
        rest = cands[MAX_FUSE_LEVERS:]
        lv.append(_lever("fusion", f"fuse: {len(rest)} more small fusable producers/consumers in the Top-N "
                         f"({sum(o['pct_gpu_time'] for o in rest):.2f}% GPU together)",
                         "producers / consumers of the same tensors (dataflow)", sum(o["pct_gpu_time"] for o in rest)))
    return lv


def precision(out: dict, op: str, dt: dict, ctx=None, notes: list[str] | None = None) -> list[dict]:
    """Lower precision where bytes bind: of the operand the class's precision_levers say is a weight or
    the KV cache (its origin rule, opclasses/origin.py), saving its share of the bytes (a memory-bound
    kernel's time goes with its bytes); none where the origin is unknown (the notes say what is missing).
    fp8 math where compute binds (a class with tensor math: weight or KV operands, dtype_roles)."""
    bound, share = out.get("bound_type"), _share(out)
    oc = opclasses.of(op)
    ev = f"{bound}-bound: hbm_util {out.get('hbm_util', 0):.2f}, compute_util {out.get('compute_util', 0):.2f}"
    if bound == "memory" and oc.precision_levers is not None and ctx is not None:
        return [_lever(kind, text, f"{ev}; {why}", share * frac if frac is not None else None)
                for kind, text, why, frac in oc.precision_levers(out, dt, ctx, notes if notes is not None else [])]
    if bound == "compute" and oc.dtype_roles and out.get("compute_dtype") in ("bf16", "fp16"):
        return [_lever("fp8_math", f"fp8 math ({out['compute_dtype']} -> fp8): the fp8 tensor roof is twice the "
                       f"{out['compute_dtype']} one, so the compute-bound time can halve; LOSSY, must pass the "
                       "accuracy gate", ev, share * 0.5)]
    return []


def experts(out: dict, op: str, info: dict) -> list[dict]:
    """What the class's kernel reads that the work does not use (its stop_reading_levers: an MoE's
    unrouted experts), with the model's count as evidence."""
    oc = opclasses.of(op)
    if not oc.has("stop_reading_levers"):
        return []
    hit, E = info.get("experts_hit"), info.get("E")
    return [_lever("stop_reading_experts", t, f"experts_hit model: {hit:.1f} of {E} experts for the entry's rows", None)
            for t in oc.stop_reading_levers(out, info)]


def padding(out: dict) -> list[dict]:
    """Issued vs useful tensor work (stage-C or ncu counters): the padding of a grouped / tiled GEMM."""
    issued, useful = out.get("flops_issued"), out.get("flops_est")
    if not issued or not useful or issued / useful <= PADDING_MIN:
        return []
    r = issued / useful
    sh = out.get("shape") or {}
    rows = ""
    if sh.get("pairs") and sh.get("E"):
        rows = (f"; about {sh['pairs'] / sh['E']:.1f} rows per expert on average: tile rows beyond a group's own "
                "rows are issued work on padding")
    saves = _share(out) * (1 - 1 / r) if out.get("bound_type") == "compute" else 0.0
    return [_lever("padding", f"padding: the hardware issued {r:.2f}x the useful FLOPs (tile padding); remove it "
                   "(smaller or swapped tiles for few rows per group, pack rows across groups)",
                   f"counters: {issued:.4g} issued tensor FLOPs vs {useful:.4g} useful (2 x rows x N x K){rows}"
                   + ("" if out.get("bound_type") == "compute" else "; not compute-bound: it costs no time now"),
                   saves)]


def detail(out: dict, op: str, necessary_levers: list, me: dict, all_light: list[dict], info: dict,
           dt: dict, ctx=None, notes: list[str] | None = None) -> list[dict]:
    """Every lever of one entry with its evidence and what it saves (% of GPU time)."""
    gain = out.get("avoidable_gain_pct")
    # NB: each avoidable-bytes lever saves its kind's share of the avoidable bytes (necessary.assess)
    lv = [_lever(k, t, ev, gain * frac if gain is not None and frac is not None else None)
          for k, t, ev, frac, *_ in necessary_levers]
    # NB: one lever per cause: a partner the avoidable-bytes lever removes as well (the other ops of an
    # eager attention's score chain, which a fused attention does not launch) gets no fusion lever
    covered = frozenset().union(*(x[4] for x in necessary_levers if len(x) > 4))
    skipped = {n for n in covered if n in ((me.get("dataflow") or {}).get("producers") or {})
               or n in ((me.get("dataflow") or {}).get("consumers") or {})}
    if skipped and notes is not None:
        notes.append(f"no fusion lever with {len(skipped)} producer(s) / consumer(s) the "
                     f"{', '.join(x[0] for x in necessary_levers if len(x) > 4 and x[4])} lever removes as well")
    lv += fusion(out, me, all_light, covered)
    lv += experts(out, op, info) + padding(out) + precision(out, op, dt, ctx, notes)
    return lv


def apply(out: dict, op: str, necessary_levers: list, all_light: list[dict], info: dict, dt: dict, ctx=None,
          notes: list[str] | None = None, other: list | None = None) -> tuple[list, list, list]:
    """(levers_detail, byte_reduction_levers, other_levers) of the entry `out`: the detail's texts are the
    contract's byte_reduction_levers on a saturated head; on any other head they go in front of
    `other` (the routing's other_levers)."""
    me = next((o for o in all_light if o.get("name") == out.get("name")), {})
    lv = detail(out, op, necessary_levers, me, all_light, info, dt, ctx, notes)
    texts = [d["text"] for d in lv if d["kind"] in BYTE_KINDS]
    if out.get("headroom_class") == "saturated":
        return lv, texts, list(other or [])
    return lv, [], texts + [x for x in other or [] if x not in texts]

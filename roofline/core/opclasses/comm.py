"""Op class "comm": collective kernels (NCCL's ncclDevKernel_*, custom all-reduce kernels) on the
interconnect roof.

Model: roofline/core/models/collective.py (the bytes one rank sends over its links, nccl-tests' bus
bandwidth convention). Roof: the peak table's interconnect figure (`interconnect_bw_bytes_s`), not
HBM. Shapes: `coll` (all_reduce, all_gather, ...), `nelems` (message elements), `group_size`
(ranks), optionally `algo` (RING, TREE, NVLS: from the kernel name); `roofline topn` writes them
from the collective record Kineto attaches to the kernel (roofline/ingest/collectives.py). Stage A
guesses no message size. Stage C: no GEMM re-run.

In the procedure (docs/method.md, "Collectives" and "Several ranks"):
Collectives (op class comm) in the procedure: the roof their memory axis is judged against, the
part of a collective kernel's time that is transfer (what the roof judges) and the part that is
waiting for the last rank to arrive (what it does not), and their levers. docs/method.md,
"Collectives" and "Several ranks".

A collective kernel on one rank starts when that rank gets there and ends when the exchange is
done, so its time = waiting for the slowest rank + transfer. With every rank's trace, `roofline
topn` aligns the ranks' collectives (the Nth all-reduce on each rank) and writes, per collective
kernel, its transfer time per launch (`collective.transfer_ms_per_launch`). The roofline is then
taken on the transfer part only; the attainable speedup of the KERNEL is what a link at
target efficiency gives when only the transfer shrinks (waiting stays), so that `pct_gpu_time x
(1 - 1/attainable)` is still the run's time saved. From one trace the two cannot be told apart:
the whole kernel time is judged, and the notes say so. Pure functions."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from roofline.core.models import collective as _model
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, register

# the byte-reduction lever of a saturated collective (the fuse / layout levers of HBM kernels do not apply)
COMM_BYTE_LEVER = ("fewer bytes on the link: reduce or gather in a narrower dtype (e.g. an fp8 all-reduce); LOSSY, "
                   "must pass the accuracy gate")


@job("fill", "comm")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    # NB: no guess: the message size and the group are the trace's (or the Top-N writer's) to give
    return ("coll", "nelems", "group_size")


@dataclass
class CommSplit:
    """One collective kernel's per-launch time as transfer + waiting (ms)."""
    t_kernel_ms: float
    t_transfer_ms: float
    t_waiting_ms: float
    waiting_share: float


def _pos(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


@job("judged_time", "comm")
def transfer_split(e, reg, notes: list[str]) -> tuple:
    """The regime record the roofline judges (the transfer part of each launch) and the split, or
    (reg, None) when the Top-N holds no transfer time (one trace). `e`: a roofline.core.inputs.Entry, `reg` its
    Regime (not imported: roofline.core.inputs reads the registry). The transfer per launch is the
    median over the ranks of each rank's mean transfer (`collective.transfer_ms_per_launch`)."""
    c = e.raw.get("collective") if isinstance(e.raw, dict) else None
    t_x = _pos(c.get("transfer_ms_per_launch")) if isinstance(c, dict) else None
    if t_x is None:
        notes.append("collective judged on its whole kernel time: from one trace the wait for the other ranks "
                     "cannot be told from the transfer (give every rank's trace to `roofline topn`)")
        return reg, None
    t = reg.base_latency_ms
    t_x = min(t_x, t)
    sp = CommSplit(t, t_x, t - t_x, (t - t_x) / t)
    notes.append(f"collective: the transfer takes {t_x * 1e3:.2f} of its {t * 1e3:.2f} us per launch (median over the "
                 f"ranks of their aligned collectives); the other {sp.waiting_share:.1%} is waiting for the last rank "
                 "to arrive, which the roofline does not judge")
    return replace(reg, base_latency_ms=sp.t_transfer_ms), sp


@job("kernel_speedup", "comm")
def kernel_speedup(sp: CommSplit | None, s_transfer: float | None, notes: list[str]) -> float | None:
    """The attainable speedup of the whole kernel when only its transfer gets s_transfer x faster."""
    if sp is None or s_transfer is None:
        return s_transfer
    s = sp.t_kernel_ms / (sp.t_waiting_ms + sp.t_transfer_ms / s_transfer)
    notes.append(f"attainable: the transfer {s_transfer:.3g}x faster leaves the waiting, so the kernel is {s:.3g}x "
                 "faster (the e2e gain counts the kernel)")
    return s


def levers(out: dict) -> list[str]:
    """Levers of a collective (other_levers): the waiting is a balance problem, small transfers a
    latency one, large ones the link's; none of them is kernel tuning of the HBM kind."""
    lv = []
    w = out.get("waiting_share")
    if isinstance(w, (int, float)) and w >= 0.1:
        lv.append(f"balance the ranks: {w:.0%} of this collective's time is waiting for the last rank (the "
                  "straggler named in the artifact's `ranks`); even out the work or the host-side stalls before it")
    if out.get("bound_type") == "latency":
        lv.append("small messages are latency-bound: a one-shot / custom all-reduce (vLLM, SGLang) or fusing the "
                  "collective with its neighbour (all-reduce + norm) cuts the fixed cost")
    lv.append("overlap the collective with independent compute (a second stream, or split the GEMM before it)")
    return lv


@job("finish_levers", "comm")
def finish_levers(out: dict, lv, all_entries: list[dict], info: dict, dt: dict):
    """A collective's levers replace the HBM kinds' (fuse / layout do not apply to a link)."""
    return replace(lv, byte_reduction_levers=[COMM_BYTE_LEVER] if out["headroom_class"] == "saturated" else [],
                   other_levers=levers(out))


register(OpClass(
    "comm", roof="interconnect",
    # NB: the contract's closed op_class enum has no collective: `op_class` says unknown (the contract's word for
    # "no class of mine"), `op_kind` says comm and the collective analysis keeps its own fields
    # (memory_roof, t_transfer_ms, waiting_share, ...)
    seed_class="unknown",
    # NCCL, vLLM/SGLang custom all-reduce, NVSHMEM, DeepEP (first: nothing else may claim them)
    name_rules=((10, r"nccl|all_?reduce|allreduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall|"
                     r"cross_device_reduce|custom_?ar|one_?shot_|two_?shot_|multimem|nvshmem|deep_?ep"),),
    op_rules=((50, r"nccl|all_reduce|all_gather|reduce_scatter|c10d"),),
    hint_aliases=("collective", "communication"),
    target_eff={"comm": 0.80},   # NB: no source figure; a collective's bus bandwidth against one direction of the
                                 # link: large NCCL all-reduces over NVLink reach roughly 0.8 of it (protocol
                                 # overhead, channel count), small ones far less (latency); a prior, corrected by
                                 # `roofline playbook`
    shape_keys=frozenset({"coll", "nelems", "group_size", "algo"}), dim_keys=frozenset({"nelems", "group_size"}),
    missing_hint=(": a collective's message size and group come from the trace's collective record (Kineto writes "
                  "'In msg nelems', 'Out msg nelems', 'Group size' and 'dtype' on the NCCL kernel; `roofline topn` "
                  "copies them) or an est_shape in the Top-N")))
job("model", "comm")(_model.model)

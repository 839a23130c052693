"""Collectives (all-reduce, all-gather, reduce-scatter, ...) on the interconnect roof.

The roof of a collective kernel is the link between the GPUs (NVLink), not HBM: the model counts
the bytes ONE rank sends over its links for one collective, in the convention of nccl-tests' bus
bandwidth (NVIDIA/nccl-tests, doc/PERFORMANCE.md), so that bytes / t is that rank's bus bandwidth
and is compared with the per-direction link rate (docs/method.md, "Collectives").

With S the message size in bytes (the larger of the input and output buffers: the full tensor an
all-reduce reduces, the gathered output of an all-gather, the full input of a reduce-scatter) and
n ranks in the group:

    all_reduce               2 (n-1)/n x S    ring: a reduce-scatter then an all-gather
    all_gather, reduce_scatter, all_to_all    (n-1)/n x S    each rank sends all but its own 1/n
    broadcast, reduce, send, recv, send_recv  1 x S          the message crosses each link once

NB: this is the RING algorithm's traffic, whatever algorithm NCCL picked (the kernel name says:
RING, TREE, NVLS, ...): a tree moves about the same per rank; NVLink SHARP (NVLS) reduces in the
switch, so each rank sends only ~S and the ring figure over-counts (the entry's notes say so).
FLOPs: the reductions, (n-1)/n x elements adds per rank for all_reduce / reduce_scatter (n-1 chunk
sums of N/n elements), N for reduce, none otherwise; on CUDA cores (fp32 roof), far left of any
ridge. HBM traffic of the kernel (reading the input, writing the output) is not counted: the link
is the narrower roof (450 GB/s per direction against 4.8 TB/s of HBM on an H200).
"""
from __future__ import annotations

from roofline.io.errors import EntryError
from roofline.core.models import Candidate, ModelResult

# collective -> (bus factor as a function of n, adds per element as a function of n, what it assumes)
_BUS = {
    "all_reduce": (lambda n: 2.0 * (n - 1) / n, lambda n: (n - 1) / n,
                   "ring all-reduce: each rank sends 2(n-1)/n of the message"),
    "all_gather": (lambda n: (n - 1) / n, lambda n: 0.0, "all-gather: each rank sends (n-1)/n of the gathered output"),
    "reduce_scatter": (lambda n: (n - 1) / n, lambda n: (n - 1) / n,
                       "reduce-scatter: each rank sends (n-1)/n of the full input"),
    "all_to_all": (lambda n: (n - 1) / n, lambda n: 0.0, "all-to-all: each rank sends (n-1)/n of its input"),
    "broadcast": (lambda n: 1.0, lambda n: 0.0, "broadcast: the message crosses each link once (ring pipeline)"),
    "reduce": (lambda n: 1.0, lambda n: 1.0, "reduce: the message crosses each link once (ring pipeline)"),
    "send": (lambda n: 1.0, lambda n: 0.0, "send: the message crosses one link once"),
    "recv": (lambda n: 1.0, lambda n: 0.0, "recv: the message crosses one link once"),
    "send_recv": (lambda n: 1.0, lambda n: 0.0, "send/recv: the message crosses one link once"),
}
COLLECTIVES = tuple(_BUS) + ("barrier",)


def bus_factor(coll: str, n: int) -> float:
    """Bytes one rank sends per byte of message (nccl-tests' bus-bandwidth factor)."""
    return _BUS[coll][0](n)


def model(shape: dict, dt: dict) -> ModelResult:
    coll = str(shape["coll"])
    n = int(shape["group_size"])
    nelems = int(shape["nelems"])
    if coll == "barrier":
        raise EntryError("a barrier moves no data: there is no transfer to put on the link roof")
    if coll not in _BUS:
        raise EntryError(f"collective {coll!r} has no byte model (known: {', '.join(COLLECTIVES)})")
    if n < 2:
        raise EntryError(f"a group of {n} rank moves nothing over the interconnect")
    msg_bytes = nelems * dt["act_bytes"]
    factor, adds, why = _BUS[coll]
    nbytes = factor(n) * msg_bytes
    flops = adds(n) * nelems
    assumptions = [f"{why} (n={n}, message {msg_bytes / 1e6:.4g} MB; bus factor {factor(n):.4g})"]
    algo = str(shape.get("algo") or "").upper()
    if algo.startswith("NVLS"):
        assumptions.append("the kernel ran NVLS (NVLink SHARP: the switch reduces), so each rank sends ~1x the "
                           "message: the ring bytes over-count and the roofline % reads high")
    return ModelResult([Candidate("ring", nbytes, flops, note=f"{factor(n):.4g} x {msg_bytes:.6g} B")],
                       compute_dtype="fp32", assumptions=assumptions,
                       info={"coll": coll, "group_size": n, "message_bytes": msg_bytes, "bus_factor": factor(n)})

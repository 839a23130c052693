"""Shapes of CUDA-graph replays from the graph's capture (docs/method.md section 13).

A kernel replayed from a CUDA graph (torch.compile mode="reduce-overhead", serving engines) has no
launching cpu_op: its launch is the cudaGraphLaunch, so no External id links it to recorded arguments.
Where the profiled window also holds the graph's capture (or any call of the same generated kernel
outside a graph), the launcher of an inductor kernel is a cpu_op named exactly like the kernel, carrying
its Input Dims / Strides / Concrete Inputs: the replayed launches take those signatures (one kernel name
is one generated kernel with one set of static shapes in a graph). Other kernels (cuBLAS, cuDNN) are
launched under an aten op whose kernel the capture does not name: they keep no shape, and the entry
says what would give one (roofline.core.shapes)."""
from __future__ import annotations

from collections import Counter


def capture_shapes(pt, aggs, graph_corr, notes: list | None = None) -> int:
    """Give every kernel with no linked launch the signatures of cpu_ops named like it (an inductor
    launcher recorded at capture); -> kernels so given."""
    if not graph_corr or not pt.sigs:
        return 0
    by_name: dict[str, list[int]] = {}
    for i, s in enumerate(pt.sigs):
        if s.name.startswith("triton_"):
            by_name.setdefault(s.name, []).append(i)
    n = 0
    for a in aggs:
        if a.sigs or a.name not in by_name:
            continue
        sigs = Counter({s: 1 for s in by_name[a.name]})
        (s0, _), = sigs.most_common(1)
        for reg, c in a.count.items():
            a.sigs[(s0, reg)] += c
            a.sig_us[(s0, reg)] += a.total_us[reg]
        a.unlinked = [0, 0.0]
        n += 1
    if n and notes is not None:
        notes.append(f"{n} kernels replayed from a CUDA graph take the arguments of the cpu_op named like the kernel (its "
                     "launcher, recorded at the graph's capture or an eager call in the window: roofline.ingest.graph_capture)")
    return n

"""Split-K reduce launches paired with the GEMM launch each completes (roofline.ingest.topn folds
their time into it): a vectorised path for big traces and a plain-Python one for small traces."""
from __future__ import annotations

from roofline.core import opclasses
from roofline.core.classify import classify, is_splitk_reduce


def _pair_splitk_py(pt) -> tuple[dict[int, int], dict[int, float]]:
    """_pair_splitk's pairing in plain Python, as dicts: in GPU start order (stable), each reduce
    launch folds into the launch just before it that is not a reduce, when that one is a GEMM
    launch no earlier reduce took."""
    names = pt.kernel_names
    red = {k for k, nm in enumerate(names) if is_splitk_reduce(nm)}
    if not red:
        return {}, {}
    gemm = {k for k, nm in enumerate(names) if k not in red and opclasses.of(classify(nm)).folds_splitk_reduce}
    kn, ts, dur = pt.k_name, pt.k_ts, pt.k_dur
    fold_into: dict[int, int] = {}
    extra_us: dict[int, float] = {}
    prev = -1
    for i in sorted(range(pt.n_kernels), key=ts.__getitem__):
        if kn[i] not in red:
            prev = i
        elif prev >= 0 and kn[prev] in gemm and prev not in extra_us:
            fold_into[i] = prev
            extra_us[prev] = float(dur[i])
    return fold_into, extra_us


def _pair_splitk(pt):
    """Split-K reduce launches -> the GEMM launch each completes, as two arrays over launches
    (fold_to[i] = the GEMM launch reduce i folds into, else -1; extra_us[j] = reduce time added to
    GEMM launch j), or (None, None) when the trace has no split-K reduce kernel.

    NB: a reduce kernel is paired with the kernel launched just before it (by GPU start time)
    when that one is a GEMM; this holds on one stream, and in CUDA-graph replays, where no
    External id links the pair. Vectorised: a 500 MB trace has ~10^5 launches."""
    import numpy as np

    names = pt.kernel_names
    red = [k for k, nm in enumerate(names) if is_splitk_reduce(nm)]
    if not red:
        return None, None
    gemm = [k for k, nm in enumerate(names) if k not in red and opclasses.of(classify(nm)).folds_splitk_reduce]
    kn = np.frombuffer(pt.k_name, dtype=np.int64) if pt.k_name.itemsize == 8 else np.asarray(pt.k_name)
    order = np.argsort(np.frombuffer(pt.k_ts, dtype=np.float64), kind="stable")
    sn = kn[order]
    is_red = np.isin(sn, red)
    pos = np.where(is_red, -1, np.arange(len(sn)))
    prev = np.maximum.accumulate(pos)                 # last non-reduce position at or before each
    rpos = np.nonzero(is_red)[0]
    pprev = prev[rpos]
    ok = (pprev >= 0)
    ok[ok] = np.isin(sn[pprev[ok]], gemm)
    rpos, pprev = rpos[ok], pprev[ok]
    _, first = np.unique(pprev, return_index=True)     # one reduce per GEMM launch
    rpos, pprev = rpos[first], pprev[first]
    fold_to = np.full(len(sn), -1, dtype=np.int64)
    fold_to[order[rpos]] = order[pprev]
    extra_us = np.zeros(len(sn), dtype=np.float64)
    extra_us[order[pprev]] = np.frombuffer(pt.k_dur, dtype=np.float64)[order[rpos]]
    return fold_to, extra_us

"""What a trace says beyond its step ranges: the regime its ops' shapes say (a window with no
step ranges; a kernel whose every launch ran outside them) and which kernels run next to which in
the launch stream (the producers and consumers a fusion lever may name)."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from roofline.opclasses import trace_shape

if TYPE_CHECKING:  # pragma: no cover
    from roofline.ingest.topn import KernelAgg

# Regime from shapes (docs/method.md section 3): a decode step feeds each sequence ONE new token, so
# its attention has q_len 1 and its GEMMs have as many rows as sequences in the batch; a prefill
# step feeds whole prompts. Attention decides where the trace has it; GEMM rows otherwise.
DECODE_Q_LEN_MAX = 1           # q_len <= this: decode (speculative decoding's few draft tokens are not inferred)
PREFILL_Q_LEN_MIN = 16         # q_len >= this: prefill
PREFILL_GEMM_ROWS_MIN = 2048   # a GEMM of this many rows or more: prefill (decode batches above 2048 are rare)
DECODE_GEMM_ROWS_MAX = 512     # a GEMM of this many rows or fewer: decode


def regime_of_sig(sig) -> tuple[str | None, str]:
    """The regime an op's own shape says, with the evidence; (None, "") when it says nothing."""
    for cls in ("attn", "gemm"):
        r = trace_shape(cls, sig)
        if r is None:
            continue
        shp = r[0]
        if cls == "attn" and "q_len" in shp:
            q = shp["q_len"]
            if q <= DECODE_Q_LEN_MAX:
                return "decode", f"attention q_len {q}"
            if q >= PREFILL_Q_LEN_MIN:
                return "prefill", f"attention q_len {q}"
        if cls == "gemm" and "M" in shp and "batch" not in shp:
            m = shp["M"]
            if m >= PREFILL_GEMM_ROWS_MIN:
                return "prefill", f"GEMM of {m} rows"
            if m <= DECODE_GEMM_ROWS_MAX:
                return "decode", f"GEMM of {m} rows"
    return None, ""


def window_regime(pt) -> tuple[str | None, str]:
    """The regime of a window with no step ranges, from what its recorded ops' shapes say:
    attention ops first (q_len), GEMM rows otherwise; the majority of the ops that say something."""
    votes = {"attn": Counter(), "gemm": Counter()}
    why: dict[tuple, str] = {}
    for sig in getattr(pt, "sigs", []) or []:
        reg, ev = regime_of_sig(sig)
        if reg is None:
            continue
        kind = "attn" if ev.startswith("attention") else "gemm"
        votes[kind][reg] += 1
        why.setdefault((kind, reg), ev)
    for kind in ("attn", "gemm"):
        if votes[kind]:
            reg, n = votes[kind].most_common(1)[0]
            return reg, (f"{n} of {sum(votes[kind].values())} recorded {'attention' if kind == 'attn' else 'GEMM'} "
                         f"op shapes say {reg} (e.g. {why[(kind, reg)]})")
    return None, ""


def _regime_of_agg(a: KernelAgg, sigs) -> tuple[str | None, str]:
    """The regime a kernel's linked ops' shapes say, by launches."""
    if not a.sigs or sigs is None:
        return None, "no linked op"
    votes, ev = Counter(), {}
    for (s, _), c in a.sigs.items():
        reg, why = regime_of_sig(sigs[s])
        if reg is not None:
            votes[reg] += c
            ev.setdefault(reg, why)
    if not votes:
        return None, "its ops' shapes say nothing"
    reg = votes.most_common(1)[0][0]
    return reg, f"shapes: {ev[reg]}"


NEIGHBOURS_KEPT = 4


def _launch_neighbours(pt, aggs, fold_into: dict) -> None:
    """Per kernel name, the kernels launched just before and just after its launches (GPU start
    order; folded split-K reduces skipped): the producers and consumers a fusion lever may name."""
    if pt.n_kernels < 2:
        return
    if pt.n_kernels <= 50_000:      # a small trace: a stable sort in Python beats importing numpy (~0.1 s)
        order = sorted(range(pt.n_kernels), key=pt.k_ts.__getitem__)
    else:
        import numpy as np

        order = np.argsort(np.frombuffer(pt.k_ts, dtype=np.float64), kind="stable").tolist()
    seq = [pt.k_name[i] for i in order if i not in fold_into]
    idx = {a.name: a for a in aggs}
    before: dict[int, Counter] = defaultdict(Counter)
    after: dict[int, Counter] = defaultdict(Counter)
    for x, y in zip(seq, seq[1:]):
        if x != y:
            after[x][y] += 1
            before[y][x] += 1
    names = pt.kernel_names
    for k in set(before) | set(after):
        a = idx.get(names[k])
        if a is not None:
            a.before = Counter({names[j]: c for j, c in before[k].most_common(NEIGHBOURS_KEPT)})
            a.after = Counter({names[j]: c for j, c in after[k].most_common(NEIGHBOURS_KEPT)})

"""What a trace says beyond its step ranges: the regime its ops' shapes say (a window with no
step ranges; a kernel whose every launch ran outside them) and which kernels run next to which in
the launch stream (the producers and consumers a fusion lever may name)."""
from __future__ import annotations

from collections import Counter, defaultdict

from roofline.core.opclasses import regime_voters, trace_shape


# Regime from shapes (docs/method.md section 3): each class that can tell says it from its recorded
# ops' shapes (roofline/core/opclasses/, `regime_vote`: attention by q_len, then GEMM rows), in rank order.


def _vote(sig) -> tuple[str | None, str, str | None]:
    """(regime, evidence, the voting class) an op's own shape says; (None, "", None) when it says nothing."""
    for oc in regime_voters():
        r = trace_shape(oc.name, sig)
        v = oc.regime_vote(r[0]) if r is not None else None
        if v is not None:
            return v[0], v[1], oc.name
    return None, "", None


def regime_of_sig(sig) -> tuple[str | None, str]:
    """The regime an op's own shape says, with the evidence; (None, "") when it says nothing."""
    reg, ev, _ = _vote(sig)
    return reg, ev


def window_regime(pt) -> tuple[str | None, str]:
    """The regime of a window with no step ranges, from what its recorded ops' shapes say: the
    first voting class (attention ops: q_len) that has votes decides; GEMM rows otherwise; the
    majority of its ops that say something."""
    voters = regime_voters()
    votes = {oc.name: Counter() for oc in voters}
    why: dict[tuple, str] = {}
    for sig in getattr(pt, "sigs", []) or []:
        reg, ev, kind = _vote(sig)
        if reg is None:
            continue
        votes[kind][reg] += 1
        why.setdefault((kind, reg), ev)
    for oc in voters:
        if votes[oc.name]:
            reg, n = votes[oc.name].most_common(1)[0]
            return reg, (f"{n} of {sum(votes[oc.name].values())} recorded {oc.regime_label} "
                         f"op shapes say {reg} (e.g. {why[(oc.name, reg)]})")
    return None, ""


def _regime_of_agg(a, sigs) -> tuple[str | None, str]:
    """The regime a kernel's linked ops' shapes say, by launches (a: its roofline.ingest.topn.KernelAgg)."""
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

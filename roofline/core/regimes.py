"""A kernel's regimes: which one is e2e-critical (the one holding its time), and each one's share of
the GPU time, on which that regime's expected gain is computed (docs/method.md section 3)."""
from __future__ import annotations

from roofline.core.inputs import Entry, TopN

REAL_TIME_PCT = 0.5     # a second regime with at least this share of GPU time gets a verdict of its own
# How far the regimes' derived time (steps x launches per step x time per launch over the window's
# total_gpu_time_ms) may stray from the measured pct_gpu_time before the entry says so: a Top-N
# written by `roofline topn` reproduces its shares exactly (the corpus' Top-Ns: ratio 1.000); one
# from another profiler carries the run-to-run spread of a time per launch (~3.4% between identical
# isolated reruns, docs/method.md section 9) when it writes a median; past 5% (relative) the counts
# or times per launch are not the window's (nominal counts, launches outside the step ranges).
SHARE_DISAGREE_REL = 0.05


def regime_times_ms(e: Entry, topn: TopN) -> dict[str, float] | None:
    """GPU time per regime over the run (steps x launches per step x time per launch, ms), or None
    when a step count is absent."""
    steps = {"decode": topn.n_decode_steps, "prefill": topn.n_prefill_steps}
    if any(steps.get(r) is None for r in e.regimes):
        return None
    return {r: steps[r] * reg.launches_per_step * reg.base_latency_ms for r, reg in e.regimes.items()}


def regime_shares(e: Entry, topn: TopN) -> dict[str, float]:
    """pct_gpu_time apportioned between the kernel's regimes by their time (docs/method.md section 3).
    pct_gpu_time is the measured primary key: a kernel of one regime keeps all of it; two split it by
    their time ratio (steps x launches per step x time per launch; without step counts, launches x
    time per launch, one step each). The regimes' derived times never shrink the share: where they
    disagree with it, share_note says so."""
    if len(e.regimes) == 1:
        return {next(iter(e.regimes)): e.pct_gpu_time}
    t = regime_times_ms(e, topn) or {r: reg.launches_per_step * reg.base_latency_ms for r, reg in e.regimes.items()}
    tot = sum(t.values())
    if not tot > 0:
        return {r: e.pct_gpu_time / len(t) for r in t}
    return {r: e.pct_gpu_time * v / tot for r, v in t.items()}


def share_note(e: Entry, topn: TopN) -> str | None:
    """A note when the regimes' derived time over the window (total_gpu_time_ms) and the measured
    pct_gpu_time disagree by more than SHARE_DISAGREE_REL; None when they agree or cannot be compared."""
    t = regime_times_ms(e, topn)
    total = getattr(topn, "total_gpu_time_ms", None)
    pct = e.pct_gpu_time
    if not t or not isinstance(total, (int, float)) or not total > 0 or not (isinstance(pct, (int, float)) and pct > 0):
        return None
    derived = 100.0 * sum(t.values()) / total
    if abs(derived - pct) <= SHARE_DISAGREE_REL * pct:
        return None
    return (f"the regimes' launches (steps x launches per step x time per launch) account for {derived:.3g}% of the "
            f"window's {total:.6g} ms, the measured pct_gpu_time is {pct:.4g}% (more than "
            f"{SHARE_DISAGREE_REL:.0%} apart): the gain uses the measured share, the regimes' times only split it; the "
            "Top-N's launch counts or times per launch are not the window's (medians, nominal counts, or launches "
            "outside the step ranges)")


def pick_regime(e: Entry, topn: TopN) -> tuple[str, str]:
    """The e2e-critical regime: the one carrying the kernel's TIME over the run (steps x launches per
    step x time per launch). A kernel with 3 us decode launches and 300 us prefill launches is a
    prefill kernel even when decode launches it more often."""
    if len(e.regimes) == 1:
        r = next(iter(e.regimes))
        other = "prefill" if r == "decode" else "decode"
        if (topn.n_prefill_steps if other == "prefill" else topn.n_decode_steps):
            return r, f"this kernel ran only in the {r} regime (the trace also has {other} steps)"
        return r, f"only the {r} regime is profiled"
    t = regime_times_ms(e, topn)
    if t is None:
        return "decode", "serving step counts absent: decode assumed e2e-critical"
    r = "decode" if t["decode"] >= t["prefill"] else "prefill"
    sh = regime_shares(e, topn)
    return r, (f"{r} carries the kernel's time ({t['decode']:.4g} ms decode vs {t['prefill']:.4g} ms prefill over "
               f"the run: {sh['decode']:.3g}% vs {sh['prefill']:.3g}% of GPU time)")

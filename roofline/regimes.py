"""A kernel's regimes: which one is e2e-critical (the one holding its time), and each one's share of
the GPU time, on which that regime's expected gain is computed (docs/method.md section 3)."""
from __future__ import annotations

from roofline.inputs import Entry, TopN

REAL_TIME_PCT = 0.5     # a second regime with at least this share of GPU time gets a verdict of its own


def regime_times_ms(e: Entry, topn: TopN) -> dict[str, float] | None:
    """GPU time per regime over the run (steps x launches per step x time per launch, ms), or None
    when a step count is absent."""
    steps = {"decode": topn.n_decode_steps, "prefill": topn.n_prefill_steps}
    if any(steps.get(r) is None for r in e.regimes):
        return None
    return {r: steps[r] * reg.launches_per_step * reg.base_latency_ms for r, reg in e.regimes.items()}


def regime_shares(e: Entry, topn: TopN) -> dict[str, float]:
    """pct_gpu_time apportioned between the kernel's regimes by their time (docs/method.md section 3):
    one regime carries the whole pct_gpu_time; two split it by their share of the kernel's time.
    Without step counts the split is by launches x time per launch, one step each. Where the Top-N
    gives total_gpu_time_ms and step counts, a regime's share is capped at its own time over the
    window (launches outside the step ranges are in pct_gpu_time but in no regime)."""
    measured = regime_times_ms(e, topn)
    if len(e.regimes) == 1:
        r = next(iter(e.regimes))
        total = getattr(topn, "total_gpu_time_ms", None)
        if measured and isinstance(total, (int, float)) and total > 0:
            return {r: min(e.pct_gpu_time, 100.0 * measured[r] / total)}
        return {r: e.pct_gpu_time}
    t = measured or {r: reg.launches_per_step * reg.base_latency_ms for r, reg in e.regimes.items()}
    tot = sum(t.values())
    if not tot > 0:
        return {r: e.pct_gpu_time / len(t) for r in t}
    out = {r: e.pct_gpu_time * v / tot for r, v in t.items()}
    total = getattr(topn, "total_gpu_time_ms", None)
    if measured and isinstance(total, (int, float)) and total > 0:
        # NB: a kernel's launches outside the step ranges are in its pct_gpu_time but in no regime;
        # a regime's share is never more than its own time over the whole window
        out = {r: min(v, 100.0 * measured[r] / total) for r, v in out.items()}
    return out


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

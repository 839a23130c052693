"""Stage C's one noise-band judge (docs/method.md section 9): is a measured speedup real, and does it
contradict the prediction? Every stage-C verdict goes through `judge_isolated` (the re-run's
write-back, a kernel team's feedback, the round-over-round comparison, the playbook's evidence
filter); `judge_e2e` judges an end-to-end serving delta against the serving band.

The comparisons, once (b = the isolated band, 3.4%: identical isolated re-runs differ by up to that):

- slower      speedup <  1 - b
- inside      1 - b <= speedup <= 1 + b      (no real change: at EXACTLY 1 + b the speedup is no
              larger than what identical re-runs differ by, so it is not evidence of a gain)
- real gain   speedup >  1 + b
- contradicted (independent of the above): speedup > predicted x (1 + b): the model was wrong, the
              measurement wins.

Pure; never prints.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from roofline.io.errors import FeedbackError
from roofline.ladder.dispatch import NOISE_BAND_ISOLATED

E2E_BAND_PCT = 0.5   # percentage points: the serving band (~0.5%, docs/method.md section 9)


@dataclass(frozen=True)
class NoiseBands:
    isolated: float = NOISE_BAND_ISOLATED   # relative: identical isolated reruns differ by ~3.4%
    e2e_pct: float = E2E_BAND_PCT           # percentage points: the serving band

    def __post_init__(self):
        for k, v in (("isolated", self.isolated), ("e2e_pct", self.e2e_pct)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise FeedbackError(f"noise band {k}: expected a non-negative number, got {v!r}")


def outcome(speedup: float, band: float = NOISE_BAND_ISOLATED) -> str:
    """"slower" | "inside" | "gain": the comparisons of the module docstring (1 + band is inside)."""
    if speedup < 1.0 - band:
        return "slower"
    if speedup <= 1.0 + band:
        return "inside"
    return "gain"


def contradicts(speedup: float, predicted: float | None, band: float = NOISE_BAND_ISOLATED) -> bool:
    """A measured speedup beyond the predicted attainable one (by more than the band)."""
    return predicted is not None and speedup > predicted * (1.0 + band)


# The words of each outcome, by what was measured (the comparisons are the same):
# "rerun": the best isolated kernel of a stage-C re-run against the in-run kernel;
# "like-for-like": a re-run's ladder level against the library kernel, both isolated;
# "feedback": a kernel team's (or a round's) measured speedup.
_WORDS = {
    "rerun": {"slower": "no real gain: the best isolated kernel is slower than the in-run kernel",
              "contradicted": "measured speedup exceeds the predicted attainable: the model was wrong, "
                              "the measurement wins"},
    "like-for-like": {"slower": "no real gain: the ladder level is slower than the library kernel (like for like)",
                      "contradicted": "measured speedup exceeds the predicted attainable: the model was wrong, "
                                      "the measurement wins"},
    "feedback": {"slower": "slower: a real regression beyond the isolated noise band",
                 "contradicted": "beats the predicted attainable speedup: the model was wrong, the measurement wins"},
}


def judge_isolated(speedup: float, predicted: float | None, bands: NoiseBands = NoiseBands(),
                   words: str = "feedback") -> dict:
    """An isolated (or in-run per-kernel) speedup against the isolated band and the prediction:
    {"real", "outcome", "verdict", "model_contradicted"}. `words`: a key of _WORDS."""
    b = bands.isolated
    out, contra = outcome(speedup, b), contradicts(speedup, predicted, b)
    if out == "slower":
        verdict = _WORDS[words]["slower"]
    elif out == "inside":
        verdict = f"no real gain (inside the {b:.1%} isolated noise band)"
    elif contra:
        verdict = _WORDS[words]["contradicted"]
    else:
        verdict = "real gain, within the prediction"
    return {"real": out != "inside", "outcome": out, "verdict": verdict, "model_contradicted": contra}


def change_words(delta_pct: float) -> str:
    """A time change in words. delta_pct = (A - B) / A x 100 (positive = B faster). A change of a
    step's time by a factor (B at 4.39x A's time) reads as that factor: "4.39x slower", not
    "339.08% slower"; so does a cut of half or more ("2.50x faster"); smaller changes read in %."""
    if delta_pct <= -100.0:
        return f"{1.0 - delta_pct / 100.0:.2f}x slower"
    if delta_pct >= 50.0:
        return f"{1.0 / (1.0 - delta_pct / 100.0):.2f}x faster" if delta_pct < 100.0 else "faster (no time left)"
    return f"{abs(delta_pct):.2f}% {'faster' if delta_pct > 0 else 'slower'}"


def judge_e2e(delta_pct: float | None, predicted_gain_pct: float | None, bands: NoiseBands = NoiseBands()) -> dict:
    """An end-to-end serving delta (%, positive = faster) against the serving band."""
    if delta_pct is None:
        return {"real": None, "verdict": "no e2e measurement", "error_pct": None}
    real = abs(delta_pct) > bands.e2e_pct
    verdict = (f"real e2e change: {change_words(delta_pct)} "
               f"({delta_pct:+.2f}%, positive = faster; beyond the {bands.e2e_pct:g}% serving band)" if real
               else f"no real e2e change ({delta_pct:+.2f}% is inside the {bands.e2e_pct:g}% serving band)")
    err = None if predicted_gain_pct is None else delta_pct - predicted_gain_pct
    return {"real": real, "verdict": verdict, "error_pct": err}

"""The defaults of a run, defined once: the hook, the CLI (`roofline analyze`), the API
(`roofline.analyze`), the analysis and the stage-C re-analysis all read them from here.

The head (docs/method.md) is every Top-N entry with pct_gpu_time >= HEAD_THRESHOLD_PCT (percent of GPU
time), at most HEAD_CAP entries, biggest first; artifacts say which skill and version wrote them.
"""
from __future__ import annotations

from typing import Any

SKILL = "roofline"
SKILL_VERSION = "1"
HEAD_THRESHOLD_PCT = 5.0   # percent of GPU time
HEAD_CAP = 8               # head entries at most


def empty_peaks() -> dict[str, Any]:
    """The artifact's peaks block with no roofs (nothing could be resolved)."""
    return {"device": "unknown", "hbm_bw_bytes_s": None, "flops": {}, "flops_kind": {}, "source": "derived",
            "confidence": "low", "origin": "none", "sources": {}, "notes": []}


def empty_artifact(stage: str | None, errors: list[dict], **after_gfx: Any) -> dict[str, Any]:
    """The documented artifact shape (docs/artifact.md) when nothing could be analysed (the hook writes it with the error),
    so that a consumer always finds every top-level field. The analysis starts from it too;
    `after_gfx` (e.g. gpu_name) are placed right after gfx, where the artifact has always had them."""
    return {"skill": SKILL, "skill_version": SKILL_VERSION, "gfx": None, **after_gfx, "peaks": empty_peaks(),
            "stage": stage or "A", "entries": [], "ranking_by_pct": [], "ranking_by_expected_gain": [],
            "degraded": [], "skill_errors": errors}

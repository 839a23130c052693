"""No artifact under fixtures/ (or the bundled example) claims a confidence its own fields do not
support (docs/method.md, "Confidence": medium with captured shapes, high only with measured
counters in stage C, low with estimated shapes or low-confidence peaks; a measured-input entry is
high on the memory axis only, section 3 "Measured input"; implausible counters never raise it,
section 8, L4)."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT


def _artifacts() -> list[Path]:
    out = []
    for p in sorted(FIXTURES.rglob("*.json")) + sorted((ROOT / "roofline" / "data").rglob("*.json")):
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(d, dict) and isinstance(d.get("entries"), list) and any(
                isinstance(e, dict) and "confidence" in e for e in d["entries"]):
            out.append(p)
    return out


def unsupported(art: dict, e: dict) -> list[str]:
    """Why entry e's confidence is more than its own fields (and its artifact's) support."""
    conf, why = e.get("confidence"), []
    if conf not in ("low", "medium", "high"):
        return [f"confidence {conf!r} is not low | medium | high"]
    if conf == "low":
        return why
    if (art.get("peaks") or {}).get("confidence") == "low":
        why.append(f"{conf} with low-confidence peaks")
    if e.get("shape_source") not in ("captured", "measured"):
        why.append(f"{conf} with {e.get('shape_source')!r} shapes (not captured or measured)")
    bm = e.get("bytes_measured")
    if conf == "high":
        if not (isinstance(bm, (int, float)) and math.isfinite(bm) and bm > 0):
            why.append("high without bytes_measured")
        if art.get("stage") != "C":
            why.append(f"high in a stage-{art.get('stage')} artifact")
        if (e.get("counters") or {}).get("implausible"):
            why.append("high with implausible counters")
        if e.get("shape_source") == "measured" and e.get("roof_axis") != "memory":
            why.append("high on the compute axis of a measured-input entry (issued, not useful, FLOPs)")
    if bm is not None and not (e.get("counters") or {}).get("dram_bytes"):
        why.append("bytes_measured without the counter record it came from")
    return why


ARTIFACTS = _artifacts()


def test_the_walk_finds_the_stage_c_artifacts():
    names = {p.relative_to(ROOT).as_posix() for p in ARTIFACTS}
    assert "fixtures/rerun/rerun_h200/profile_roofline.json" in names
    assert "fixtures/rerun_real/prefill/profile/round_1/profile_roofline.json" in names
    assert len(ARTIFACTS) >= 20


@pytest.mark.parametrize("path", ARTIFACTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_artifact_claims_more_confidence_than_its_fields(path):
    art = json.loads(path.read_text(encoding="utf-8"))
    bad = {e.get("name"): w for e in art["entries"] if (w := unsupported(art, e))}
    assert not bad, f"{path.relative_to(ROOT)}: {bad}"


def test_the_check_catches_each_unsupported_claim():
    """Each rule on a real stage-C entry (fixtures/rerun_real: measured bytes, confidence high)."""
    art = json.loads((FIXTURES / "rerun_real" / "prefill" / "profile" / "round_1" / "profile_roofline.json")
                     .read_text())
    good = next(e for e in art["entries"] if e["confidence"] == "high")
    assert unsupported(art, good) == []
    cases = {"high without bytes_measured": lambda a, e: e.pop("bytes_measured"),
             "high in a stage-B artifact": lambda a, e: a.update(stage="B"),
             "high with implausible counters": lambda a, e: e["counters"].update(implausible=["rate above the roof"]),
             "high with low-confidence peaks": lambda a, e: a["peaks"].update(confidence="low"),
             "high with 'estimated' shapes (not captured or measured)": lambda a, e: e.update(shape_source="estimated"),
             "bytes_measured without the counter record it came from": lambda a, e: e.pop("counters")}
    for want, mutate in cases.items():
        a, e = copy.deepcopy(art), copy.deepcopy(good)
        mutate(a, e)
        assert want in unsupported(a, e), want
    e = copy.deepcopy(good) | {"shape_source": "measured", "roof_axis": "compute"}
    assert any("compute axis" in w for w in unsupported(art, e))

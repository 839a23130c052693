"""Behaviour pin: every artifact written from the fixtures (tools/artifact_snapshot.py: analyze of
each Top-N fixture and of the bundled example, topn + analyze of each trace) has, entry by entry,
the key figures committed in fixtures/artifact_snapshot.json. On a change the failure lists which
figure of which entry moved, from what to what (re-pinned only for a meant change)."""
from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("artifact_snapshot", ROOT / "tools" / "artifact_snapshot.py")
snap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(snap)


@pytest.mark.slow   # 2-4 s on a 2-core machine: `-m "not slow"` leaves it out
def test_artifacts_match_the_committed_snapshot():
    old = json.loads((ROOT / "fixtures" / "artifact_snapshot.json").read_text())
    new = snap.run_all()
    assert len(new["runs"]) >= 14 and all(r["artifacts"] for r in new["runs"].values())
    moved = snap.diff(old, new)
    assert not moved, "figures moved:\n" + "\n".join(moved[:40])


def test_the_diff_names_the_figure_that_moved():
    old = json.loads((ROOT / "fixtures" / "artifact_snapshot.json").read_text())
    run = next(k for k, r in old["runs"].items() if any(a["entries"] for a in r["artifacts"].values()))
    art = next(f for f, a in old["runs"][run]["artifacts"].items() if a["entries"])
    name = next(iter(old["runs"][run]["artifacts"][art]["entries"]))
    new = copy.deepcopy(old)
    ent = new["runs"][run]["artifacts"][art]["entries"][name]
    before = ent["roofline_pct"]
    assert isinstance(before, float)
    ent["roofline_pct"] = before * (1 + 1e-6)
    ent["confidence"] = "low" if ent["confidence"] != "low" else "high"
    lines = snap.diff(old, new)
    assert len(lines) == 2
    assert lines[0].startswith(f"{run}: {art}: {name[:60]!r}: roofline_pct {before!r} -> ")
    assert lines[1].endswith(f"confidence {old['runs'][run]['artifacts'][art]['entries'][name]['confidence']!r} -> "
                             f"{ent['confidence']!r}")
    ent["roofline_pct"] = before * (1 + 1e-12)        # below the tolerance: not a move
    assert len(snap.diff(old, new)) == 1
    assert snap.diff(old, old) == []

"""Behaviour pin: every artifact written from the fixtures (tools/artifact_snapshot.py: analyze of
each Top-N fixture and of the bundled example, topn + analyze of each trace) is identical, apart
from timestamps and absolute paths, to the digest committed in fixtures/artifact_snapshot.json
(re-pinned only for a meant change; tools/artifact_snapshot.py says the last)."""
from __future__ import annotations

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
    assert len(new["runs"]) >= 14 and all(len(r["files"]) >= 2 for r in new["runs"].values())
    assert snap.diff(old, new) == []


def test_normalization_hides_only_timestamps_and_paths():
    art = json.loads((ROOT / "fixtures" / "rerun" / "profile" / "round_1" / "profile_roofline.json").read_text())
    a = dict(art, generated_at="2026-01-01T00:00:00+00:00", peaks={"table_file": "/x/roofline/data/peaks/h200.yaml"})
    b = dict(art, generated_at="2027-05-05T12:34:56+00:00", peaks={"table_file": "/y/peaks/h200.yaml"})
    assert snap.norm_json(a) == snap.norm_json(b)
    # a changed number, or another file name, is a change
    c = json.loads(json.dumps(a))
    c["entries"][0]["t_ms"] += 1e-9
    assert snap.norm_json(c) != snap.norm_json(a)
    d = dict(a, peaks={"table_file": "/x/roofline/data/peaks/h100_sxm.yaml"})
    assert snap.norm_json(d) != snap.norm_json(a)
    assert snap.norm_text("see /tmp/abc/profile_topN.json at 2026-12-01T08:46:25+00:00, 4.8 TB/s") \
        == "see <abs>/profile_topN.json at <ts>, 4.8 TB/s"

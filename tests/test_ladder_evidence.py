"""The evidence `roofline ladder advise` ships with (roofline/data/ladder_evidence_h200.json, package
data so that a wheel install advises on it) is what tools/build_ladder_evidence.py builds from the
recorded benches in fixtures/ladder/, read here straight from those files; every recorded bench
result is either in it or left out with a reason; and advise gives the same answer on it as on
the recorded files themselves."""
from __future__ import annotations

import importlib.util
import json

from click.testing import CliRunner

from roofline.cli import main
from roofline.ladder import evidence as ev

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("build_ladder_evidence", ROOT / "tools" / "build_ladder_evidence.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)
LADDER = ROOT / "fixtures" / "ladder"


def test_the_shipped_evidence_is_the_recorded_rows():
    b = ev.evidence_bundle()
    assert [r["source"] for r in b["runs"]] == [f"fixtures/ladder/{s}" for s in tool.SOURCES]
    for run in b["runs"]:
        raw = json.loads((ROOT / run["source"]).read_text())
        timed = [r for r in raw["rows"] if r.get("t_ms_median") is not None]
        assert run["run"] == (ROOT / run["source"]).name and len(run["rows"]) == len(timed) > 0
        for got, want in zip(run["rows"], timed):
            assert got == {k: want.get(k) for k in ("level", "name", "m", "n", "k", "t_ms_median", "pct_cublas")}
    assert (ROOT / "roofline" / "data" / ev.EVIDENCE_FILE).read_text() == tool.text(tool.build())


def test_every_recorded_bench_is_in_or_left_out_with_a_reason():
    timed = set()
    for p in LADDER.rglob("*.json"):
        try:
            d = json.loads(p.read_text())
        except ValueError:
            continue
        if isinstance(d, dict) and isinstance(d.get("rows"), list) and any(
                isinstance(r, dict) and "t_ms_median" in r for r in d["rows"]):
            timed.add(p.relative_to(LADDER).as_posix())
    placed = {t for t in timed if t in tool.SOURCES or any(t.startswith(k) for k in tool.LEFT_OUT)}
    assert timed - placed == set()
    assert set(tool.SOURCES) <= timed and all(tool.LEFT_OUT.values())
    assert not set(tool.SOURCES) & set(tool.LEFT_OUT)


def test_advise_on_the_shipped_evidence_is_advise_on_the_recorded_files():
    src = LADDER / "h200_bench_square_llama.json"
    files = [LADDER / s for s in tool.SOURCES]
    args = ["ladder", "advise", str(src), "--level", "5", "--shape", "4096x4096x4096", "--format", "json"]
    shipped = CliRunner().invoke(main, args)
    given = CliRunner().invoke(main, args + [a for f in files for a in ("--evidence", str(f))])
    assert shipped.exit_code == 0 and given.exit_code == 0
    assert json.loads(shipped.stdout) == json.loads(given.stdout)
    obs = ev.default_evidence()
    assert sorted(obs, key=repr) == sorted(ev.load_evidence(files), key=repr)
    # the SOURCE's own run is not counted twice when it is also shipped
    assert len(ev.load_evidence([src], obs)) == len(obs)

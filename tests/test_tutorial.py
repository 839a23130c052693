"""The README's tutorial, run for real: every `$ roofline ...` command in a block marked
`<!-- checked-output -->` runs (in a fresh folder that sees the repository's fixtures/), and what it
prints must be exactly what the README shows. A stale README fails here; `python
tools/readme_outputs.py` rewrites the blocks (then re-read the prose the test checks below)."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
_spec = importlib.util.spec_from_file_location("readme_outputs", ROOT / "tools" / "readme_outputs.py")
ro = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ro)


def _tutorial() -> str:
    m = re.search(r"<!-- tutorial:begin.*?<!-- tutorial:end -->", README, flags=re.S)
    assert m, "the README has no tutorial section"
    return m.group(0)


def test_readme_has_the_tutorial_and_its_checked_blocks():
    cmds = [c for m in ro.BLOCK_RX.finditer(_tutorial()) for c, _ in ro.parse_block(m.group(2))]
    assert [c.split()[1] for c in cmds] == ["topn", "analyze", "plot"]
    assert "fixtures/traces/" in cmds[0]  # a bundled trace


def test_the_tutorial_prints_what_the_readme_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    blocks = [ro.parse_block(m.group(2)) for m in ro.BLOCK_RX.finditer(README)]
    assert len(blocks) >= 4   # the bundled example at the top + the three tutorial steps
    for steps in blocks:
        for cmd, expected in steps:
            rc, got = ro.run(cmd)
            assert rc == 0, (cmd, got)
            assert got == expected.rstrip("\n"), f"README output of `{cmd}` is stale: python tools/readme_outputs.py"
    art = json.loads((tmp_path / "run" / "profile" / "round_1" / "profile_roofline.json").read_text())
    env = json.loads((tmp_path / "run" / "profile" / "round_1" / "env_report.json").read_text())
    assert env["gpu_name"] == "NVIDIA H200" and env["workload"] == {"isl": 128, "osl": 1, "conc": 4}
    png = tmp_path / "run" / "roofline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _check_prose(art)
    # the picture shown in the README is the one this command draws (same size)
    shown = ROOT / "docs" / "img" / "tutorial_roofline.png"
    assert "docs/img/tutorial_roofline.png" in README and shown.is_file()
    from matplotlib import image

    assert image.imread(shown).shape == image.imread(png).shape
    # and it shows today's figures: roofs, ridges and every point (the PNG's text chunk, written by
    # roofline.report.plot): a picture drawn before a roof, a ridge or a verdict changed fails here
    _same_figures(_figures(shown), _figures(png))


def _figures(png) -> dict:
    from PIL import Image

    from roofline.report.plot import FIGURES_KEY

    with Image.open(png) as im:
        text = getattr(im, "text", {}) or im.info
        assert FIGURES_KEY in text, f"{png} carries no figures (drawn by an older roofline plot?)"
        return json.loads(text[FIGURES_KEY])


def _same_figures(shown: dict, today: dict) -> None:
    assert shown.keys() == today.keys()
    for k in ("device", "stage"):
        assert shown[k] == today[k], k
    assert shown["hbm_bw_bytes_s"] == pytest.approx(today["hbm_bw_bytes_s"], rel=1e-9)
    for k in ("compute_roofs", "ridges"):
        assert shown[k] == pytest.approx(today[k], rel=1e-9), (k, shown[k], today[k])
    assert [p[:2] + p[4:] for p in shown["points"]] == [p[:2] + p[4:] for p in today["points"]]
    for a, b in zip(shown["points"], today["points"]):
        assert a[2:4] == pytest.approx(b[2:4], rel=1e-9), (a, b)


def test_a_stale_picture_is_caught():
    """The check above goes red on a picture whose roof or a point's headroom differs."""
    base = {"device": "NVIDIA H200", "stage": "B", "hbm_bw_bytes_s": 4.8e12, "compute_roofs": {"bf16": 7.939e14},
            "ridges": {"bf16": 165.4}, "points": [[1, "k", 300.0, 5e14, "moderate"]]}
    _same_figures(base, json.loads(json.dumps(base)))
    for mutate in (lambda f: f["compute_roofs"].update(bf16=7.72e14), lambda f: f["ridges"].update(bf16=161.0),
                   lambda f: f["points"][0].__setitem__(4, "underperforming")):
        stale = json.loads(json.dumps(base))
        mutate(stale)
        with pytest.raises(AssertionError):
            _same_figures(stale, base)


def _check_prose(art: dict) -> None:
    """The numbers the tutorial's prose quotes are the run's."""
    text = " ".join(_tutorial().split())
    by = {e["name"]: e for e in art["entries"]}
    m = re.search(r"the biggest kernel is the first GEMM \((\d+)%, already at (\d+)% of the compute roof, "
                  r"\+([\d.]+)%\), and the second GEMM, at (\d+)% of its roof, is worth nearly as much", text)
    assert m, "the tutorial no longer describes the biggest kernel"
    big = by[art["ranking_by_pct"][0]]
    assert big["op_class"] == "gemm" and big["roof_axis"] == "compute"
    assert (round(big["pct_gpu_time"]), round(100 * big["roofline_pct"])) == (int(m.group(1)), int(m.group(2)))
    assert f"{big['expected_e2e_gain_pct']:.1f}" == m.group(3)
    # issue 35: verdicts rank first in #gain; here the biggest kernel is also the best bet, and the
    # second GEMM (by gain) is within a tenth of it; the no-verdict kernels come after every verdict
    second = by[art["ranking_by_expected_gain"][1]]
    assert art["ranking_by_expected_gain"][0] == big["name"] and second["op_class"] == "gemm"
    assert round(100 * second["roofline_pct"]) == int(m.group(4))
    assert big["expected_e2e_gain_pct"] - second["expected_e2e_gain_pct"] < 0.1 * big["expected_e2e_gain_pct"]
    unknown = [n for n in art["ranking_by_expected_gain"] if by[n]["headroom_class"] == "unknown"]
    assert unknown == art["ranking_by_expected_gain"][-len(unknown):]
    assert {by[n]["op_kind"] for n in unknown} >= {"norm", "elementwise"}
    assert "Most rows are `latency`-bound" in text
    w = art["wall_time"]["prefill"]
    m = re.search(r"each prefill step takes ([\d.]+) ms, of which the GPU is busy ([\d.]+)%", text)
    assert m and (float(m.group(1)), float(m.group(2))) == (round(w["step_wall_ms"], 3), round(w["gpu_busy_pct"], 1))
    assert w["idle_pct"] > 50   # "the host ... bounds the step"
    m = re.search(r"\+([\d.]+)% for the first GEMM, not \+([\d.]+)%", text)
    assert m and (float(m.group(1)), float(m.group(2))) == (round(big["expected_gain_pct_of_step_wall"], 2),
                                                            round(big["expected_e2e_gain_pct"], 1))
    assert "Run the commands from the root of a checkout" in text
    assert sum(e["bound_type"] == "latency" for e in art["entries"]) > len(art["entries"]) / 2


@pytest.mark.parametrize("needle", ["cudaGraphLaunch", "eager step", "--counters"])
def test_tutorial_documents_cuda_graph_replays(needle):
    assert needle in _tutorial()


def test_readme_outputs_tool_detects_a_stale_block(tmp_path):
    stale = README.replace("17.16  compute  66%", "17.16  compute  99%", 1)
    assert stale != README
    _new, changed = ro.regenerate(stale)
    assert changed == ["roofline analyze run/profile/round_1/profile_topN.json"]
    assert _new == README   # regenerating restores exactly what is committed


def test_the_guides_figures_are_what_roofline_calc_prints():
    """docs/guide.md's H200 roofs (issue 42): a checked block that tools/readme_outputs.py regenerates,
    and the prose quotes no figure the block does not print."""
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    blocks = [ro.parse_block(m.group(2)) for m in ro.BLOCK_RX.finditer(guide)]
    assert any(cmd.startswith("roofline calc --roof measured") for steps in blocks for cmd, _ in steps)
    for steps in blocks:
        for cmd, expected in steps:
            rc, got = ro.run(cmd)
            assert rc == 0 and got == expected.rstrip("\n"), f"docs/guide.md output of `{cmd}` is stale"
    assert "ridge is 183" not in guide and "bound is 178" not in guide
    stale = guide.replace("ridge 189.9 FLOP/byte", "ridge 183 FLOP/byte", 1)
    assert stale != guide and ro.regenerate(stale)[1] == ["roofline calc --roof measured --size 4096"]


def test_the_readmes_tables_fit_120_columns_and_lead_with_the_larger_gain():
    for m in ro.BLOCK_RX.finditer(README):
        for cmd, out in ro.parse_block(m.group(2)):
            if cmd.split()[1] != "analyze":
                continue
            lines = out.splitlines()
            head = next(i for i, ln in enumerate(lines) if ln.startswith("#  kernel"))
            assert "larger of the tuning gain and the avoidable gain" in " ".join(lines[:head])
            table = lines[:next(i for i, ln in enumerate(lines) if ln.startswith(("Fix first", "No row")))]
            assert max(map(len, table)) <= 120, cmd

"""The roofline picture, drawn on a CPU machine from the worked example (seed 002 section 9) and
from a stage-C artifact built on real H200 Nsight Compute readings."""
import json

import pytest
from click.testing import CliRunner

from roofline import api
from roofline.cli import main
from roofline.report.plot import plot_artifact, plot_points

from conftest import EXAMPLE, FIXTURES

TOPN = EXAMPLE / "profile" / "round_1" / "profile_topN.json"


@pytest.fixture(scope="module")
def art():
    return api.analyze(TOPN, EXAMPLE / "env_report.json", EXAMPLE / "config.json")


def test_png_from_the_worked_example_points_where_the_artifact_says(art, tmp_path):
    out = tmp_path / "roofline.png"
    info = plot_artifact(art, out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    by = {e["name"]: e for e in art["entries"]}
    assert {d["name"] for d in info["drawn"]} == set(by) == {"fused_moe_kernel", "kernel_paged_attention_2d"}
    for d in info["drawn"]:  # read back from the plotted artists, not from our own list
        e = by[d["name"]]
        assert d["x"] == pytest.approx(e["arithmetic_intensity"], rel=1e-12)
        assert d["y"] == pytest.approx(e["achieved_flops"], rel=1e-12)
    moe = next(d for d in info["drawn"] if d["name"] == "fused_moe_kernel")
    att = next(d for d in info["drawn"] if d["name"] == "kernel_paged_attention_2d")
    assert moe["size"] > att["size"]  # 26.45% vs 8.86% of GPU time
    # seed 002 section 9 numbers: AI ~4.6 at 7.04 TB/s
    assert moe["x"] == pytest.approx(4.6, abs=0.05) and moe["y"] / moe["x"] == pytest.approx(7.04e12, rel=0.01)
    # roofs from the artifact's own peaks: memory 8 TB/s; compute roofs only for dtypes present
    assert info["hbm_bw_bytes_s"] == art["peaks"]["hbm_bw_bytes_s"] == 8.0e12
    assert info["compute_roofs"] == {"fp8": 5.0e15, "bf16": 2.5e15}
    assert info["ridges"] == {"fp8": pytest.approx(625.0), "bf16": pytest.approx(312.5)}
    colors = {p["name"]: p["headroom_class"] for p in info["points"]}
    assert colors == {"fused_moe_kernel": "saturated", "kernel_paged_attention_2d": "underperforming"}
    assert info["arrows"] == []  # stage B: nothing measured


def test_svg_by_suffix_and_cli_link_rewrites_the_markdown(art, tmp_path):
    from roofline.report import artifact as report

    report.write_artifact(art, tmp_path)
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "profile_roofline.json"), "-o",
                                  str(tmp_path / "pics" / "roofline.svg"), "--link"])
    assert r.exit_code == 0, r.output
    svg = (tmp_path / "pics" / "roofline.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    md = (tmp_path / "profile_roofline.md").read_text()
    assert "![roofline](pics/roofline.svg)" in md
    assert json.loads((tmp_path / "profile_roofline.json").read_text())["plot"] == "pics/roofline.svg"


def test_cli_default_output_beside_the_artifact(art, tmp_path):
    from roofline.report import artifact as report

    report.write_artifact(art, tmp_path)
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "profile_roofline.json")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "roofline.png").stat().st_size > 20_000
    assert "![roofline]" not in (tmp_path / "profile_roofline.md").read_text()  # no --link, no rewrite


@pytest.mark.parametrize("content,suffix,expect", [
    (None, ".png", "no such file"),
    ("{not json", ".png", "not a JSON artifact"),
    ('{"entries": 3}', ".png", "$.entries"),
    ('{"entries": [], "peaks": null}', ".png", "$.peaks"),
    ("GOOD", ".gif", "a picture is written as .png, .svg, .pdf or .jpg (got '.gif')"),
])
@pytest.mark.broken_artifact("writes malformed profile_roofline.json files that the CLI must reject")
def test_cli_rejects_bad_input_with_one_line(art, tmp_path, content, suffix, expect):
    from roofline.report import artifact as report

    p = tmp_path / "profile_roofline.json"
    if content == "GOOD":
        report.write_artifact(art, tmp_path)
    elif content is not None:
        p.write_text(content)
    r = CliRunner().invoke(main, ["plot", str(p), "-o", str(tmp_path / f"x{suffix}")])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0]


def test_stage_c_points_have_arrows_from_their_model_estimate(tmp_path):
    # real H200 counters (fixtures/ncu) on the hook fixture's captured shapes
    art = api.analyze(FIXTURES / "hook" / "round_b_topN.json", FIXTURES / "hook" / "env_report.json", None,
                      counters=FIXTURES / "ncu" / "known_raw.csv")
    assert art["stage"] == "C"
    info = plot_artifact(art, tmp_path / "c.png")
    measured = [e for e in art["entries"] if e.get("bytes_measured")]
    assert len(info["arrows"]) == len(measured) == 4
    for a in info["arrows"]:
        e = next(x for x in measured if x["name"] == a["name"])
        assert a["from_x"] == pytest.approx(e["flops_useful"] / e["bytes_model"])
        assert a["to_x"] == pytest.approx(e["arithmetic_intensity"])
        assert a["to_x"] == pytest.approx(e["flops_useful"] / e["bytes_measured"])
        assert a["from_y"] == a["to_y"] == pytest.approx(e["achieved_flops"])
    rg = next(a for a in info["arrows"] if a["name"].startswith("nvjet_sm90_tst_192x128"))
    assert rg["to_x"] / rg["from_x"] == pytest.approx(22_000_000 / 16_112_640)  # fewer bytes measured
    # elementwise entries compute in fp32 -> an fp32 roof is drawn beside bf16 and fp8
    assert set(info["compute_roofs"]) == {"bf16", "fp8", "fp32"}


def test_unplaceable_entries_are_listed_not_drawn(art):
    a = json.loads(json.dumps(art))
    a["entries"][1]["modeled"] = False
    info = plot_points(a)
    assert [p["name"] for p in info["points"]] == ["fused_moe_kernel"]
    assert [{k: s[k] for k in ("name", "reason")} for s in info["skipped"]] == [
        {"name": "kernel_paged_attention_2d", "reason": "not modeled"}]
    assert list(info["compute_roofs"]) == ["fp8"]


# ---------------------------------------------------------------- issue 13: readable with 8 real heads

def _real_eight_heads(tmp_path):
    """topn + analyze of the bundled H200 prefill trace: 8 heads with real cuBLAS/cuDNN names."""
    out = tmp_path / "profile_topN.json"
    r = CliRunner().invoke(main, ["topn", str(FIXTURES / "traces" / "prefill.json.gz"), "-o", str(out),
                                  "--isl", "128", "--osl", "1", "--conc", "4", "-q"])
    assert r.exit_code == 0, r.output
    return api.analyze(out)


def test_eight_real_heads_numbered_keyed_and_inside_the_axes(tmp_path):
    import math

    from roofline.report.plot import _clip

    art = _real_eight_heads(tmp_path)
    assert len(art["entries"]) == 8
    info = plot_artifact(art, tmp_path / "r.png")
    pts = info["points"]
    # numbered 1..8 by share of GPU time
    assert [p["number"] for p in pts] == list(range(1, 9))
    assert [p["pct_gpu_time"] for p in pts] == sorted((e["pct_gpu_time"] for e in art["entries"]), reverse=True)
    # axes fitted: every point and every ridge inside, with room on both sides; a flat roof past each ridge
    x_lo, x_hi, y_lo, y_hi = info["limits"]
    for p in pts:
        assert x_lo < p["x"] < x_hi and y_lo < p["y"] < y_hi
    for d, rx in info["ridges"].items():
        assert x_lo < rx and rx * 5 < x_hi
        assert info["compute_roofs"][d] < y_hi
    span = math.log10(x_hi / x_lo)
    xs = [math.log10(p["x"]) for p in pts] + [math.log10(r) for r in info["ridges"].values()]
    assert (max(xs) - min(xs)) / span > 0.6   # the data fills the width (no half-empty axes)
    # the long cuDNN name is in the key, clipped at both ends, and distinct variants stay distinct
    labels = [_clip(p["label"], 34) for p in pts]
    assert len(set(labels)) == len(labels)
    assert any("cudnn" in lab for lab in labels) and all(len(lab) <= 34 for lab in labels)


def test_key_text_names_every_number(tmp_path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    art = _real_eight_heads(tmp_path)
    captured = {}
    real_savefig = plt.Figure.savefig

    def grab(self, *a, **k):
        captured["texts"] = [t.get_text() for ax in self.axes for t in ax.texts]
        return real_savefig(self, *a, **k)

    plt.Figure.savefig = grab
    try:
        info = plot_artifact(art, tmp_path / "k.png")
    finally:
        plt.Figure.savefig = real_savefig
    texts = captured["texts"]
    from roofline.report.plot import _clip
    for p in info["points"]:
        assert str(p["number"]) in texts                       # the marker's number
        assert any(_clip(p["label"], 30) in t and _clip(p["op"], 24) in t for t in texts)   # its row in the key, with its regime / aten op


def test_stage_arrows_from_earlier_rounds(tmp_path):
    env = FIXTURES / "hook" / "env_report.json"
    a = api.analyze(FIXTURES / "hook" / "round_a_topN.json", env, None)
    b = api.analyze(FIXTURES / "hook" / "round_b_topN.json", env, None)
    c = api.analyze(FIXTURES / "hook" / "round_b_topN.json", env, None, counters=FIXTURES / "ncu" / "known_raw.csv")
    info = plot_artifact(c, tmp_path / "abc.png", history=[a, b])
    pos = {s: {e["name"]: (e.get("arithmetic_intensity"), e.get("achieved_flops")) for e in art["entries"]
               if e.get("modeled")} for s, art in (("A", a), ("B", b), ("C", c))}
    for arr in info["stage_arrows"]:
        assert (arr["from_x"], arr["from_y"]) == pytest.approx(pos[arr["from_stage"]][arr["name"]])
        assert (arr["to_x"], arr["to_y"]) == pytest.approx(pos[arr["to_stage"]][arr["name"]])
    moved = {(s0, s1, n) for s0, s1 in (("A", "B"), ("B", "C")) for n in pos[s1]
             if n in pos[s0] and pos[s0][n] != pos[s1][n]}
    assert {(x["from_stage"], x["to_stage"], x["name"]) for x in info["stage_arrows"]} == moved and moved
    r = CliRunner().invoke(main, ["plot", str(FIXTURES / "rerun_real" / "decode" / "profile" / "round_1" / "profile_roofline.json"),
                                  "--previous", str(FIXTURES / "hook" / "round_a_topN.json"),
                                  "-o", str(tmp_path / "x.png")])
    assert r.exit_code == 2 and "--previous" in r.stderr and "not an analysis artifact" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_numbers_follow_the_tables_pct_rank_when_an_entry_is_not_placed(tmp_path):
    art = _real_eight_heads(tmp_path)
    a = json.loads(json.dumps(art))
    first = a["ranking_by_pct"][0]
    next(e for e in a["entries"] if e["name"] == first)["modeled"] = False
    info = plot_points(a)
    assert [p["number"] for p in info["points"]] == list(range(2, 9))
    assert info["skipped"][0]["number"] == 1 and info["skipped"][0]["name"] == first
    for p in info["points"]:
        assert a["ranking_by_pct"][p["number"] - 1] == p["name"]

"""The roofline picture, drawn on a CPU machine from the worked example (seed 002 section 9) and
from a stage-C artifact built on real H200 Nsight Compute readings."""
import json

import pytest
from click.testing import CliRunner

from roofline import api
from roofline.cli import main
from roofline.plot import plot_artifact, plot_points

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
    from roofline import report

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
    from roofline import report

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
    ("GOOD", ".jpg", ".png or .svg"),
])
@pytest.mark.broken_artifact("writes malformed profile_roofline.json files that the CLI must reject")
def test_cli_rejects_bad_input_with_one_line(art, tmp_path, content, suffix, expect):
    from roofline import report

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
    assert info["skipped"] == [{"name": "kernel_paged_attention_2d", "reason": "not modeled"}]
    assert list(info["compute_roofs"]) == ["fp8"]

import json

from click.testing import CliRunner

from roofline.cli import main
from roofline.io.schema import validate_artifact


def test_default_runs_the_bundled_example_and_writes_nothing():
    res = CliRunner().invoke(main, ["analyze"])
    assert res.exit_code == 0, res.output
    assert "fused_moe" in res.stdout and "saturated" in res.stdout and "underperforming" in res.stdout


def test_writes_atomically_beside_topn_and_formats(example_dir):
    topn = example_dir / "profile" / "round_1" / "profile_topN.json"
    res = CliRunner().invoke(main, ["analyze", str(topn), "--format", "json"])
    assert res.exit_code == 0
    art = json.loads(res.stdout)
    validate_artifact(art)
    on_disk = json.loads((topn.parent / "profile_roofline.json").read_text())
    assert on_disk["ranking_by_pct"] == art["ranking_by_pct"]
    md = (topn.parent / "profile_roofline.md").read_text()
    assert md.startswith("# Roofline headroom: stage B") and "| #pct | #gain | kernel |" in md
    assert not [p for p in topn.parent.iterdir() if p.name.endswith(".tmp")]
    res = CliRunner().invoke(main, ["analyze", str(topn), "--format", "md", "--out", str(example_dir / "o")])
    assert res.exit_code == 0 and (example_dir / "o" / "profile_roofline.md").exists()


def test_analysis_skill_none_is_l0(example_dir):
    topn = example_dir / "profile" / "round_1" / "profile_topN.json"
    res = CliRunner().invoke(main, ["analyze", str(topn), "--analysis-skill", "none"])
    assert res.exit_code == 0 and res.stdout == ""
    assert not (topn.parent / "profile_roofline.json").exists()


def test_bad_config_file_exits_2(example_dir):
    (example_dir / "config.json").write_text("[1, 2]")
    topn = example_dir / "profile" / "round_1" / "profile_topN.json"
    res = CliRunner().invoke(main, ["analyze", str(topn)])
    assert res.exit_code == 2
    assert res.stderr.strip().endswith("config.json: (top level): expected a JSON object, got array")


def test_help_explains():
    res = CliRunner().invoke(main, ["analyze", "--help"])
    assert res.exit_code == 0 and "Exit codes" in res.stdout and "--head-threshold" in res.stdout

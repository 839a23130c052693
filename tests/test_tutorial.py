"""The README's tutorial, run for real: every `$ roofline ...` command in a block marked
`<!-- checked-output -->` runs (in a fresh folder that sees the repository's fixtures/), and what it
prints must be exactly what the README shows. A stale README fails here."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _checked_blocks(text: str) -> list[list[tuple[str, str]]]:
    """[[(command, expected output), ...] per block], in README order."""
    blocks = re.findall(r"<!-- checked-output[^>]*-->\n```console\n(.*?)```", text, flags=re.S)
    out = []
    for b in blocks:
        steps, cmd, lines = [], None, []
        for line in b.splitlines():
            if line.startswith("$ "):
                if cmd is not None:
                    steps.append((cmd, "\n".join(lines)))
                cmd, lines = line[2:], []
            else:
                lines.append(line)
        steps.append((cmd, "\n".join(lines)))
        out.append(steps)
    return out


def _tutorial() -> str:
    m = re.search(r"<!-- tutorial:begin.*?<!-- tutorial:end -->", README, flags=re.S)
    assert m, "the README has no tutorial section"
    return m.group(0)


def test_readme_has_the_tutorial_and_its_checked_blocks():
    blocks = _checked_blocks(_tutorial())
    cmds = [c for b in blocks for c, _ in b]
    assert [c.split()[1] for c in cmds] == ["topn", "analyze", "plot"]
    assert "fixtures/traces/" in cmds[0]  # a bundled trace


def test_the_tutorial_prints_what_the_readme_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    blocks = _checked_blocks(README)
    assert len(blocks) >= 4   # the bundled example at the top + the three tutorial steps
    for steps in blocks:
        for cmd, expected in steps:
            args = shlex.split(cmd)
            assert args[0] == "roofline"
            r = CliRunner().invoke(main, args[1:])
            assert r.exit_code == 0, (cmd, r.output)
            assert r.output.rstrip("\n") == expected.rstrip("\n"), f"README output of `{cmd}` is stale"
    # what the tutorial's prose says about this run
    art = json.loads((tmp_path / "run" / "profile" / "round_1" / "profile_roofline.json").read_text())
    by = {e["name"]: e for e in art["entries"]}
    best = by[art["ranking_by_expected_gain"][0]]
    assert "sdpa" in best["name"] and f"{best['expected_e2e_gain_pct']:.1f}" == "7.0"
    big = by[art["ranking_by_pct"][0]]
    assert big["op_class"] == "gemm" and round(100 * big["roofline_pct"]) == 68
    assert f"{big['expected_e2e_gain_pct']:.1f}" == "4.1"
    assert sum(e["bound_type"] == "latency" for e in art["entries"]) > len(art["entries"]) / 2
    env = json.loads((tmp_path / "run" / "profile" / "round_1" / "env_report.json").read_text())
    assert env["gpu_name"] == "NVIDIA H200" and env["workload"] == {"isl": 128, "osl": 1, "conc": 4}
    png = tmp_path / "run" / "roofline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the picture shown in the README is the one this command draws (same size, same kind of file)
    shown = ROOT / "docs" / "img" / "tutorial_roofline.png"
    assert "docs/img/tutorial_roofline.png" in README and shown.is_file()
    from matplotlib import image

    assert image.imread(shown).shape == image.imread(png).shape


@pytest.mark.parametrize("needle", ["cudaGraphLaunch", "eager step", "--counters"])
def test_tutorial_documents_cuda_graph_replays(needle):
    assert needle in _tutorial()

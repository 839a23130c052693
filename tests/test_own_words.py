"""The repository explains itself: user-facing text (CLI help and output, the artifact's words,
README and docs) and the code's comments cite the repository's own documents (docs/method.md
sections, docs/*.md, ladder/README.md), never documents a reader of the repository does not have:
the project's planning texts ("seed 002 section 8", "the seed's order", "INPUTS.md", "DESIGN.md",
"house rule 5", shared/spec/...) or its tracker ("issue 14").

Recorded evidence is left as it was recorded (fixture data files: bench JSON, run YAML, logs); its
READMEs are checked. The tests/ folder is the developers' own and is not scanned.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.cli import LAZY_COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent

OUTSIDE = re.compile(r"""
    \b[Ss]eeds?[ -]?0\d\d\b                     # seed 002, seed-001, Seed 000
  | \b[Tt]he\ seed\b | \b[Ss]eed\ section\b      # the seed's order, seed section 2
  | \bINPUTS\.md\b | \bDESIGN\.md\b
  | \b[Hh]ouse\ rules?\b
  | (?<![\w`"'/.-])[Ii]ssues?[ -]?\#?\d+\b       # issue 14 (not a file name such as ..._issue6.json)
  | \bshared/(?:spec|seeds|reference)\b
""", re.X)

SCANNED_DIRS = ("roofline", "ladder", "peaks", "docs", "examples", "tools", "benchmarks")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".cu", ".cuh", ".sh", ".toml", ".txt", ".cfg"}


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = []
    for rel in out.splitlines():
        p = ROOT / rel
        top = rel.split("/", 1)[0]
        if rel in ("README.md", "pyproject.toml") or (top in SCANNED_DIRS and p.suffix in TEXT_SUFFIXES):
            files.append(p)
        elif top == "fixtures" and p.suffix == ".md":   # the evidence's READMEs, not the evidence
            files.append(p)
    return [p for p in files if p.is_file()]


def _hits(text: str, where: str) -> list[str]:
    return [f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in OUTSIDE.finditer(text)]


def test_the_pattern_finds_what_it_must_and_spares_what_it_must():
    for bad in ("(seed 001)", "Seed 002: the head", "seed 000's five outputs", "house rule 6", "INPUTS.md peaks convention",
                "the seed's order", "Seed section 2", "issue 14", "Issue 7", "see shared/spec/INPUTS.md",
                "the issue-6 call", "DESIGN.md"):
        assert OUTSIDE.search(bad), bad
    for fine in ("--seed 2914461522", "h200_bench_square_llama.json", '"issue6": "square-and-llama"', "seed_reader.py",
                 "issue four wgmma", "docs/method.md section 8", "SEED_ROUTE"):
        assert not OUTSIDE.search(fine), fine


def test_no_file_cites_a_document_outside_the_repository():
    files = _tracked()
    assert len(files) > 150 and any(p.name == "method.md" for p in files)
    hits = [h for p in files for h in _hits(p.read_text(encoding="utf-8", errors="replace"),
                                            str(p.relative_to(ROOT)))]
    assert not hits, f"{len(hits)} reference(s) to documents outside the repository:\n" + "\n".join(hits[:40])


def _commands():
    """Every command path of the CLI: the group, each sub-command, each sub-group's sub-commands."""
    import click

    paths = [[]]
    for name in LAZY_COMMANDS:
        cmd = main.get_command(None, name)
        paths.append([name])
        if isinstance(cmd, click.Group):
            paths += [[name, sub] for sub in cmd.list_commands(None)]
    return paths


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "roofline")
def test_cli_help_cites_only_the_repository(path):
    r = CliRunner().invoke(main, [*path, "--help"])
    assert r.exit_code == 0, r.output
    assert not _hits(r.output, "roofline " + " ".join(path))


def test_cli_output_cites_only_the_repository(tmp_path):
    """What the commands named in the first-hour report print: calc, peaks show, playbook, ladder
    advise, and the bundled example's artifact (notes and reasons included)."""
    runs = [["calc", "--device", "h200", "--dtype", "bf16", "--size", "4096"], ["peaks", "show", "h200"],
            ["peaks", "show", "mi355x"], ["playbook", str(ROOT / "fixtures" / "rerun_real" / "decode" / "knowledge")],
            ["ladder", "advise", str(ROOT / "fixtures" / "ladder" / "h200_bench_square_llama.json"), "--level", "3",
             "--shape", "4096x4096x4096"],
            ["analyze", "--format", "md"], ["analyze", "--format", "json"]]
    outs = []
    for args in runs:
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, (args, r.output)
        outs.append((" ".join(args[:2]), r.output))
    assert "five" in outs[4][1].lower() or "conclusion" in outs[4][1].lower()
    hits = [h for where, text in outs for h in _hits(text, where)]
    assert not hits, hits

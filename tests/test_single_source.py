"""Every number the issue names is defined once (house rule 1), read from the source with ast:

- the run defaults (head threshold 5 %, head cap 8, skill name and version) and the empty-artifact
  skeleton live in roofline/core/defaults.py; the hook, the CLI, the API, the analysis and the stage-C
  re-analysis refer to them by name;
- the ladder's level list lives in ladder/registry.py; the device scripts ask the registry
  (`device_suite levels`) instead of listing levels, variants or kernel files.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = [p for d in ("roofline", "ladder", "peaks") for p in (ROOT / d).rglob("*.py")]
DEFAULTS = ROOT / "roofline" / "core" / "defaults.py"
DEFAULT_NAMES = {"HEAD_THRESHOLD_PCT", "HEAD_CAP", "SKILL", "SKILL_VERSION"}
DEFAULT_PARAMS = {"head_threshold_pct", "head_threshold", "head_cap"}
SEED = next((ROOT.parent / "shared" / "seeds").glob("002_*.txt"), None) if (ROOT.parent / "shared").is_dir() else None


def _const(n) -> bool:
    return isinstance(n, ast.Constant) and not isinstance(n.value, str) and n.value is not None


def default_violations(path: Path, text: str) -> list[str]:
    """Places in `text` that write a run default as a literal instead of naming roofline.core.defaults."""
    out = []
    rel = path.name
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            out += [f"{rel}:{node.lineno} {node.name}({arg.arg}={d.value})" for arg, d in pairs
                    if arg.arg in DEFAULT_PARAMS and d is not None and _const(d)]
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and len(node.args) == 2 \
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("head_threshold_pct", "head_cap") \
                    and _const(node.args[1]):
                out.append(f"{rel}:{node.lineno} .get({node.args[0].value!r}, {node.args[1].value})")
            if isinstance(f, ast.Attribute) and f.attr == "option" and any(
                    isinstance(x, ast.Constant) and x.value in ("--head-threshold", "--head-cap") for x in node.args):
                out += [f"{rel}:{node.lineno} option default={k.value.value}" for k in node.keywords
                        if k.arg == "default" and _const(k.value)]
        elif isinstance(node, ast.Assign) and path != DEFAULTS:
            out += [f"{rel}:{node.lineno} {t.id} = literal" for t in node.targets
                    if isinstance(t, ast.Name) and t.id in DEFAULT_NAMES and isinstance(node.value, ast.Constant)]
        elif isinstance(node, ast.Dict) and path != DEFAULTS:
            out += [f"{rel}:{node.lineno} {{'{k.value}': literal}}" for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and k.value in ("skill", "skill_version") and isinstance(v, ast.Constant)]
    return out


def test_the_run_defaults_are_written_once():
    bad = [v for p in SRC for v in default_violations(p, p.read_text(encoding="utf-8"))]
    assert not bad, bad
    from roofline import api, hook  # (tests/conftest.py wraps analysis.analyze; the scan covers it)
    from roofline.core import defaults

    import inspect

    hk = inspect.signature(hook.run).parameters
    assert hk["head_threshold_pct"].default == api.analyze.__kwdefaults__["head_threshold_pct"] == defaults.HEAD_THRESHOLD_PCT
    assert hk["head_cap"].default == defaults.HEAD_CAP
    assert inspect.signature(api.analyze).parameters["head_cap"].default == defaults.HEAD_CAP


def test_the_defaults_are_the_seeds():
    from roofline.core import defaults

    if SEED is None:  # the seeds are outside the repository; the values are still pinned
        assert (defaults.HEAD_THRESHOLD_PCT, defaults.HEAD_CAP) == (5.0, 8)
        return
    text = SEED.read_text()
    m = re.search(r"pct_gpu_time >= HEAD_THRESHOLD_PCT` \(default (\d+)\),\s+biggest first, capped at ~(\d+)", text)
    assert m, "the seed's head rule moved"
    assert (defaults.HEAD_THRESHOLD_PCT, defaults.HEAD_CAP) == (float(m.group(1)), int(m.group(2)))


def test_the_cli_shows_the_defaults_from_the_one_module():
    from click.testing import CliRunner

    from roofline.core import defaults
    from roofline.cli import main

    out = CliRunner().invoke(main, ["analyze", "--help"]).output
    assert re.search(r"--head-threshold [A-Z]+.*?\[default: ([\d.]+)\]", out, re.S).group(1) == str(defaults.HEAD_THRESHOLD_PCT)
    assert re.search(r"--head-cap [A-Z]+(?: RANGE)?.*?\[default:\s+(\d+)[;\]]", out, re.S).group(1) == str(defaults.HEAD_CAP)


def test_the_scan_catches_a_literal_default():
    src = ("def run(x, head_threshold_pct: float = 5.0, *, head_cap=8):\n    return a.get('head_cap', 8)\n"
           "SKILL_VERSION = '1'\nd = {'skill_version': '1'}\n")
    got = default_violations(ROOT / "roofline" / "x.py", src)
    assert len(got) == 5, got
    assert default_violations(ROOT / "roofline" / "x.py", "def run(head_cap=HEAD_CAP):\n    pass\n") == []


def test_the_empty_artifact_has_the_seeds_top_fields():
    sys.path.insert(0, str(ROOT / "tests"))
    import seed_reader

    from roofline.core.defaults import SKILL_VERSION, empty_artifact
    art = empty_artifact(None, [{"where": "analyze", "error": "x"}])
    assert tuple(art)[: len(seed_reader.TOP)] == seed_reader.TOP and art["skill_version"] == SKILL_VERSION
    assert art["stage"] == "A" and art["peaks"]["hbm_bw_bytes_s"] is None


# ------------------------------------------------------------------ the level list
LEVEL_LIST_RX = re.compile(r"\b(\d{1,2})([ ,])(\d{1,2})\2(\d{1,2})\b")   # 1,2,3 / 7 8 9 ...
KERNEL_NAME_RX = re.compile(r"\bl\d{2}_[a-z]")                           # l07_warp_specialized ...


def level_list_violations(name: str, text: str) -> list[str]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for m in LEVEL_LIST_RX.finditer(line):
            nums = [int(m.group(k)) for k in (1, 3, 4)]
            if all(1 <= x <= 12 for x in nums) and nums == sorted(nums):
                out.append(f"{name}:{i} level list {m.group(0)!r}")
        if KERNEL_NAME_RX.search(line):
            out.append(f"{name}:{i} kernel/variant named {KERNEL_NAME_RX.search(line).group(0)!r}")
    return out


def test_the_device_scripts_read_the_level_list_from_the_registry():
    scripts = sorted((ROOT / "ladder").glob("*.sh"))
    assert [p.name for p in scripts] == ["device.sh"], "one device entry"
    bad = [v for p in scripts + sorted((ROOT / "tools" / "device").glob("*.sh"))
           for v in level_list_violations(p.name, p.read_text())]
    assert not bad, bad
    text = scripts[0].read_text()
    assert 'SUITE="python3 -m roofline.ladder.device_suite"' in text and "$SUITE levels" in text


def test_the_ladders_python_names_levels_only_through_the_registry():
    bad = []
    for p in (ROOT / "ladder").glob("*.py"):
        if p.name == "registry.py":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            # a literal tuple/list of three or more level ids, or of level-id strings
            if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 3:
                vals = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(vals) == len(node.elts) and all(
                        (isinstance(v, str) and v.isdigit()) or (type(v) is int and 1 <= v <= 12) for v in vals) \
                        and [int(v) for v in vals] == sorted(set(int(v) for v in vals)):   # ascending ids, not a shape
                    bad.append(f"{p.name}:{node.lineno} {vals}")
    assert not bad, bad


def test_device_suite_lists_exactly_the_registry():
    # one driver for every contract: its targets are the registry's levels and variants, per contract
    from roofline.ladder.device_suite import all_targets
    from roofline.ladder.contracts import CONTRACTS
    from roofline.ladder.registry import DENSE_LEVELS as LEVELS, LEVELS as ALL, VARIANTS as ALL_VARIANTS

    VARIANTS = {k: v for k, v in ALL_VARIANTS.items() if v.contract == "gemm-bf16"}
    assert sorted(all_targets()) == sorted([str(lv.id) for lv in ALL] + list(ALL_VARIANTS))
    assert sorted(t for c in CONTRACTS for t in all_targets((c,))) == sorted(all_targets())

    run = lambda *a: subprocess.run([sys.executable, "-m", "roofline.ladder.device_suite", "levels", *a],  # noqa: E731
                                    capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert run() == [",".join(str(lv.id) for lv in ALL)]
    assert run("--contract", "gemm-bf16") == [",".join(str(lv.id) for lv in LEVELS)]
    assert run("--contract", "gemm-bf16", "--variants")[0].split(",") == [str(lv.id) for lv in LEVELS] + list(VARIANTS)
    assert run("--contract", "gemm-bf16", "--files") == list(dict.fromkeys(lv.file for lv in LEVELS))
    grouped = [k for k, v in ALL_VARIANTS.items() if v.contract.startswith("grouped")]
    assert run("--contract", "grouped-bf16,grouped-fp8", "--variants")[0].split(",") == [
        str(lv.id) for lv in ALL if lv.contract.startswith("grouped")] + grouped


def test_the_level_scan_catches_a_hard_coded_list():
    assert level_list_violations("x.sh", "PASS=\"1,2,3\"\nfor l in 4 5 6; do :; done\nf=l04_tma\n") != []
    assert len(level_list_violations("x.sh", "PASS=\"1,2,3\"\nfor l in 4 5 6; do :; done\nf=l04_tma\n")) == 3
    assert level_list_violations("x.sh", "# levels 1,2,3 in a comment\nN=128 256 64\n") == []


# ------------------------------------------------------------------ the roofline arithmetic
ROOF = ROOT / "peaks" / "roof.py"   # THE definition (roofline.peaks.roof.roofline)
ROOF_NAME_RX = re.compile(r"peak|\bpf\b|\bbw\b|hbm|flops_s|bytes_s", re.I)


def _quotient(n) -> bool:
    return isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)


def roof_violations(name: str, text: str) -> list[str]:
    """Places in `text` that compute the roofline themselves instead of calling roofline.peaks.roof:
    the bound time `max(flops / peak_flops, bytes / peak_bw)` (any max/min of two quotients), the
    axis `flops / peak_flops > bytes / peak_bw` (a comparison of two quotients), or a utilization
    `work / t / roof` (a rate divided by something named as a roof: peak, pf, bw, hbm, flops_s, bytes_s)."""
    out = []
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("max", "min") \
                and sum(_quotient(a) for a in n.args) >= 2:
            out.append(f"{name}:{n.lineno} bound time {ast.unparse(n)}")
        elif isinstance(n, ast.Compare) and _quotient(n.left) and any(_quotient(c) for c in n.comparators):
            out.append(f"{name}:{n.lineno} roof axis {ast.unparse(n)}")
        elif _quotient(n) and _quotient(n.left) and ROOF_NAME_RX.search(ast.unparse(n.right)):
            out.append(f"{name}:{n.lineno} utilization {ast.unparse(n)}")
    return out


def test_the_roofline_arithmetic_is_defined_once():
    bad = [v for p in SRC if p != ROOF for v in roof_violations(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))]
    assert not bad, bad
    # and every side calls it: the analysis, stage C's write-back, the ladder's bench and standing,
    # the calculator
    from roofline.core import roofmath
    from roofline.peaks import gemm, roof
    from roofline.ladder import bench

    assert roofmath._metrics is roof.roofline and gemm.roofline_bound_s is roof.roofline_bound_s
    for mod in ("roofline/core/writeback.py", "ladder/bench.py", "ladder/standing.py", "roofline/core/calc.py"):
        assert re.search(r"\broofline(_bound_s)?\(", (ROOT / mod).read_text()), mod
    assert bench.roofline_bound_ms(8192, 8192, 8192, 1e15, 1e12) == 1e3 * 2 * 8192 ** 3 / 1e15


def test_the_roof_scan_catches_a_second_copy():
    src = ("def f(e, t_s, peaks, pf):\n"
           "    a = max(e['flops_est'] / pf, e['bytes_est'] / peaks['hbm_bw_bytes_s'])\n"
           "    ax = 'compute' if fl / pf > by / bw else 'memory'\n"
           "    return e['bytes_est'] / t_s / peaks['hbm_bw_bytes_s']\n")
    assert sorted(v.split()[1] for v in roof_violations("x.py", src)) == ["bound", "roof", "utilization"]
    assert roof_violations("x.py", "t = a / b / 1000.0\nx = max(a, b / c)\n") == []

"""The speed measures of `roofline analyze` keep every check they replaced (benchmarks/bench_analyze.py
measures the time): the schema file is still checked (here, not on every run), an artifact is still
validated (the memo of valid contents never passes an invalid one), the peak tables are resolved
from their identity lines exactly as from the full parse, and the analyze path imports no numpy,
pandas or matplotlib."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from roofline import peaks
from roofline.io import safeio
from roofline.io.schema import artifact_schema, check_schema, validate_artifact

ROOT = Path(__file__).resolve().parent.parent


def test_the_schema_file_is_a_valid_schema_of_its_draft():
    check_schema()
    broken = artifact_schema()
    broken["properties"]["stage"] = {"enum": "A"}   # enum must be an array
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.validators.validator_for(broken).check_schema(broken)


def test_validation_memo_never_passes_an_invalid_artifact(example_dir):
    from roofline.api import analyze

    art = analyze(example_dir / "profile" / "round_1" / "profile_topN.json")
    validate_artifact(art)
    validate_artifact(art)                         # the memo: same content, no second walk
    bad = copy.deepcopy(art)
    bad["entries"][0]["headroom_class"] = "great"  # not in the closed set
    with pytest.raises(jsonschema.ValidationError):
        validate_artifact(bad)
    with pytest.raises(jsonschema.ValidationError):  # and again: an invalid one is never memoised
        validate_artifact(bad)
    nan = copy.deepcopy(art)
    nan["entries"][0]["roofline_pct"] = float("nan")   # written as null: still valid
    validate_artifact(nan)


def test_table_identities_equal_the_full_parse():
    ids = dict(peaks.table_ids())
    assert len(ids) >= 7
    for path, ident in ids.items():
        full = yaml.safe_load(Path(path).read_text())
        want = {k: full[k] for k in ("device", "gfx", "names", "gfx_default") if k in full}
        assert ident == want, path


def test_a_block_style_identity_falls_back_to_the_full_parse(tmp_path, monkeypatch):
    src = (ROOT / "peaks" / "a100_sxm.yaml").read_text()
    block = src.replace('names: ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM", "A100 SXM", "A100", "NVIDIA A100-SXM4-40GB"]',
                        "names:\n  - Blockstyle GPU\n  - Another alias")
    assert block != src
    (tmp_path / "x.yaml").write_text(block)
    peaks._load_tables.cache_clear()
    try:
        ((_, ident),) = peaks.table_ids(tmp_path)
        assert ident["names"] == ["Blockstyle GPU", "Another alias"]
        assert peaks.resolve("Another alias", directory=tmp_path).device == "NVIDIA A100 SXM"
    finally:
        peaks._load_tables.cache_clear()


def test_resolving_a_device_parses_only_its_table(monkeypatch):
    peaks._load_tables.cache_clear()
    parsed = []
    real = peaks._load_yaml
    monkeypatch.setattr(peaks, "_load_yaml", lambda p: parsed.append(Path(p).name) or real(p))
    try:
        pk = peaks.resolve("NVIDIA H200", "sm_90")
        assert pk.device == "NVIDIA H200" and parsed == ["h200.yaml"]
    finally:
        peaks._load_tables.cache_clear()


def test_a_malformed_table_is_still_an_error_not_an_unknown_device(tmp_path, monkeypatch):
    from roofline.core import devices

    (tmp_path / "h200.yaml").write_text((ROOT / "peaks" / "h200.yaml").read_text() + "\nflops: [unclosed\n")
    monkeypatch.setenv("ROOFLINE_PEAKS_DIR", str(tmp_path))
    peaks._load_tables.cache_clear()
    try:
        with pytest.raises(peaks.PeaksError, match="not valid YAML"):
            devices.resolve_run_peaks("NVIDIA H200", "sm_90")
    finally:
        peaks._load_tables.cache_clear()


@pytest.mark.parametrize("depth", [1, 150, 200, 201, 5000])
def test_json_depth_without_numpy_agrees_with_the_count(depth):
    text = "[" * depth + "0" + "]" * depth + ",{}" * 300    # > MAX_JSON_DEPTH brackets in all
    assert safeio.json_depth_ok(text) is (depth <= safeio.MAX_JSON_DEPTH)
    big = "[" + "[1],{}," * 120_000 + "[" * depth + "]" * depth + "]"   # the numpy path
    assert safeio.json_depth_ok(big) is (depth + 1 <= safeio.MAX_JSON_DEPTH)


def test_analyze_imports_no_numpy_pandas_matplotlib(tmp_path):
    # a real H200 run: its peak table (h200.yaml, every recorded run) is the big one to check
    real = ROOT / "fixtures" / "traces_real"
    topn = tmp_path / "profile_topN.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(real / "decode_b64_cat.json.gz"), "-o", str(topn),
                    "--no-env-report", "-q"], check=True, env=env)
    code = ("import sys\nfrom roofline.cli import main\n"
            "try:\n    main(['analyze', sys.argv[1], '--env', sys.argv[2], '--format', 'json'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = [m for m in ('numpy', 'pandas', 'matplotlib') if m in sys.modules]\n"
            "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code, str(topn), str(real / "env_decode.json")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    art = json.loads(r.stdout)
    assert art["gpu_name"] == "NVIDIA H200" and art["entries"]
    assert "HEAVY=\n" in r.stderr, r.stderr

"""The layout installs as one package: top-level ladder/ and peaks/ map to roofline.ladder and
roofline.peaks (pyproject.toml package-dir), every package folder is listed, the kernels and peak
tables are package data and the evidence is not. tools/check_install.py checks the editable and
the non-editable install the same way (from another folder); here the wheel is built and read."""
from __future__ import annotations

import fnmatch
import importlib.util
import tempfile
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "check_install.py"
ST = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_folders() -> dict[str, Path]:
    """import name -> folder, for every folder with an __init__.py under the mapped folders."""
    out = {}
    for name, rel in ST["package-dir"].items():
        base = ROOT / rel
        for init in base.rglob("__init__.py"):
            sub = init.parent.relative_to(base).parts
            full = ".".join((name, *sub))
            # a folder under roofline/ that another mapping owns is that mapping's
            owner = max((n for n in ST["package-dir"] if full == n or full.startswith(n + ".")), key=len)
            if owner == name:
                out[full] = init.parent
    return out


def test_ladder_and_peaks_are_top_level_folders_mapped_into_the_package():
    assert ST["package-dir"] == {"roofline": "roofline", "roofline.ladder": "ladder", "roofline.peaks": "peaks"}
    assert not (ROOT / "roofline" / "ladder").exists() and not (ROOT / "roofline" / "data" / "peaks").exists()
    assert not list((ROOT / "roofline").glob("peaks*.py"))
    # every peak number lives in peaks/ (house rule 1): no YAML table left inside roofline/
    assert not list((ROOT / "roofline").rglob("*.yaml"))


def test_every_package_folder_is_listed():
    found = _package_folders()
    assert {"roofline", "roofline.ladder", "roofline.peaks", "roofline.commands"} <= set(found)
    assert sorted(found) == sorted(ST["packages"]), "a package folder is missing from [tool.setuptools] packages"


def test_kernels_and_tables_are_package_data():
    from roofline.ladder import registry

    pats = ST["package-data"]
    for lv in registry.LEVELS:
        assert any(fnmatch.fnmatch(f"kernels/sm90/{lv.file}", p) for p in pats["roofline.ladder"]), lv.file
    assert any(fnmatch.fnmatch("common.cuh", Path(p).name) for p in pats["roofline.ladder"])
    tables = list((ROOT / "peaks").glob("*.yaml"))
    assert len(tables) >= 7 and all(any(fnmatch.fnmatch(t.name, p) for p in pats["roofline.peaks"]) for t in tables)
    # evidence is not package data
    assert not any("results" in p or "fixtures" in p for ps in pats.values() for p in ps)


@pytest.mark.slow   # over ~5 s on a 2-core machine: `-m "not slow"` leaves it out
def test_the_wheel_holds_kernels_and_tables_and_no_evidence():
    spec = importlib.util.spec_from_file_location("check_install", TOOL)
    ci = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ci)
    with tempfile.TemporaryDirectory() as tmp:
        line = ci.check_wheel(Path(tmp))        # raises, naming what is missing or stray
        with zipfile.ZipFile(next((Path(tmp) / "wheel").glob("roofline-*.whl"))) as z:
            names = z.namelist()
    assert line.startswith("wheel: ok")
    assert "roofline/ladder/kernels/sm90/l10_splitk.cu" in names and "roofline/peaks/h200.yaml" in names
    assert not any(n.startswith("roofline/ladder/results/") or "bench_all.json" in n for n in names)

"""Every third-party module the package imports is declared: in `dependencies`, or in the `gpu`
extra for the GPU paths (issue 13 item 8: `pip install 'roofline[gpu]'` must install what the
cuBLAS baseline and `peaks measure` import, torch included)."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
# import name -> distribution name, where they differ
DIST = {"yaml": "pyyaml", "pynvml": "nvidia-ml-py", "cupy": "cupy-cuda13x", "cuda": "cuda-python", "nsight": "nsight-python",
        "ncu_report": "ncu-report", "hta": "holistictraceanalysis"}


def _reqs(lst) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip().lower() for r in lst}


def _imports() -> dict[str, set[str]]:
    """top-level imported module -> files importing it (absolute imports only), over every folder
    that installs as part of the package (roofline/, and ladder/ and peaks/ by package-dir)."""
    out: dict[str, set[str]] = {}
    for p in [f for d in ("roofline", "ladder", "peaks") for f in (ROOT / d).rglob("*.py")]:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                out.setdefault(n.split(".")[0], set()).add(str(p.relative_to(ROOT)))
    return out


def test_every_third_party_import_is_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = _reqs(meta["dependencies"])
    extras = {k: _reqs(v) for k, v in meta["optional-dependencies"].items()}
    declared = base | set().union(*extras.values())
    third = {m: f for m, f in _imports().items() if m not in sys.stdlib_module_names and m != "roofline"}
    assert third, "the scan found no third-party import at all"
    missing = {m: sorted(f) for m, f in third.items() if DIST.get(m, m).lower() not in declared}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_gpu_extra_installs_torch_for_the_cublas_baseline_and_peaks_measure():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    gpu = _reqs(meta["optional-dependencies"]["gpu"])
    imports = _imports()
    for m in ("torch", "cupy"):
        assert m in imports, m
        assert DIST.get(m, m) in gpu, f"{m} is imported by {sorted(imports[m])} but not in the gpu extra"
    assert "ladder/gpu.py" in imports["torch"]
    assert "peaks/measure.py" in imports["torch"]


def test_missing_torch_message_says_what_to_install():
    from roofline.ladder import gpu
    assert "pip install 'roofline[gpu]'" in gpu.TORCH_MISSING and "torch" in gpu.TORCH_MISSING

import copy
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "roofline" / "data" / "example"
FIXTURES = ROOT / "fixtures"


# The device image (where `pytest -m gpu` runs) lacks some CPU-side dependencies (ijson): modules
# that need them at import time are not collected there, instead of stopping the whole collection.
collect_ignore = []
try:
    import ijson  # noqa: F401
except ImportError:
    collect_ignore.append("test_ingest_trace.py")


def _gpu_available() -> bool:
    try:
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if not _gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy")
        for it in items:
            if "gpu" in it.keywords:
                it.add_marker(skip)


@pytest.fixture
def example_dir(tmp_path):
    """A writable copy of the bundled worked example (seed 002 section 9)."""
    d = tmp_path / "run"
    shutil.copytree(EXAMPLE, d)
    return d


@pytest.fixture
def example_topn():
    return json.loads((EXAMPLE / "profile" / "round_1" / "profile_topN.json").read_text())


@pytest.fixture
def example_env():
    return json.loads((EXAMPLE / "env_report.json").read_text())


@pytest.fixture
def example_config():
    return json.loads((EXAMPLE / "config.json").read_text())


def h200_env(**kw):
    env = {"gfx": "sm_90", "gpu_name": "NVIDIA H200", "model_arch_class": "dense", "model_dtype": "bf16",
           "workload": {"isl": 1024, "osl": 1024, "conc": 64}}
    env.update(kw)
    return env


def entry(name, pct, lat_ms, lps=1, **kw):
    e = {"name": name, "pct_gpu_time": pct, "regimes": {"decode": {"base_latency_ms": lat_ms, "launches_per_step": lps}}}
    e.update(kw)
    return e


def topn(*entries, **kw):
    t = {"schema_version": 1, "round": 1, "serving": {"n_decode_steps": 1000, "n_prefill_steps": 10},
         "entries": list(entries)}
    t.update(kw)
    return t


@pytest.fixture
def clone():
    return copy.deepcopy

import copy
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "roofline" / "data" / "example"
FIXTURES = ROOT / "fixtures"


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


# ----------------------------------------------------------------------------- artifact contract
# Every artifact the suite produces is read by the strict seed reader (tests/seed_reader.py, its
# own checker of seed 002 section 2) and validated against the project's JSON Schema: each one
# analysis.analyze returns (serialized as it would be written, with its Top-N for the verbatim
# checks), every one handed to report.write_artifact (hook, CLI, rerun and feedback writes, wherever
# they go) and every profile_roofline.json left under the test's tmp_path. A test that writes a deliberately broken artifact says so with
# @pytest.mark.broken_artifact(reason).
def pytest_configure(config):
    config.addinivalue_line("markers", "broken_artifact(reason): the test writes an invalid artifact on purpose")


def _contract_problems(art, topn_raw):
    import seed_reader

    from roofline.report import artifact as report
    from roofline.io.schema import validate_artifact

    written = json.loads(report.to_json(art))
    probs = seed_reader.check(written, topn_raw)
    try:
        validate_artifact(written)
    except Exception as exc:  # jsonschema.ValidationError
        probs.append(f"schema: {str(exc).splitlines()[0]}")
    return probs


@pytest.fixture(autouse=True)
def _artifact_contract(request, monkeypatch):
    from roofline.core import analysis

    if request.node.get_closest_marker("broken_artifact"):
        yield
        return
    produced = []
    orig = analysis.analyze

    def analyze_and_keep(topn, *a, **kw):
        art = orig(topn, *a, **kw)
        try:
            produced.append(("analysis.analyze", _contract_problems(art, topn.raw)))
        except Exception as exc:
            produced.append(("analysis.analyze", [f"cannot serialize: {exc.__class__.__name__}: {exc}"]))
        return art

    monkeypatch.setattr(analysis, "analyze", analyze_and_keep)
    from roofline.report import artifact as _report

    orig_write = _report.write_artifact

    def write_and_check(art, out_dir, *a, **kw):   # every write, wherever it goes (rerun write-backs too)
        try:
            produced.append((f"write_artifact({out_dir})", _contract_problems(art, None)))
        except Exception as exc:
            produced.append((f"write_artifact({out_dir})", [f"cannot serialize: {exc.__class__.__name__}: {exc}"]))
        return orig_write(art, out_dir, *a, **kw)

    monkeypatch.setattr(_report, "write_artifact", write_and_check)
    yield
    tmp = request.node.funcargs.get("tmp_path")
    if tmp is not None:
        for p in sorted(Path(tmp).rglob("profile_roofline.json")):
            try:
                art = json.loads(p.read_text(encoding="utf-8"))
            except ValueError as exc:
                produced.append((str(p), [f"not JSON: {exc}"]))
                continue
            topn_raw = None
            src = (art.get("inputs") or {}).get("topn") if isinstance(art, dict) else None
            if src and Path(src).is_file():
                try:
                    topn_raw = json.loads(Path(src).read_text(encoding="utf-8"))
                except ValueError:
                    topn_raw = None
            produced.append((str(p), _contract_problems(art, topn_raw)))
    failed = [(w, ps) for w, ps in produced if ps]
    if failed:
        pytest.fail("artifact breaks the seed-002 contract:\n" + "\n".join(
            f"  {w}: " + "; ".join(ps[:6]) for w, ps in failed[:5]), pytrace=False)

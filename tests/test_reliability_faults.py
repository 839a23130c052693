"""Faults (issue 17): kill -9 at every point of an artifact write, concurrent runs on one round
directory, read-only and full output directories, a dependency missing, a counters file removed
mid-read. The artifact pair is replaced together or the old pair stays; no temporary file is left
once the directory is next written (report.recover); no traceback, one line and exit 2."""
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roofline import hook
from roofline.io import pairwrite
from roofline.report import artifact as report
from roofline.counters import CounterReadError, load as load_counters

import reliability as R
from conftest import ROOT

ART, MD = report.ARTIFACT_JSON, report.ARTIFACT_MD
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _layout(tmp_path) -> Path:
    """A run root with the H200 fixture (stage B Top-N), its env report and the example config."""
    work = tmp_path / "run"
    work.mkdir()
    rd, _ = R._round(work, None)
    return rd


def _pair(d: Path):
    return (d / ART).read_bytes(), (d / MD).read_bytes()


def _dots(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


# A child that writes `new.json`'s artifact into DIR and SIGKILLs itself just before its K-th
# filesystem call (or, with HALF, half-way through its K-th os.write); K=0 counts the calls.
CHILD = textwrap.dedent("""
    import json, os, signal, sys
    from roofline.report import artifact as report
    d, k, half = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "half"
    art = json.load(open(sys.argv[4]))
    js, md = report.to_json(art), report.to_markdown(art)   # rendering is not a write
    n = [0]
    def wrap(name):
        real = getattr(os, name)
        def f(*a, **kw):
            n[0] += 1
            if n[0] == k:
                if half and name == "write":
                    real(a[0], bytes(a[1][: len(a[1]) // 2]))
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **kw)
        return f
    for name in ("open", "write", "fsync", "close", "rename", "replace", "rmdir", "unlink", "mkdir",
                 "scandir", "stat", "lstat"):
        setattr(os, name, wrap(name))
    report.write_artifact(art, d)
    print(n[0])
""")


def _new_artifact(rd: Path, tmp_path: Path) -> Path:
    """A different artifact than the one in rd (stage C forced), as a JSON file."""
    from roofline import api

    art = api.analyze(rd / "profile_topN.json", stage="C", head_threshold_pct=1.0)
    p = tmp_path / "new.json"
    p.write_text(json.dumps(art))
    return p


@pytest.mark.slow   # over ~5 s on a 2-core machine: `-m "not slow"` leaves it out
def test_kill_9_at_every_point_of_an_artifact_write(tmp_path):
    rd = _layout(tmp_path)
    assert hook.run(rd)["skill_errors"] == []
    old = _pair(rd)
    newp = _new_artifact(rd, tmp_path)
    art_new = json.loads(newp.read_text())
    new = (report.to_json(art_new).encode(), report.to_markdown(art_new).encode())
    assert new != old
    seed = tmp_path / "seed"
    shutil.copytree(rd, seed)
    # how many filesystem calls one write makes
    r = subprocess.run([sys.executable, "-c", CHILD, str(rd), "0", "no", str(newp)], env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    n_calls = int(r.stdout.split()[-1])
    assert _pair(rd) == new and _dots(rd) == []
    assert n_calls >= 10
    outcomes = []
    for mode in ("before", "half"):
        for k in range(1, n_calls + 1):
            shutil.rmtree(rd)
            shutil.copytree(seed, rd)
            r = subprocess.run([sys.executable, "-c", CHILD, str(rd), str(k), "half" if mode == "half" else "no",
                                str(newp)], env=ENV, capture_output=True, text=True, timeout=120)
            assert r.returncode == -9, (k, r.returncode, r.stderr)
            seen = _pair(rd)
            if not (rd / report.COMMIT_DIR).exists():
                # outside the swap window the visible pair is whole: the old one or the new one
                assert seen in (old, new), f"kill at call {k} ({mode}): a mixed or torn pair"
            report.recover(rd)  # what the next write does first
            after = _pair(rd)
            assert after in (old, new), f"kill at call {k} ({mode}): a mixed pair after recovery"
            assert _dots(rd) == [], f"kill at call {k} ({mode}): left {_dots(rd)}"
            outcomes.append("old" if after == old else "new")
            # and the next write still works
            report.write_artifact(art_new, rd)
            assert _pair(rd) == new and _dots(rd) == []
        # old until the commit point, new after it: never back and forth
        first_new = outcomes.index("new") if "new" in outcomes else len(outcomes)
        assert outcomes[first_new:] == ["new"] * (len(outcomes) - first_new), outcomes
        assert "old" in outcomes and "new" in outcomes
        outcomes = []


@pytest.mark.slow   # 2-4 s on a 2-core machine: `-m "not slow"` leaves it out
def test_concurrent_runs_on_one_round_directory(tmp_path):
    rd = _layout(tmp_path)
    # each threshold gives another artifact; the survivor must be one of them, whole
    thresholds = [1.0, 5.0, 10.0, 20.0]

    def norm(js: bytes) -> str:  # the artifact without its timestamp
        d = json.loads(js)
        d.pop("generated_at", None)
        return json.dumps(d, sort_keys=True)

    expected = {}
    for th in thresholds:
        s = hook.run(rd, head_threshold_pct=th)
        assert s["skill_errors"] == []
        expected[norm(_pair(rd)[0])] = th
    assert len(expected) == len(thresholds)
    code = ("import sys\nfrom roofline import hook\n"
            "for _ in range(6):\n"
            "    s = hook.run(sys.argv[1], head_threshold_pct=float(sys.argv[2]))\n"
            "    assert s['json'] and not s['skill_errors'], s\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(rd), str(th)], env=ENV, stderr=subprocess.PIPE)
             for th in thresholds]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    js, md = _pair(rd)
    assert norm(js) in expected                                  # one run's artifact, whole
    assert md.decode() == report.to_markdown(json.loads(js))     # and the markdown of that same run
    assert _dots(rd) == []


def _cli(args):
    code, out, err = R.cli(args)
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("fault", ["EROFS", "EACCES", "ENOSPC"])
def test_read_only_or_full_output_directory(tmp_path, monkeypatch, fault):
    rd = _layout(tmp_path)
    assert hook.run(rd)["skill_errors"] == []
    old = _pair(rd)
    err_no = getattr(errno, fault)
    real_write, real_mkdir = os.write, os.mkdir

    if fault == "ENOSPC":
        def write(fd, data):  # the disk fills up half-way through the first file
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(err_no, os.strerror(err_no))
        monkeypatch.setattr(pairwrite.os, "write", write)
    else:
        def mkdir(path, *a, **k):  # the directory refuses new entries
            raise OSError(err_no, os.strerror(err_no), str(path))
        monkeypatch.setattr(os, "mkdir", mkdir)
    s = hook.run(rd, stage="C", head_threshold_pct=1.0)  # never raises
    assert s["json"] is None
    assert [e for e in s["skill_errors"] if e["where"] == "write" and os.strerror(err_no) in e["error"]]
    code, out, err = _cli(["analyze", str(rd / "profile_topN.json"), "--stage", "C"])
    monkeypatch.undo()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write the artifact" in err
    assert _pair(rd) == old and _dots(rd) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_read_only_directory_for_real(tmp_path):
    rd = _layout(tmp_path)
    assert hook.run(rd)["skill_errors"] == []
    old = _pair(rd)
    rd.chmod(0o555)
    try:
        s = hook.run(rd, stage="C")
        assert s["json"] is None and any(e["where"] == "write" for e in s["skill_errors"])
    finally:
        rd.chmod(0o755)
    assert _pair(rd) == old and _dots(rd) == []


def test_topn_output_on_a_full_disk(tmp_path, monkeypatch):
    real_write = os.write

    def write(fd, data):
        real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pairwrite.os, "write", write)
    out = tmp_path / "o" / "profile_topN.json"
    code, _, err = _cli(["topn", str(R.FIX / "traces" / "prefill.json.gz"), "-o", str(out), "-q"])
    monkeypatch.undo()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left" in err
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_ncu_report_package_missing(tmp_path, monkeypatch):
    import gzip

    rep = tmp_path / "small.ncu-rep"
    rep.write_bytes(gzip.decompress(R.BASE_NCU_REP_GZ))
    monkeypatch.setitem(sys.modules, "ncu_report", None)       # the import fails
    monkeypatch.setenv("PATH", str(tmp_path))                  # and no ncu install to borrow it from
    rd = _layout(tmp_path)
    code, _, err = _cli(["analyze", str(rd / "profile_topN.json"), "--counters", str(rep)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "ncu-report" in err
    code, _, err = _cli(["topn", str(rep), "-o", str(tmp_path / "t.json")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "ncu-report" in err
    s = hook.run(rd, counters=str(rep))
    assert any("ncu-report" in e["error"] for e in s["skill_errors"])


def test_matplotlib_missing(tmp_path, monkeypatch):
    rd = _layout(tmp_path)
    assert hook.run(rd)["skill_errors"] == []     # the hook never needs matplotlib
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    code, _, err = _cli(["plot", str(rd / ART)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "matplotlib" in err
    assert not (rd / "roofline.png").exists()
    assert hook.run(rd)["skill_errors"] == []


def test_cupy_missing(tmp_path, monkeypatch):
    rd = _layout(tmp_path)
    assert hook.run(rd)["skill_errors"] == []
    old = _pair(rd)
    monkeypatch.setitem(sys.modules, "cupy", None)
    res = hook.rerun(rd / ART)                    # never raises; the artifact stays as it was
    assert res["error"] and res["rerun"] == []
    code, _, err = _cli(["rerun", str(rd / ART)])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert _pair(rd) == old and _dots(rd) == []


def test_counters_file_removed_mid_read(tmp_path, monkeypatch):
    from roofline.io import safeio

    src = tmp_path / "known_raw.csv"
    src.write_bytes(R.BASE_NCU_COUNTERS_CSV)
    whole = load_counters(src)
    real_open = safeio.open_regular

    def open_then_remove(path):
        f = real_open(path)
        os.unlink(path)  # removed once open: the read still sees the whole file
        return f

    monkeypatch.setattr(safeio, "open_regular", open_then_remove)
    got = load_counters(src)
    assert not src.exists()
    assert [(k.name, k.launches, k.dram_bytes) for k in got] == [(k.name, k.launches, k.dram_bytes) for k in whole]
    monkeypatch.undo()
    with pytest.raises(CounterReadError, match="no such file"):  # removed before: one clean error
        load_counters(src)
    rd = _layout(tmp_path)
    code, _, err = _cli(["analyze", str(rd / "profile_topN.json"), "--counters", str(src)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such file" in err


def test_a_failed_run_after_a_crash_mid_swap_keeps_a_whole_pair(tmp_path):
    # the state a kill between the two renames leaves: new JSON visible, new markdown still in the
    # commit directory, old markdown visible. A refused re-run must not "keep" that mixed pair.
    rd = _layout(tmp_path)
    assert hook.run(rd)["skill_errors"] == []
    art_new = json.loads(_new_artifact(rd, tmp_path).read_text())
    commit = rd / report.COMMIT_DIR
    commit.mkdir()
    (rd / ART).write_text(report.to_json(art_new))
    (commit / MD).write_text(report.to_markdown(art_new))
    (rd / "profile_topN.json").write_text("{ truncated")
    s = hook.run(rd)
    assert any(e["where"] == "analyze" for e in s["skill_errors"])
    js, md = _pair(rd)
    assert md.decode() == report.to_markdown(json.loads(js)) == report.to_markdown(art_new)
    assert _dots(rd) == []

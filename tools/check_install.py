#!/usr/bin/env python3
"""Check that the top-level ladder/ and peaks/ folders install as roofline.ladder and
roofline.peaks in the three ways the project is installed (pyproject.toml's package-dir mapping):

    python tools/check_install.py                  # wheel, editable and non-editable install
    python tools/check_install.py --modes wheel    # one or more of: wheel editable install

- wheel: `pip wheel . --no-deps`; its file list must hold every level's kernel
  (roofline/ladder/kernels/sm90/*.cu, *.cuh), every peak table (roofline/peaks/*.yaml), the
  runtime dispatch table and the ladder evidence `advise` reads, and no other evidence (fixtures/, bench results) and no tests.
- editable / install: a throwaway venv (--system-site-packages, for click/pyyaml/numpy), then
  `pip install -e . --no-deps` or `pip install . --no-deps`, and a probe run from another folder
  that imports roofline, roofline.ladder and roofline.peaks from the install (not from this
  checkout, not from another editable install), finds every registry level's .cu file, resolves the
  H200 peaks from the tables, loads the dispatch table, runs `roofline analyze` on the bundled
  example and `roofline ladder advise` on its shipped evidence (roofline/data/).
Prints one line per mode and exits 1 on the first failed mode.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, sys
from pathlib import Path
import roofline, roofline.ladder, roofline.peaks
from roofline.ladder import registry
from roofline.ladder.dispatch import default_dispatch_table
from roofline import peaks
files = {n: str(Path(m.__file__).resolve()) for n, m in
         (("roofline", roofline), ("roofline.ladder", roofline.ladder), ("roofline.peaks", roofline.peaks))}
missing = [lv.file for lv in registry.LEVELS if not (registry.KERNEL_DIR / lv.file).is_file()]
pk = peaks.resolve("NVIDIA H200", "sm_90")
print(json.dumps({"files": files, "missing_kernels": missing, "n_levels": len(registry.LEVELS),
                  "tables": sorted(p.name for p in peaks.peaks_dir().glob("*.yaml")),
                  "h200_hbm_bw_bytes_s": pk.hbm_bw_bytes_s, "dispatch": default_dispatch_table() is not None}))
"""


def _pip(py: Path, *args: str) -> None:
    subprocess.run([str(py), "-m", "pip", "-q", *args], check=True, cwd=args[-1],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def clean_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and untracked but not ignored) copied to `dest`: a build from
    here sees what a fresh clone sees, and leaves no build/ or *.egg-info in the checkout."""
    import shutil

    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, out):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def wheel_names(out: Path) -> list[str]:
    src = clean_copy(out.parent / "src_wheel")
    subprocess.run([sys.executable, "-m", "pip", "-q", "wheel", str(src), "--no-deps",
                    "-w", str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    whl = next(out.glob("roofline-*.whl"))
    with zipfile.ZipFile(whl) as z:
        return z.namelist()


def check_wheel(tmp: Path) -> str:
    names = set(wheel_names(tmp / "wheel"))
    sys.path.insert(0, str(ROOT))
    from roofline.ladder import registry

    want = {f"roofline/ladder/kernels/sm90/{p.name}" for p in (ROOT / "ladder" / "kernels" / "sm90").iterdir()
            if p.suffix in (".cu", ".cuh")}
    want |= {f"roofline/peaks/{p.name}" for p in (ROOT / "peaks").glob("*.yaml")}
    want |= {"roofline/data/ladder_dispatch_sm90a_bf16.json", "roofline/data/ladder_evidence_h200.json",
             "roofline/ladder/dispatch.py",
             "roofline/peaks/__init__.py", "roofline/peaks/envelope.py", "roofline/peaks/md.py",
             "roofline/peaks/catalogue/datasheet_catalogue.yaml"}
    want |= {f"roofline/ladder/kernels/sm90/{lv.file}" for lv in registry.LEVELS}
    missing = sorted(want - names)
    stray = sorted(n for n in names if n.startswith(("fixtures/", "tests/", "ladder/", "peaks/"))
                   or "/results/" in n or n.endswith(".log"))
    if missing or stray:
        raise AssertionError(f"wheel: missing {missing}, stray {stray}")
    cu = sum(n.endswith(".cu") for n in names)
    return f"wheel: ok ({len(names)} files, {cu} .cu kernels, {sum(n.endswith('.yaml') and '/peaks/' in n for n in names)} peak tables)"


def check_venv(tmp: Path, editable: bool) -> str:
    env_dir = tmp / ("venv_e" if editable else "venv_i")
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    src = ROOT if editable else clean_copy(tmp / "src_install")
    _pip(py, "install", "--no-deps", *(["-e"] if editable else []), str(src))
    away = tmp / "elsewhere"
    away.mkdir(exist_ok=True)
    r = subprocess.run([str(py), "-c", PROBE], cwd=away, capture_output=True, text=True,
                       env={"PATH": str(env_dir / "bin"), "HOME": str(tmp)})
    if r.returncode != 0:
        raise AssertionError(f"{'editable' if editable else 'install'}: probe failed: {r.stderr.strip()[-400:]}")
    d = json.loads(r.stdout)
    f = d["files"]
    if editable:
        want = {"roofline": ROOT / "roofline" / "__init__.py", "roofline.ladder": ROOT / "ladder" / "__init__.py",
                "roofline.peaks": ROOT / "peaks" / "__init__.py"}
    else:
        site = Path(f["roofline"]).parent
        if str(site).startswith(str(ROOT)) or not str(site).startswith(str(env_dir)):
            raise AssertionError(f"install: roofline imported from {site}, not from the venv")
        want = {"roofline": site / "__init__.py", "roofline.ladder": site / "ladder" / "__init__.py",
                "roofline.peaks": site / "peaks" / "__init__.py"}
    bad = {k: f[k] for k, v in want.items() if Path(f[k]) != v.resolve()}
    problems = [f"imported from {bad}"] if bad else []
    if d["missing_kernels"]:
        problems.append(f"kernels missing: {d['missing_kernels']}")
    want_tables = sorted(p.name for p in (ROOT / "peaks").glob("*.yaml"))
    if d["tables"] != want_tables:
        problems.append(f"tables {d['tables']} != {want_tables}")
    if not d["dispatch"]:
        problems.append("dispatch table not found")
    # the bundled example through the installed CLI (package data: example, peak tables, schema)
    r2 = subprocess.run([str(py), "-m", "roofline.cli", "analyze", "--format", "json"], cwd=away, capture_output=True,
                        text=True, env={"PATH": str(env_dir / "bin"), "HOME": str(tmp)})
    if r2.returncode != 0 or not json.loads(r2.stdout or "{}").get("entries"):
        problems.append(f"`roofline analyze` (bundled example) failed: {r2.stderr.strip()[-300:]}")
    # `ladder advise` on its shipped evidence (package data, not fixtures/): a bench result given
    # as SOURCE from outside the checkout, the recorded runs found beside the package
    bench = away / "my_bench.json"
    bench.write_text((ROOT / "fixtures" / "ladder" / "h200_bench_square_llama.json").read_text())
    r3 = subprocess.run([str(py), "-m", "roofline.cli", "ladder", "advise", str(bench), "--level", "3", "--shape",
                         "4096x4096x4096", "--format", "json"], cwd=away, capture_output=True, text=True,
                        env={"PATH": str(env_dir / "bin"), "HOME": str(tmp)})
    runs = {r for row in (json.loads(r3.stdout or "{}").get("evidence") or {}).get("transition", {}).get("rows", [])
            for r in row["runs"]}
    if r3.returncode != 0 or "no shipped ladder evidence" in r3.stderr or len(runs) < 2:
        problems.append(f"`roofline ladder advise` without its shipped evidence (runs {sorted(runs)}): "
                        f"{r3.stderr.strip()[-300:]}")
    if problems:
        raise AssertionError(f"{'editable' if editable else 'install'}: " + "; ".join(problems))
    return (f"{'editable' if editable else 'install'}: ok (roofline.ladder from {Path(f['roofline.ladder']).parent}, "
            f"{d['n_levels']} levels with kernels, {len(d['tables'])} peak tables, H200 HBM "
            f"{d['h200_hbm_bw_bytes_s'] / 1e12:.2f} TB/s, dispatch table loaded, `roofline analyze` of the example and `ladder advise` ran)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="+", choices=["wheel", "editable", "install"],
                    default=["wheel", "editable", "install"])
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for m in a.modes:
            try:
                line = check_wheel(tmp) if m == "wheel" else check_venv(tmp, editable=(m == "editable"))
            except (AssertionError, subprocess.CalledProcessError) as exc:
                err = getattr(exc, "stderr", None)
                print(f"{m}: FAILED: {exc}" + (f" {err.decode()[-400:]}" if isinstance(err, bytes) else ""))
                return 1
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

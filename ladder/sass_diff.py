"""SASS identity of every ladder build across a source change (no GPU): each build of the registry
(LEVELS, VARIANTS, WRONG) is compiled with nvcc for sm_90a from its self-contained source
(build.level_source, the text NVRTC and prebuild.py compile) with its -D switches, dumped with
`cuobjdump --dump-sass`, and hashed (the instruction lines: addresses, opcodes, encodings).

    python3 -m roofline.ladder.sass_diff record OUT.json [-j N] [BUILD ...]   # hashes of the tree as it is
    python3 -m roofline.ladder.sass_diff diff BEFORE.json AFTER.json         # one line per build, exit 1 on any change

`record` writes {build: {"sha": sha1 of the SASS, "lines": lines of the listing, "kernel": entry, "defines": [...]}};
BUILD names are level ids, VARIANTS or WRONG keys (default: all of them)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .build import NVCC_GENCODE, BuildError, level_source, nvcc_path
from .registry import LEVELS, VARIANTS, WRONG, Level

def all_builds() -> dict[str, Level]:
    """Every build the registry names: level ids, then VARIANTS keys, then WRONG keys."""
    return {**{str(lv.id): lv for lv in LEVELS}, **VARIANTS, **WRONG}


def sass_lines(text: str) -> list[str]:
    """Every non-blank line of a cuobjdump --dump-sass listing (function headers, header flags, each
    instruction with its address and encoding, and the control words: stalls, barriers, reuse)."""
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def sass_of(lv: Level, nvcc: str | None = None) -> list[str]:
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc not found on PATH")
    with tempfile.TemporaryDirectory() as td:
        src, cub = Path(td) / "k.cu", Path(td) / "k.cubin"
        src.write_text(level_source(lv))
        cmd = [nvcc, "-gencode", NVCC_GENCODE, "-std=c++17", "-cubin", str(src), "-o", str(cub)]
        cmd += [f"-D{d}" for d in lv.defines]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"nvcc failed for {lv.file} {lv.defines}:\n{proc.stderr}")
        dump = subprocess.run(["cuobjdump", "--dump-sass", str(cub)], capture_output=True, text=True, check=True)
    return sass_lines(dump.stdout)


def record(names: list[str], jobs: int = 2) -> dict[str, dict]:
    builds = all_builds()

    def one(name: str) -> tuple[str, dict]:
        lv = builds[name]
        lines = sass_of(lv)
        return name, {"sha": hashlib.sha1("\n".join(lines).encode()).hexdigest(), "lines": len(lines),
                      "kernel": lv.kernel, "file": lv.file, "defines": list(lv.defines)}

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return dict(ex.map(one, names))


def diff(before: dict[str, dict], after: dict[str, dict]) -> tuple[list[str], bool]:
    """One line per build of either record; ok when every build is in both with the same SASS hash."""
    rows, ok = [], True
    for name in sorted(set(before) | set(after), key=lambda n: (not n.isdigit(), n.zfill(3))):
        b, a = before.get(name), after.get(name)
        if b is None or a is None:
            ok = False
            rows.append(f"{name:40s} {'only after' if b is None else 'only before'}")
            continue
        same = b["sha"] == a["sha"]
        ok &= same
        rows.append(f"{name:40s} {'identical' if same else 'CHANGED'} {a['sha'][:12]} {a['lines']:6d} lines"
                    + ("" if same else f" (before {b['sha'][:12]}, {b['lines']} lines)"))
    return rows, ok


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "record":
        jobs, rest = 2, argv[2:]
        if rest[:1] == ["-j"]:
            jobs, rest = int(rest[1]), rest[2:]
        names = rest or list(all_builds())
        res = record(names, jobs)
        Path(argv[1]).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        print(f"{len(res)} builds recorded in {argv[1]}")
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        rows, ok = diff(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()))
        print("\n".join(rows))
        n = len(rows)
        print(f"{n} builds: {'all identical' if ok else 'SASS CHANGED or missing'}")
        return 0 if ok else 1
    print(__doc__)
    return 2


if __name__ == "__main__":  # pragma: no cover - a build tool
    sys.exit(main(sys.argv[1:]))

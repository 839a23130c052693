"""Build cubins of ladder levels ahead (nvcc on any machine with CUDA 13, no GPU) for a device run
that loads them instead of compiling with NVRTC (build.get_kernel reads LADDER_CUBIN_DIR):

    python3 -m roofline.ladder.prebuild DIR [TARGET ...]     # targets: level ids / variant names; default all

The cubin's name holds a hash of the exact source, defines and options (build.source_key), so a
stale cubin is never loaded: an edited kernel falls back to NVRTC."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from .build import NVCC_GENCODE, BuildError, level_source, nvcc_path, source_key
from .registry import LEVELS, VARIANTS, get_level


def prebuild(out: Path, targets: list[str]) -> list[str]:
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc not found on PATH")
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for t in targets:
        lv = get_level(int(t)) if t.isdigit() else VARIANTS[t]
        dst = out / f"{source_key(lv)}.cubin"
        if dst.is_file():
            made.append(dst.name)
            continue
        with tempfile.TemporaryDirectory() as td:
            src = Path(td) / "k.cu"
            src.write_text(level_source(lv))
            cmd = [nvcc, "-gencode", NVCC_GENCODE, "-std=c++17", "-cubin", str(src), "-o", str(dst)]
            cmd += [f"-D{d}" for d in lv.defines]
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"nvcc failed for {t}:\n{proc.stderr}")
        made.append(dst.name)
    return made


if __name__ == "__main__":  # pragma: no cover - a build tool
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python -m roofline.ladder.prebuild DIR [TARGET ...]")
    tg = args[1:] or [str(lv.id) for lv in LEVELS] + list(VARIANTS)
    print("\n".join(prebuild(Path(args[0]), tg)))

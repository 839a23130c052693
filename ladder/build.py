"""Build ladder kernels: NVRTC through CuPy at run time (cached), nvcc + ptxas for resource checks.

The source handed to NVRTC is the level file with `#include "common.cuh"` replaced by the
header's text, so the build needs no include path and the cache key is the exact source.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from roofline.io.errors import RooflineError

from .registry import ARCH, KERNEL_DIR, Level

NVRTC_OPTIONS = (f"-arch={ARCH}", "-std=c++17")
NVCC_GENCODE = "arch=compute_90a,code=sm_90a"  # plain sm_90 rejects wgmma


class BuildError(RooflineError, RuntimeError):
    """A ladder level that does not build (source, nvrtc/nvcc, cubin). A RuntimeError too: the
    device scripts and `roofline rerun` catch RuntimeError around a launch."""


def level_source(level: Level) -> str:
    """The self-contained CUDA source of one level: every `#include "x.cuh"` of the ladder's own
    headers (common.cuh; ws.cuh, mma_small.cuh, grouped.cuh for levels 7+) replaced by the
    header's text, each header once, nested includes too."""
    text = level.path.read_text()
    if '#include "common.cuh"' not in text:
        raise BuildError(f"{level.file} does not include common.cuh")
    done: set[str] = set()
    rx = re.compile(r'#include "([\w.]+\.cuh)"')
    while (m := rx.search(text)) is not None:
        hdr = m.group(1)
        body = "" if hdr in done else (KERNEL_DIR / hdr).read_text()
        done.add(hdr)
        text = text[:m.start()] + body + text[m.end():]
    return text


@functools.lru_cache(maxsize=None)
def _module(source: str, defines: tuple[str, ...]):
    import cupy as cp  # GPU-only dependency, imported on use

    opts = NVRTC_OPTIONS + tuple(f"-D{d}" for d in defines)
    mod = cp.RawModule(code=source, options=opts)
    mod.compile()
    return mod


def source_key(level: Level) -> str:
    """A name for one build: kernel + hash of its source, defines and NVRTC options (prebuilt cubins)."""
    import hashlib

    h = hashlib.sha1("\n".join((level_source(level), *level.defines, *NVRTC_OPTIONS)).encode()).hexdigest()[:16]
    return f"{level.kernel}_{h}"


@functools.lru_cache(maxsize=None)
def _cubin_module(path: str):
    import cupy as cp

    return cp.RawModule(path=path)


def get_kernel(level: Level):
    """The cupy.RawKernel of a level (compiled once per process; CuPy also caches on disk). With
    LADDER_CUBIN_DIR set, a cubin built ahead by `python -m roofline.ladder.prebuild DIR` for this
    exact source is loaded instead (no NVRTC time on the device). Looked up once per level and
    process: reading and hashing the sources on every launch cost 0.25-0.6 ms of host time, more
    than the timer's 0.3 ms GPU spin hides (the mid-shape bench of the H200 run read 44 us kernels
    as 250-600 us; ncu's durations were right)."""
    kern = _KERNELS.get(level)
    if kern is None:
        kern = _KERNELS[level] = _find_kernel(level)
    return kern


_KERNELS: dict = {}


def _find_kernel(level: Level):
    import os

    try:
        pre = os.environ.get("LADDER_CUBIN_DIR")
        if pre and (Path(pre) / f"{source_key(level)}.cubin").is_file():
            return _cubin_module(str(Path(pre) / f"{source_key(level)}.cubin")).get_function(level.kernel)
        return _module(level_source(level), level.defines).get_function(level.kernel)
    except Exception as exc:  # NVRTC errors carry the log; keep it
        raise BuildError(f"building level {level.id} ({level.file}) failed: {exc}") from exc


# ---------------------------------------------------------------- CPU-side resource report
@dataclass(frozen=True)
class PtxasReport:
    kernel: str
    registers: int
    smem_bytes: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    raw: str


_RE_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_RE_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(text: str) -> dict[str, PtxasReport]:
    """Parse `ptxas -v` output into one report per entry function."""
    out: dict[str, PtxasReport] = {}
    blocks = re.split(r"(?=ptxas info\s*: Compiling entry function)", text)
    for blk in blocks:
        fm = _RE_FUNC.search(blk)
        if not fm:
            continue
        fr = _RE_FRAME.search(blk)
        um = re.search(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?", blk)
        if not (fr and um):
            raise BuildError(f"unparsed ptxas report:\n{blk}")
        out[fm.group(1)] = PtxasReport(
            kernel=fm.group(1), registers=int(um.group(1)),
            smem_bytes=int(um.group(2) or 0), stack_frame_bytes=int(fr.group(1)),
            spill_store_bytes=int(fr.group(2)), spill_load_bytes=int(fr.group(3)), raw=blk)
    return out


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def ptxas_report(level: Level, nvcc: str | None = None) -> PtxasReport:
    """Compile one level with nvcc for sm_90a (no GPU needed) and return ptxas's report."""
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc not found on PATH")
    with tempfile.TemporaryDirectory() as td:
        cmd = [nvcc, "-gencode", NVCC_GENCODE, "-std=c++17", "-Xptxas", "-v", "-c",
               str(level.path), "-I", str(KERNEL_DIR), "-o", str(Path(td) / "k.o")]
        cmd += [f"-D{d}" for d in level.defines]
        if level.dyn_smem_bytes:  # the kernel static_asserts its DYN_SMEM equals the registry's
            cmd.append(f"-DLADDER_EXPECT_DYN_SMEM={level.dyn_smem_bytes}")
        if level.kind == "ws":  # ws.cuh static_asserts its unit tile and cluster equal the registry's
            cmd += [f"-DLADDER_EXPECT_TILE_{a}={v}" for a, v in zip("MNK", level.tile_mnk)]
            cmd.append(f"-DLADDER_EXPECT_CLUSTER={level.cluster}")
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"nvcc failed for {level.file}:\n{proc.stderr}")
    reports = parse_ptxas(proc.stderr + proc.stdout)
    if level.kernel not in reports:
        raise BuildError(f"no ptxas report for {level.kernel} in:\n{proc.stderr}")
    return reports[level.kernel]

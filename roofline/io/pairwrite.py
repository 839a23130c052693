"""Atomic writes (docs/artifact.md): one file replaced atomically (`atomic_write`), and a set of
files replaced together (`write_pair`: the artifact's JSON and markdown), with `recover` for what
a crashed writer left. No rendering here: roofline/report/artifact.py renders the artifact and writes it
through this module."""
from __future__ import annotations

import errno
import os
import secrets
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ARTIFACT_JSON = "profile_roofline.json"   # the pair write_pair replaces together, in this order
ARTIFACT_MD = "profile_roofline.md"
STAGE_PREFIX = ".profile_roofline.stage-"   # a pair being written (incomplete: discarded on recovery)
COMMIT_DIR = ".profile_roofline.commit"     # a complete new pair being swapped in (rolled forward)
LOCK_TIMEOUT_S = 60.0


# ---------------------------------------------------------------------------------- the write path
#
# The JSON and the markdown must change together: a reader must never find the new JSON beside
# the old markdown, and a crash (kill -9, power loss) at any instant must leave either the old
# pair or the new pair, and no temporary file once the directory is next written.
#
# Two files cannot be replaced by one rename, so the pair goes through a commit directory:
#   1. take an exclusive flock on the output directory itself (serialises concurrent runs on one
#      round directory; no lock file is left behind) and recover (below) what a crashed writer left;
#   2. write both files into a fresh directory .profile_roofline.stage-XXXX beside the artifact
#      (same filesystem), fsync each file and the stage directory;
#   3. COMMIT: rename the stage directory to .profile_roofline.commit, fsync the output directory.
#      From this instant the new pair is complete and durable, and it wins;
#   4. os.replace the JSON, then the markdown, out of the commit directory over the old ones;
#      remove the empty commit directory; fsync the output directory.
# Recovery (step 1 of every later write, and recover() for readers): a stage directory is an
# uncommitted write -> deleted (the old pair is intact); a commit directory is a committed one ->
# rolled forward (whichever of its two files is still inside is moved out), then removed. So
# after a crash before step 3 the old pair stays; after step 3 the new pair is the result. The
# only moment the two visible files differ in origin is between the two renames of step 4 (or a
# crash there); .profile_roofline.commit exists exactly then, and the next recovery completes it.
# Files are created with mode 0o666 & ~umask, like any file the user writes (mkstemp's 0600
# would hide the artifact from the pipeline's other users and CI).


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(str(d), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory
    finally:
        os.close(fd)


def _write_file(path: Path, text: str) -> None:
    """Create `path` (must not exist), write `text`, fsync. Mode 0o666 & ~umask."""
    data = text.encode("utf-8")
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _locked(d: Path):
    """An exclusive flock on directory `d` (blocking up to LOCK_TIMEOUT_S)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock (single writer assumed)
        yield
        return
    fd = os.open(str(d), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - t0 > LOCK_TIMEOUT_S:
                    raise OSError(errno.EWOULDBLOCK, f"another roofline run has held {d} for over "
                                                     f"{LOCK_TIMEOUT_S:.0f} s") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def _roll_forward(d: Path, commit: Path, *, undo_if_untouched: bool = False) -> None:
    moved = False
    for name in (ARTIFACT_JSON, ARTIFACT_MD):
        src = commit / name
        if src.exists():
            try:
                os.replace(src, d / name)
            except BaseException:
                if undo_if_untouched and not moved:  # nothing visible changed yet: roll back instead
                    shutil.rmtree(commit, ignore_errors=True)
                raise
            moved = True
    for p in commit.iterdir():  # nothing else belongs there
        p.unlink()
    os.rmdir(commit)
    _fsync_dir(d)


def _recover_locked(d: Path) -> None:
    commit = d / COMMIT_DIR
    if commit.is_dir():
        _roll_forward(d, commit)
    for p in d.iterdir():
        n = p.name
        if n.startswith(STAGE_PREFIX):
            shutil.rmtree(p, ignore_errors=True)
        elif n.startswith(".profile_roofline.") and n.endswith(".tmp"):  # left by older versions
            try:
                p.unlink()
            except OSError:
                pass


def recover(out_dir: str | Path) -> None:
    """Finish or discard what a crashed write left in `out_dir` (see above). Harmless when there is
    nothing to do; raises OSError when the directory cannot be written."""
    d = Path(out_dir)
    if not (d / COMMIT_DIR).exists() and not any(p.name.startswith(STAGE_PREFIX) or (
            p.name.startswith(".profile_roofline.") and p.name.endswith(".tmp")) for p in d.iterdir()):
        return
    with _locked(d):
        _recover_locked(d)


def write_pair(out_dir: str | Path, files: dict[str, str]) -> None:
    """Replace the files `files` (name -> text) of `out_dir` together (the protocol above)."""
    d = Path(out_dir)
    with _locked(d):
        _recover_locked(d)
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=str(d)))
        try:
            for name, text in files.items():
                _write_file(stage / name, text)
            _fsync_dir(stage)
            commit = d / COMMIT_DIR
            os.rename(stage, commit)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        _fsync_dir(d)
        _roll_forward(d, commit, undo_if_untouched=True)


def atomic_write(path: str | Path, text: str) -> None:
    """Replace one file atomically: a temp file beside it, fsync, os.replace (mode 0o666 & ~umask)."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        _write_file(tmp, text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)

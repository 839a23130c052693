"""Bounded, non-blocking reads of the files the tool is given.

Every input goes through here, so that no input can hang a run or exhaust memory:

* only regular files are read. The file is opened with O_NONBLOCK (so that opening a FIFO with no
  writer returns at once instead of waiting forever) and fstat'ed on the open descriptor (so
  that a FIFO, a device such as /dev/zero, a socket or a directory is refused even when it
  replaced the regular file between a check and the open);
* a plain file has a size limit, checked before reading (fstat) and while reading;
* gzip data is decompressed in pieces with a limit on the decompressed size AND on the
  compression ratio: a 1 MB file that expands to 1 GiB is a bomb, not a trace (real Chrome traces
  compress 5-30x). The limits are module constants with environment overrides (below);
  hitting one raises InputTooLarge with a message naming the limit and how to raise it.

Limits (bytes; environment variables override them for one run):
  ROOFLINE_MAX_JSON_BYTES    Top-N, env report, config.json, artifacts, peak tables: 256 MiB
  ROOFLINE_MAX_COUNTER_BYTES counter files (.ncu-rep, CSV), after decompression: 2 GiB
  ROOFLINE_MAX_TRACE_BYTES   PyTorch traces, after decompression: 32 GiB
  ROOFLINE_MAX_GZIP_RATIO    decompressed / compressed size of any gzip input: 200
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import zlib

from roofline.io.errors import RooflineError

MiB = 1 << 20
GiB = 1 << 30
DEFAULT_LIMITS = {
    "ROOFLINE_MAX_JSON_BYTES": 256 * MiB,
    "ROOFLINE_MAX_COUNTER_BYTES": 2 * GiB,
    "ROOFLINE_MAX_TRACE_BYTES": 32 * GiB,
    "ROOFLINE_MAX_GZIP_RATIO": 200,
}
# below this many decompressed bytes the ratio is not checked (tiny files compress very well)
RATIO_FLOOR_BYTES = 16 * MiB
# the deepest JSON nesting any input of the tool legitimately has is < 10; refuse far deeper
MAX_JSON_DEPTH = 200


class UnsafeInput(RooflineError, OSError):
    """The path is not something the tool reads (not a regular file) or breaks a limit. An OSError,
    so that callers which already turn OSError into a one-line message keep doing so."""

    def __init__(self, path, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(errno.EINVAL, problem)

    def __str__(self) -> str:
        return self.problem


class NotRegularFile(UnsafeInput):
    pass


class InputTooLarge(UnsafeInput):
    pass


class CorruptGzip(UnsafeInput):
    """gzip data that does not decompress (a bad header, a flipped byte, a wrong checksum) or ends
    before its end marker: one line naming the file, whichever reader met it."""


def limit(name: str) -> int:
    """A limit of DEFAULT_LIMITS, or its environment override (a positive integer)."""
    v = os.environ.get(name, "")
    if v.strip().isdigit() and int(v) > 0:
        return int(v)
    return DEFAULT_LIMITS[name]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path) -> io.BufferedReader:
    """Open `path` for binary reading if it is a regular file; never blocks on a FIFO.

    Raises FileNotFoundError / PermissionError (OSError) as open() does, and NotRegularFile for
    anything that is not a regular file (named in the message: a directory, a FIFO, a device)."""
    p = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except IsADirectoryError:
        raise NotRegularFile(p, "expected a file, got a directory") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(p, f"expected a regular file, got {_kind(st.st_mode)}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_regular(path) -> None:
    """Raise NotRegularFile unless `path` is a regular file (FileNotFoundError when missing)."""
    open_regular(path).close()


def _too_large(path, what: str, n: int, env: str) -> InputTooLarge:
    return InputTooLarge(path, f"{what} is larger than the limit of {n / MiB:.0f} MiB "
                               f"(set {env}=BYTES to raise it)")


def read_bytes(path, *, limit_env: str = "ROOFLINE_MAX_JSON_BYTES", gunzip: bool = False) -> bytes:
    """The content of a regular file, at most limit(limit_env) bytes; with gunzip=True, gzip data
    is decompressed (within the same limit and the ratio limit)."""
    with open_regular(path) as f:
        raw = read_open(f, path, limit_env=limit_env)
    if gunzip and raw[:2] == b"\x1f\x8b":
        return gunzip_bytes(raw, path, limit_env=limit_env)
    return raw


def load_json(path, *, limit_env: str = "ROOFLINE_MAX_JSON_BYTES"):
    """A JSON file through the bounded reader (a regular file, the size limit, the nesting limit),
    for the readers outside the input policy's loaders (ladder bench results, dispatch builds).
    Raises OSError (UnsafeInput included) for the file, ValueError for its content (not UTF-8,
    not JSON), as json.loads(Path.read_text()) did."""
    import json

    raw = read_bytes(path, limit_env=limit_env)
    if not json_depth_ok(raw):
        raise InputTooLarge(path, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(bytes(raw).decode("utf-8-sig"))


def read_open(f, path, *, limit_env: str = "ROOFLINE_MAX_JSON_BYTES") -> bytes:
    """The rest of the open regular file `f` (from its position), at most limit(limit_env) bytes."""
    cap = limit(limit_env)
    size = os.fstat(f.fileno()).st_size - f.tell()
    if size > cap:
        raise _too_large(path, "the file", cap, limit_env)
    raw = f.read(cap + 1)
    if len(raw) > cap:  # grew while we read
        raise _too_large(path, "the file", cap, limit_env)
    return raw


def gunzip_bytes(raw: bytes, path, *, limit_env: str) -> bytes:
    """Decompress gzip `raw` (all members) within the size and ratio limits. Corrupt or truncated
    data raises CorruptGzip (an UnsafeInput, an OSError)."""
    stream = GzipLimited(io.BytesIO(raw), path, len(raw), limit_env=limit_env)
    out = bytearray()
    while True:
        b = stream.read(4 * MiB)
        if not b:
            break
        out += b
    return out   # a bytearray (bytes' methods): no second copy of what may be a GiB


def gunzip_to_tempfile(path, *, limit_env: str, suffix: str = "", fileobj=None) -> str:
    """Inflate the gzip file `path` (or the open regular file `fileobj` of that name, from its
    start) into a temporary file (its path; the caller removes it), in pieces: memory stays at one
    piece whatever the decompressed size, within the size and ratio limits. A failure
    (UnsafeInput, CorruptGzip, OSError) removes the temporary file."""
    import shutil
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=suffix, prefix="roofline-gunzip-")
    try:
        with os.fdopen(fd, "wb") as fo, (contextlib.nullcontext(fileobj) if fileobj is not None
                                         else open_regular(path)) as raw:
            raw.seek(0)
            size = os.fstat(raw.fileno()).st_size
            shutil.copyfileobj(GzipLimited(raw, path, size, limit_env=limit_env), fo, 1 * MiB)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def what_is_not_readable(path) -> str | None:
    """Why `path` cannot be read as an input file, in words ("no such file", "expected a regular
    file, got a FIFO (named pipe)", "cannot be read (Permission denied)", "the file name is too
    long"), or None when it is a regular file that opens. Never blocks, never raises."""
    try:
        check_regular(path)
    except FileNotFoundError:
        return "no such file"
    except UnsafeInput as exc:
        return exc.problem
    except OSError as exc:
        return os_problem(exc)
    except (ValueError, TypeError):   # an embedded NUL: no file has that name
        return "not a usable file name"
    return None


def path_problem(p) -> str | None:
    """Why the path `p` cannot be looked at (stat'ed), in words, or None (a missing one included:
    its reader says so): a name over the system's limit, a folder without search permission."""
    try:
        os.stat(p)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        return "not a usable file name"
    except OSError as exc:
        return os_problem(exc)
    return None


def os_problem(exc: OSError) -> str:
    """An OSError met on a path the user gave, in words for the one-line message."""
    if isinstance(exc, UnsafeInput):
        return exc.problem
    if exc.errno == errno.ENAMETOOLONG:
        return "the file name is longer than the system allows"
    if exc.errno == errno.ENOENT:
        return "no such file"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is not a directory"
    return f"cannot be read ({exc.strerror or exc})"


class GzipLimited(io.RawIOBase):
    """A readable stream of the decompressed bytes of a gzip stream `raw` whose compressed size is
    `compressed_size`, raising InputTooLarge past the size limit or the ratio limit. Decompression
    is incremental (zlib.decompressobj with max_length), so a bomb never expands in memory."""

    def __init__(self, raw, path, compressed_size: int, *, limit_env: str):
        self.raw, self.path = raw, str(path)
        self.cap, self.env = limit(limit_env), limit_env
        self.ratio = limit("ROOFLINE_MAX_GZIP_RATIO")
        self.csize = max(int(compressed_size), 1)
        self.d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.pending = b""
        self.total = 0      # decompressed bytes so far
        self.consumed = 0   # compressed bytes fed so far
        self.eof = False

    def readable(self):
        return True

    def _check(self):
        if self.total > self.cap:
            raise _too_large(self.path, "the decompressed data", self.cap, self.env)
        # the ratio so far (decompressed / compressed consumed): a bomb is caught after a few MB,
        # not after it has expanded to ratio x its whole size
        if self.total > RATIO_FLOOR_BYTES and self.total > self.ratio * max(self.consumed, 1):
            raise InputTooLarge(self.path, f"gzip data expands more than {self.ratio}x "
                                           f"({self.consumed} bytes -> over {self.total} bytes): a "
                                           "decompression bomb, not a profile (set ROOFLINE_MAX_GZIP_RATIO "
                                           "to allow it)")

    def _feed(self) -> None:
        """Decompress the next piece into self.pending (or set self.eof)."""
        d = self.d
        if d.eof:  # end of a gzip member: another member may follow (zero padding is ignored)
            rest = d.unused_data.lstrip(b"\x00")
            while not rest:
                more = self.raw.read(1 << 16)
                if not more:
                    self.eof = True
                    return
                rest = more.lstrip(b"\x00")
            self.d = d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            feed = rest
        elif d.unconsumed_tail:
            feed = d.unconsumed_tail
        else:
            feed = self.raw.read(1 << 16)
            if not feed:
                raise CorruptGzip(self.path, "gzip data ends before its end-of-stream marker (a truncated file?)")
            self.consumed += len(feed)
        try:
            self.pending = d.decompress(feed, 1 * MiB)
        except zlib.error as exc:
            raise CorruptGzip(self.path, f"gzip data is corrupt ({exc})") from None
        self.total += len(self.pending)
        self._check()

    def read(self, n=-1):
        if n is None or n < 0:
            n = 1 * MiB
        while not self.eof and not self.pending:
            self._feed()
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    def readinto(self, b):
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self):
        try:
            self.raw.close()
        finally:
            super().close()


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_PY_SCAN_MAX = 200_000   # brackets counted in Python below this many (a few ms), numpy above


def json_depth_ok(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """False when the bracket nesting of `text` goes deeper than `max_depth` (brackets inside
    strings are counted too: an over-estimate, harmless at this limit)."""
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    if text.count(b"[") + text.count(b"{") <= max_depth:
        return True
    brackets = text.translate(None, _NOT_BRACKETS)
    if len(brackets) <= _PY_SCAN_MAX:
        # a small file (a Top-N, a peak table): a plain loop beats importing numpy (~0.1 s cold)
        depth = 0
        for c in brackets:
            if c == 0x5B or c == 0x7B:
                depth += 1
                if depth > max_depth:
                    return False
            else:
                depth -= 1
        return True
    import numpy as np

    a = np.frombuffer(brackets, dtype=np.uint8)   # the brackets alone: a few % of a Top-N's bytes
    d = np.where((a == 0x5B) | (a == 0x7B), 1, -1).astype(np.int32)
    return int(np.cumsum(d, dtype=np.int64).max(initial=0)) <= max_depth


class DepthGuard(io.RawIOBase):
    """Wraps a binary stream; raises InputTooLarge when the JSON it carries nests deeper than
    `max_depth` or holds one value (below depth `item_depth`) longer than `max_item_bytes`.
    Counted on brackets at numpy speed (brackets in strings included: over-estimates, harmless
    at these limits). Used before a streaming parser that would otherwise build such a value."""

    def __init__(self, stream, path, *, max_depth: int = MAX_JSON_DEPTH, item_depth: int = 2,
                 max_item_bytes: int = 256 * MiB):
        self.s, self.path = stream, str(path)
        self.max_depth, self.item_depth, self.max_item = max_depth, item_depth, max_item_bytes
        self.depth = 0
        self.run = 0  # bytes since the depth was last <= item_depth

    def readable(self):
        return True

    def _scan(self, b: bytes) -> None:
        import numpy as np

        if not b:
            return
        a = np.frombuffer(b, dtype=np.uint8)
        d = (a == 0x5B).astype(np.int32) + (a == 0x7B)
        d -= (a == 0x5D).astype(np.int32) + (a == 0x7D)
        depth = np.cumsum(d, dtype=np.int64) + self.depth
        if int(depth.max()) > self.max_depth:
            raise InputTooLarge(self.path, f"JSON nested deeper than {self.max_depth} levels: not a profile")
        shallow = np.flatnonzero(depth <= self.item_depth)
        if shallow.size == 0:
            self.run += len(b)
        else:
            first, last = int(shallow[0]), int(shallow[-1])
            longest = self.run + first
            if shallow.size > 1:
                longest = max(longest, int(np.diff(shallow).max()))
            self.run = len(b) - 1 - last
            longest = max(longest, self.run)
            if longest > self.max_item:
                self.run = longest
        self.depth = int(depth[-1])
        if self.run > self.max_item:
            raise InputTooLarge(self.path, f"one JSON value is larger than {self.max_item / MiB:.0f} MiB: "
                                           "not a profile event")

    def read(self, n=-1):
        b = self.s.read(n)
        self._scan(b)
        return b

    def readinto(self, buf):
        data = self.read(len(buf))
        buf[:len(data)] = data
        return len(data)


@contextlib.contextmanager
def native_stderr_captured():
    """Send what native code writes to file descriptor 2 (ncu_report's protobuf/absl log lines on a
    damaged report) to a buffer instead of the user's terminal, so that an error stays ONE line.
    Yields a list that receives the captured text (for an error message) when the block ends."""
    import tempfile

    got: list[str] = []
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2: nothing to protect
        yield got
        return
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 2)
            yield got
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            got.append(tmp.read(1 << 16).decode("utf-8", "replace"))

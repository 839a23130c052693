"""The SM clock seen while `roofline peaks measure` times (read-only: nvidia-smi or NVML; the card's
clocks are never changed): a sampler over long blocks, a read at the end of each short burst, and
the assignment of samples to the blocks that ran when they were taken."""
from __future__ import annotations

import statistics
import subprocess
import threading
import time

class ClockSampler:
    """Samples the SM clock with nvidia-smi while a block runs (read-only query)."""

    def __init__(self, period_s: float = 0.25, index: int = 0):
        self.period_s, self.index = period_s, index
        self.samples: list[float] = []
        self.stamped: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thr: threading.Thread | None = None
        self.error: str | None = None

    @staticmethod
    def query(index: int = 0) -> dict[str, float] | None:
        try:
            out = subprocess.run(
                ["nvidia-smi", "-i", str(index), "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem",
                 "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        except Exception:
            return None
        if out.returncode != 0:
            return None
        try:
            sm, smax, mem = (float(x) for x in out.stdout.strip().splitlines()[0].split(","))
        except Exception:
            return None
        return {"sm_mhz": sm, "sm_max_mhz": smax, "mem_mhz": mem}

    def _loop(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            r = self.query(self.index)
            if r is None:
                self.error = "nvidia-smi query failed"
                return
            self.samples.append(r["sm_mhz"])
            # the reading is of some moment inside the query (~50-100 ms): stamp its midpoint
            self.stamped.append(((t0 + time.monotonic()) / 2, r["sm_mhz"]))
            self._stop.wait(self.period_s)

    def __enter__(self):
        self._thr = threading.Thread(target=self._loop, daemon=True)
        self._thr.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thr:
            self._thr.join(timeout=15)

    def summary(self) -> dict[str, float] | None:
        if not self.samples:
            return None
        return {"median": statistics.median(self.samples), "min": min(self.samples),
                "max": max(self.samples), "n": len(self.samples)}


def assign_samples(stamped, windows, slack_s: float = 0.1):
    """Give each (t, value) sample to the window (t0, t1, key) that holds it, else to the nearest one
    within slack_s (a block of fast products can be shorter than one nvidia-smi query)."""
    out = []
    for ts, v in stamped:
        best, dist = None, None
        for a, b, key in windows:
            dd = 0.0 if a <= ts <= b else min(abs(ts - a), abs(ts - b))
            if dist is None or dd < dist:
                best, dist = key, dd
        if best is not None and dist <= slack_s:
            out.append((best, v))
    return out


class BurstClock:
    """The SM clock read at the end of each timed burst, while the GPU is still working through it:
    NVML (nvidia-ml-py, microseconds a read) when importable, else one nvidia-smi query (read-only)."""

    def __init__(self, index: int = 0):
        self.index, self._h, self._nv = index, None, None
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self._nv, self._h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # noqa: BLE001 - no NVML: fall back to nvidia-smi
            self._nv = None

    def read(self) -> float | None:
        if self._nv is not None:
            try:
                return float(self._nv.nvmlDeviceGetClockInfo(self._h, self._nv.NVML_CLOCK_SM))
            except Exception:  # noqa: BLE001
                return None
        r = ClockSampler.query(self.index)
        return r["sm_mhz"] if r else None


def _burst(torch, fn, reps: int, clock: BurstClock, cool_s: float) -> tuple[list[float], float | None]:
    """One short burst, as a prefill step's GEMMs arrive in a serving run: the GPU idles `cool_s`
    first (clocks and power recover), then `reps` products are queued back to back, each between its
    own event pair; the SM clock is read while the burst is still running."""
    torch.cuda.synchronize()
    time.sleep(cool_s)
    evs = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        evs.append((s, e))
    mhz = clock.read()
    evs[-1][1].synchronize()
    return [s.elapsed_time(e) for s, e in evs], mhz

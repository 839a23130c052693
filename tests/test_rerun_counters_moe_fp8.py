"""Stage C counters of the grouped (MoE) and fp8 re-runs, end to end on the CPU (no GPU, no ncu).

The recorded H200 corpus re-runs (fixtures/rerun_corpus/: Qwen3-MoE through torch._grouped_mm,
Llama-8B fp8 through torch._scaled_mm) go through `rerun_artifact --counters` from their stage-B
artifacts with the device layer replaced by recorders:
- the GPU calls (CuPy arrays, the ladder's launches, torch's ops) record what was launched, with
  which rows per expert, inside or outside the NVTX range; the timer replays the H200's recorded
  median/p20/p80 of the same problem and launch;
- `ncu` is a fake that runs the profiler's target in this process, sees only the launches inside the
  range, and answers with a raw-page CSV (the columns and units of the real H200 report
  fixtures/ncu/known_raw.csv, only the metrics asked for) whose readings are planted here: the LM
  head's are the H200's recorded ones, the fp8 and grouped ones are made from the shapes (the counter
  runs of those have not been recorded yet).
Then the entry's measured bytes, issued FLOPs (by dtype), confidence and the grouped head's
routing bytes are checked against sums made here from the planted readings and the shapes.
"""
from __future__ import annotations

import copy
import csv
import io
import json
import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from roofline import api, rerun as rerun_top
from roofline.report import artifact as report
from roofline.ladder import bench, check, gpu, gpu_moe_fp8
from roofline.stagec import profiler, timing

from conftest import FIXTURES

CORPUS = FIXTURES / "rerun_corpus"
REAL_CSV = FIXTURES / "ncu" / "known_raw.csv"
BF16, FP8 = "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum"
TIMES = ("problems", "ladder_level", "ladder_t_ms", "ladder_t_ms_p20", "ladder_t_ms_p80", "cublas_t_ms",
         "cublas_t_ms_p20", "cublas_t_ms_p80", "check_ok", "device", "time_utc")


class Arr:
    """A device array of which only the shape matters here."""
    def __init__(self, shape):
        self.shape = tuple(shape)


class Device:
    """Recorders in place of the GPU: every launch ("launch", target, contract, M, N, K, offsets) and
    every NVTX push/pop in order; the timer returns the H200's recorded times of the launch."""

    def __init__(self, recorded_rows: dict):
        self.events: list[tuple] = []
        self.rows = recorded_rows          # (M, N, K) -> the recorded measured.problems row
        self.operand_seeds: list[int] = []
        nv = types.SimpleNamespace(RangePush=lambda name: self.events.append(("push", name)),
                                   RangePop=lambda: self.events.append(("pop",)))
        self.cp = types.SimpleNamespace(
            empty=lambda shape, dtype=None: Arr(shape), ones=lambda n, dtype=None: Arr((n,)),
            uint16="uint16", float32="float32", uint32="uint32",
            cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: None), nvtx=nv))

    def launch(self, target, contract, M, N, K, offs=None):
        self.events.append(("launch", target, contract, M, N, K, None if offs is None else tuple(int(x) for x in offs)))

    def install(self, mp):
        mp.setattr(gpu, "cupy", lambda: self.cp)
        mp.setattr(gpu, "device_name", lambda: "NVIDIA H200")
        mp.setattr(gpu, "random_bf16", lambda shape, seed, scale=1.0: Arr(shape))
        mp.setattr(gpu, "cublas_tn", lambda a, b, c: self.launch("cublas", "gemm-bf16", a.shape[0], b.shape[0], a.shape[1]))
        mp.setattr(gpu, "launch", lambda lv, a, b, c, m, n, k: self.launch("ladder", "gemm-bf16", m, n, k))
        mp.setattr(gpu_moe_fp8, "random_fp8", lambda shape, seed: Arr(shape))
        mp.setattr(gpu_moe_fp8, "launch_fp8", lambda lv, a, b, sa, sb, c, m, n, k: self.launch("ladder", "gemm-fp8", m, n, k))
        mp.setattr(gpu_moe_fp8, "torch_scaled",
                   lambda a, b, sa, sb: self.launch("cublas", "gemm-fp8", a.shape[0], b.shape[0], a.shape[1]))
        mp.setattr(gpu_moe_fp8, "launch_grouped", lambda lv, a, w, offs, c, E, N, K, layout="enk":
                   self.launch("ladder", "grouped-bf16", c.shape[0], N, K, offs))
        mp.setattr(gpu_moe_fp8, "torch_grouped", lambda a, w, offs, layout="enk":
                   self.launch("cublas", "grouped-bf16", a.shape[0], w.shape[1], w.shape[2], offs))

        def operands(counts, N, K, layout, seed, fp8=False, specials=False):
            self.operand_seeds.append(seed)
            return Arr((sum(counts), K)), Arr((len(counts), N, K)), np.cumsum(counts).astype(np.int32)

        ok = types.SimpleNamespace(ok=True, rel_err_ref=1e-3, reason="")
        mp.setattr(check, "grouped_operands", operands)
        mp.setattr(check, "check_grouped", lambda *a, **k: ok)
        mp.setattr(check, "check_fp8", lambda *a, **k: ok)
        dev = self

        class Timer:
            def __init__(self, flush_l2=True):
                pass

            def time(self, fn, **kw):
                fn()
                _, target, _, M, N, K, _ = dev.events[-1]
                r = dev.rows[(M, N, K)]
                return [r[f"{target}_t_ms"], r[f"{target}_t_ms_p20"], r[f"{target}_t_ms_p80"]]

        mp.setattr(bench, "Timer", Timer)
        mp.setattr(bench, "quantiles", lambda ts: tuple(ts))


def _units() -> dict[str, str]:
    rows = list(csv.reader(open(REAL_CSV, newline="")))
    return dict(zip(rows[0], rows[1]))


class Ncu:
    """`ncu` and `ncu --import --csv`: runs the profiler target here, reads the launches inside the
    NVTX range, answers with the planted readings of those launches as a raw-page CSV."""

    def __init__(self, dev: Device, readings):
        self.dev, self.readings, self.csv, self.runs = dev, readings, {}, []
        self.units = _units()

    def __call__(self, cmd, **kw):
        if "--import" in cmd:
            kw["stdout"].write(self.csv[cmd[cmd.index("--import") + 1]])
            return types.SimpleNamespace(returncode=0, stdout="", stderr="")
        metrics = cmd[cmd.index("--metrics") + 1].split(",")
        assert cmd[cmd.index("--nvtx-include") + 1] == f"{profiler.RANGE}/"
        args = cmd[cmd.index("roofline.stagec.profiler") + 1:]
        start = len(self.dev.events)
        spec = None
        if args[0] == "--one-launch-spec":
            spec = json.loads(Path(args[1]).read_text())
            profiler._one_launch_spec(args[1])
        else:
            assert args[0] == "--one-launch-range"
            profiler._one_launch_range(args[1], *(int(x) for x in args[2:]))
        evs = self.dev.events[start:]
        push = evs.index(("push", profiler.RANGE))
        assert evs[push + 2] == ("pop",) and len(evs) == push + 3        # one launch inside the range
        warm, inside = evs[push - 1], evs[push + 1]
        assert warm == inside and [e[0] for e in evs[:push]] == ["launch"]  # one warm-up of the same launch, outside
        self.runs.append({"launch": inside, "spec": spec, "cache": cmd[cmd.index("--cache-control") + 1]})
        rows = self.readings(inside)
        out = io.StringIO()
        w = csv.writer(out, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", *metrics])
        w.writerow(["", "", *(self.units[m] for m in metrics)])
        for i, (name, vals) in enumerate(rows):
            w.writerow([str(i), name, *(f"{vals[m]:,.0f}" if m in vals else "" for m in metrics)])
        rep = cmd[cmd.index("-o") + 1] + ".ncu-rep"
        Path(rep).write_text("fake report")
        self.csv[rep] = out.getvalue()
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")


def _readings(recorded_dense: dict, rows: dict):
    """The planted ncu readings of one in-range launch -> [(kernel, {metric: value in base units})].
    LM head: the H200's recorded counters. fp8: A and B read 1.3x, C written once, 2MNK x 1.004
    fp8 tensor ops. Grouped: the drawn experts' weights and A read 1.04x, C written once, 2MNK x 1.01
    bf16 tensor ops; torch._grouped_mm also runs its setup kernel. Times: the recorded ones. Whole
    numbers (the CSV prints no decimals)."""
    def read(launch):
        return [(name, {k: float(round(v)) for k, v in vals.items() if v is not None}) for name, vals in _read(launch)]

    def _read(launch):
        _, target, contract, M, N, K, offs = launch
        t_ns = rows[(M, N, K)][f"{target}_t_ms"] * 1e6 if (M, N, K) in rows else None
        if contract == "gemm-bf16":
            c = recorded_dense[(M, N, K)]
            return [("nvjet_lm_head", {"gpu__time_duration.sum": c["t_ms"] * 1e6, "dram__bytes_read.sum": c["dram_bytes"],
                                       "dram__bytes_write.sum": 0.0, BF16: c["flops_issued"], FP8: 0.0,
                                       "lts__t_bytes.sum": c["l2_bytes"]})]
        if contract == "gemm-fp8":
            return [("nvjet_sm90_qqtst_fp8", {"gpu__time_duration.sum": t_ns, "dram__bytes_read.sum": 1.3 * (M * K + N * K),
                                              "dram__bytes_write.sum": 2.0 * M * N, BF16: 0.0, FP8: 2.0 * M * N * K * 1.004})]
        counts = np.diff(np.concatenate([[0], offs]))
        hit = int((counts > 0).sum())
        out = [(f"gemm_{target}", {"gpu__time_duration.sum": t_ns, "dram__bytes_read.sum": 1.04 * (hit * N * K * 2 + M * K * 2),
                                   "dram__bytes_write.sum": 2.0 * M * N, BF16: 2.0 * M * N * K * 1.01, FP8: 0.0})]
        if target == "cublas":
            out.append(("prepare_grouped_gemm_data", {"gpu__time_duration.sum": 2000.0, "dram__bytes_read.sum": 4096.0,
                                                      "dram__bytes_write.sum": 8192.0, BF16: 0.0, FP8: 0.0}))
        return out
    return read


def _run_copy(tmp_path: Path, case: str, library_in_run: bool | None = None) -> Path:
    """The run folder with its stage-B artifact in place, its inputs pointing at the copied files;
    library_in_run=True: the Top-N marks the grouped kernel a library one (editable false) and the
    stage-B artifact is analysed afresh from it."""
    d = tmp_path / case
    shutil.copytree(CORPUS / case, d)
    shutil.rmtree(d / "knowledge")
    rd = d / "profile" / "round_1"
    (rd / "profile_roofline.md").unlink()
    shutil.move(rd / "stage_b_roofline.json", rd / "profile_roofline.json")
    cfg = FIXTURES / "corpus" / "configs" / f"{case}.json"
    if library_in_run:
        topn = json.loads((rd / "profile_topN.json").read_text())
        for t in topn["entries"]:
            if t.get("op_class") == "moe":
                t["editable"] = False
        (rd / "profile_topN.json").write_text(json.dumps(topn))
        report.write_artifact(api.analyze(rd / "profile_topN.json", rd / "env_report.json", cfg), rd)
    art = json.loads((rd / "profile_roofline.json").read_text())
    art["inputs"] = {"topn": str(rd / "profile_topN.json"), "env": str(rd / "env_report.json"), "config": str(cfg)}
    (rd / "profile_roofline.json").write_text(json.dumps(art))
    return rd / "profile_roofline.json"


def _recorded(case: str) -> dict:
    art = json.loads((CORPUS / case / "profile" / "round_1" / "profile_roofline.json").read_text())
    return {e["name"]: e for e in art["entries"] if e.get("measured")}


def _install(monkeypatch, case: str):
    rec = _recorded(case)
    rows = {(q["M"], q["N"], q["K"]): q for e in rec.values() for q in e["measured"]["problems"]}
    dense = {(q["M"], q["N"], q["K"]): q for e in rec.values() if "per_problem" in e["measured"]["counters"]
             for q in e["measured"]["counters"]["per_problem"]}
    by = {tuple((q["M"], q["N"], q["K"]) for q in e["measured"]["problems"]): e["measured"] for e in rec.values()}
    dev = Device(rows)
    dev.install(monkeypatch)
    ncu = Ncu(dev, _readings(dense, rows))
    monkeypatch.setattr(timing, "device_arch", lambda: "sm_90a")
    monkeypatch.setattr(timing, "measure_problems",     # dense bf16: the H200's recorded timing
                        lambda probs, lvl, seed=0, l2="cold": {k: copy.deepcopy(by[tuple((p.M, p.N, p.K) for p in probs)][k])
                                                               for k in TIMES} | {"l2_mode": l2})
    monkeypatch.setattr(profiler.shutil, "which", lambda name: "/fake/bin/ncu" if name == "ncu" else None)
    monkeypatch.setattr(profiler.subprocess, "run", ncu)
    return rec, dev, ncu


def _planted_sum(ncu: Ncu, probs: list[dict], key) -> float:
    """sum over the problems of count x (sum over the kernels the fake ncu reported of key(vals))."""
    tot = 0.0
    for q in probs:
        run = next(r for r in ncu.runs if r["launch"][3:6] == (q["M"], q["N"], q["K"]))
        tot += q["count"] * sum(key(v) for _, v in ncu.readings(run["launch"]))
    return tot


@pytest.mark.parametrize("library_in_run", [False, True])
def test_grouped_rerun_counters_on_the_drawn_routing(tmp_path, monkeypatch, library_in_run):
    case = "qwen3moe_grouped_mm"
    rec, dev, ncu = _install(monkeypatch, case)
    path = _run_copy(tmp_path, case, library_in_run)
    res = rerun_top.rerun_artifact(path, counters=True, playbook_dir=False)
    assert sorted(res["rerun"]) == sorted(rec) and res["skipped"] == {}
    art = json.loads(path.read_text())
    # the corpus head's kernel is torch's own CUTLASS grouped kernel (at::cuda::detail): the counters
    # are the library side's whether or not the Top-N marks it a library one (rerun._counter_target)
    target = "cublas"
    assert len(ncu.runs) == 4 and all(r["cache"] == "all" for r in ncu.runs)    # 2 heads x (gate_up, down), L2 cold
    for e in (x for x in art["entries"] if x["name"] in rec):
        m = e["measured"]
        probs = m["problems"]
        for q, r in zip(probs, m["routing"]):
            counts = q["routing_counts"]
            assert sum(counts) == q["M"] and len(counts) == q["E"]
            # the H200's draw of this problem, made again here: the same experts hit
            old = next(o for o in rec[e["name"]]["measured"]["problems"] if o["label"] == q["label"])
            assert r["experts_hit_drawn"] == old["experts_hit_drawn"] == sum(1 for c in counts if c)
            # the counter run launched the timing's routing, on the timing's target and operand seed
            run = next(x for x in ncu.runs if x["launch"][3:6] == (q["M"], q["N"], q["K"]))
            assert run["launch"][1:4] == (target, "grouped-bf16", q["M"])
            assert run["launch"][6] == tuple(np.cumsum(counts)) and run["spec"]["counts"] == counts
            # the build the shipped grouped table names for this head (its benched case's pick, else its class's:
            # decode l12_pingpong, prefill level 12's own build), launched by the counter run too
            from roofline.ladder import dispatch as _d
            from roofline.ladder.registry import get_level as _gl
            p0 = probs[0]
            pick = _d.choose_grouped_level(_d.default_dispatch_table("grouped-bf16"), p0["M"], p0["experts_hit_drawn"],
                                           p0["N"], p0["K"], "bf16", E=p0["E"])[0]
            assert run["spec"]["seed"] == 0 and m["ladder_level"] == _gl(pick).id == 12
            assert run["spec"]["level"] == pick
            assert m.get("ladder_build") == (pick if isinstance(pick, str) else None)
        want = _planted_sum(ncu, probs, lambda v: v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"])
        assert e["bytes_measured"] == pytest.approx(want, rel=1e-12) and e["confidence"] == "high"
        assert e["flops_issued"] == pytest.approx(_planted_sum(ncu, probs, lambda v: v[BF16]), rel=1e-12)
        assert e["compute_dtype"] == "bf16" and e["counters"]["tensor_flops_by_dtype"].get("fp8") is None
        assert m["counters"]["target"] == target
        assert m["counters"]["launched"] == "torch._grouped_mm"
        # the model's bytes at the drawn and at the expected experts hit, counted here
        drawn = sum(q["count"] * (q["experts_hit_drawn"] * q["N"] * q["K"] * 2 + q["M"] * (q["K"] + q["N"]) * 2)
                    for q in probs)
        hit = [q["E"] * (1 - (1 - 1 / q["E"]) ** q["M"]) for q in probs]
        expected = sum(q["count"] * (h * q["N"] * q["K"] * 2 + q["M"] * (q["K"] + q["N"]) * 2) for q, h in zip(probs, hit))
        rb = m["routing_bytes"]
        assert rb["bytes_model_drawn_hit"] == pytest.approx(drawn, rel=1e-12)
        assert rb["bytes_model_expected_hit"] == pytest.approx(expected, rel=1e-12)
        assert rb["bytes_model_expected_hit"] == pytest.approx(e["bytes_model"], rel=1e-12)  # the analysis' model
        assert rb["bytes_measured"] == e["bytes_measured"]
        assert rb["measured_over_model_drawn"] == pytest.approx(want / drawn, rel=1e-12)
        assert [r["experts_hit_model"] for r in m["routing"]] == pytest.approx(hit, rel=1e-12)
        assert "routing drawn (" in e["notes"] and e["notes"].count("MEASURED DRAM bytes") == 1
    assert all(s == 1 for s in dev.operand_seeds)   # timing and counters: the same operands (seed + 1)


def test_fp8_rerun_counters_read_the_fp8_tensor_ops(tmp_path, monkeypatch):
    case = "llama_fp8_prefill_decode"
    rec, dev, ncu = _install(monkeypatch, case)
    path = _run_copy(tmp_path, case)
    res = rerun_top.rerun_artifact(path, counters=True, playbook_dir=False)
    assert sorted(res["rerun"]) == sorted(rec) and res["skipped"] == {}
    art = json.loads(path.read_text())
    fp8 = next(e for e in art["entries"] if e["name"] in rec and e["dtypes"]["act"] == "fp8")
    lm = next(e for e in art["entries"] if e["name"] in rec and e["dtypes"]["act"] == "bf16")
    probs = fp8["measured"]["problems"]
    assert len(ncu.runs) == len(probs) + 1
    for q in probs:   # torch._scaled_mm ran in the run (nvjet): its counters, not the level's
        assert any(r["launch"][1:6] == ("cublas", "gemm-fp8", q["M"], q["N"], q["K"]) for r in ncu.runs)
    want = _planted_sum(ncu, probs, lambda v: v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"])
    fl = _planted_sum(ncu, probs, lambda v: v[FP8])
    assert fp8["bytes_measured"] == pytest.approx(want, rel=1e-12) and fp8["confidence"] == "high"
    assert fp8["flops_issued"] == pytest.approx(fl, rel=1e-12)
    assert fp8["counters"]["tensor_flops_by_dtype"]["fp8"] == pytest.approx(fl, rel=1e-12)
    assert fp8["compute_dtype"] == "fp8" and "tensor cores ran" not in fp8["notes"]
    useful = sum(q["count"] * 2 * q["M"] * q["N"] * q["K"] for q in probs)
    assert fp8["flops_useful"] == pytest.approx(useful, rel=1e-12)
    assert fp8["padding_waste_ratio"] == pytest.approx(fl / useful, rel=1e-12)
    assert fp8["measured"]["counters"]["launched"] == "torch._scaled_mm"
    assert "routing" not in fp8["measured"]
    # the bf16 LM head beside it: the H200's recorded counters, through the same path
    old = rec[lm["name"]]["measured"]["counters"]
    assert lm["bytes_measured"] == old["dram_bytes"] and lm["confidence"] == "high"
    assert lm["flops_issued"] == pytest.approx(old["flops_issued"], rel=1e-12) and lm["compute_dtype"] == "bf16"


def test_a_grouped_counter_run_needs_the_timings_routing():
    from roofline.io.errors import CounterCollectError
    from roofline.core.opclasses import Problem

    p = Problem("grouped", 512, 1536, 2048, "bf16", 1.0, E=128)
    with pytest.raises(CounterCollectError, match="routing"):
        profiler.collect_mix_counters([p], 12, ncu="/fake/bin/ncu", contract="grouped-bf16")


def test_each_grouped_problem_runs_on_its_own_routing(monkeypatch):
    """Two grouped problems with different rows: each counter run gets its own rows per expert, and
    the mix is the count-weighted sum of the two runs' readings."""
    from roofline.core.opclasses import Problem
    from roofline.ladder.routing import uniform_counts

    dev = Device({})
    dev.install(monkeypatch)
    ncu = Ncu(dev, _readings({}, {}))
    monkeypatch.setattr(profiler.subprocess, "run", ncu)
    probs = [Problem("grouped gate_up", 96, 256, 512, "bf16", 0.75, E=16),
             Problem("grouped down", 40, 512, 128, "bf16", 0.25, E=16)]
    routings = [uniform_counts(96, 16, 3), [0] * 15 + [40]]      # the second: every row on the last expert
    mix = profiler.collect_mix_counters(probs, 12, target="ladder", ncu="/fake/bin/ncu", contract="grouped-bf16",
                                        routings=routings)
    assert [r["launch"][6] for r in ncu.runs] == [tuple(np.cumsum(c)) for c in routings]
    assert [r["spec"]["problem"]["M"] for r in ncu.runs] == [96, 40]
    # planted: 1.04 x (hit x N x K x 2 + M x K x 2) read, M x N x 2 written
    hits = [sum(1 for c in routings[0] if c), 1]
    want = sum(p.count * (round(1.04 * (h * p.N * p.K * 2 + p.M * p.K * 2)) + 2 * p.M * p.N) for p, h in zip(probs, hits))
    assert mix["dram_bytes"] == pytest.approx(want, rel=1e-12) and mix["t_ms"] is None
    fl = sum(p.count * round(2 * p.M * p.N * p.K * 1.01) for p in probs)
    assert mix["tensor_flops_by_dtype"] == pytest.approx({"bf16": fl, "fp8": 0.0}, rel=1e-12)
    assert mix["useful_flops"] == sum(p.count * 2 * p.M * p.N * p.K for p in probs)


def test_counters_of_a_torch_built_kernel_are_the_library_side():
    """The Qwen3-MoE trace's grouped head ran torch._grouped_mm's CUTLASS kernel, compiled into
    PyTorch (its name holds at::cuda::detail): the counter run launches the library side, the
    kernel the run used, not the ladder level."""
    import gzip

    from roofline.stagec.rerun import _counter_target

    corpus = Path(__file__).resolve().parent.parent / "fixtures" / "corpus" / "qwen3moe_grouped_mm.json.gz"
    ev = json.loads(gzip.decompress(corpus.read_bytes()))
    ev = ev.get("traceEvents", ev) if isinstance(ev, dict) else ev
    grouped = next(e["name"] for e in ev if e.get("cat") == "kernel" and "GroupProblemShape" in e.get("name", ""))
    assert _counter_target({"name": grouped}) == "cublas"
    assert _counter_target({"name": "gemm_l12"}) == "ladder"
    assert _counter_target({"name": "triton_tem_fused_mm_0"}) == "ladder"
    assert _counter_target({"name": "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT"}) == "cublas"

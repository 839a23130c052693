"""The named steps of one head entry (roofline.core.procedure), one by one, on a real H200 decode
Top-N (fixtures/rerun_real/decode: Llama-3-8B-shaped decode at batch 64, traced on an H200)."""
from pathlib import Path

import pytest

from roofline.core import procedure as P
from roofline.io.errors import EntryError
from roofline.core.inputs import load_config, load_env, load_topn
from roofline.peaks import resolve

D = Path(__file__).resolve().parent.parent / "fixtures" / "rerun_real" / "decode"


@pytest.fixture(scope="module")
def real():
    t = load_topn(D / "profile" / "round_1" / "profile_topN.json")
    return t, load_env(D / "env_report.json"), load_config(D / "config.json"), resolve("NVIDIA H200", "sm_90")


def _gemm(t, N, K):
    return next(e for e in t.entries if e.shapes and e.shapes[0].get("N") == N and e.shapes[0].get("K") == K
                and "splitK" not in e.name)


def test_regime_and_logical_time_come_from_the_entry(real):
    t, env, cfg, pk = real
    e = _gemm(t, 14336, 4096)
    notes = []
    place, reg = P.place_regime(e, t, notes)
    assert place.regime == "decode" and place.t_ms == e.regimes["decode"].base_latency_ms
    assert "decode" in notes[0]
    n_l = e.launches_per_logical_op
    place, t_s = P.logical_time(reg, place, n_l, notes)
    assert place.launches_per_logical_op == n_l and t_s == pytest.approx(reg.base_latency_ms * n_l / 1e3)
    assert place.t_logical_op_ms == pytest.approx(reg.base_latency_ms * n_l)


def test_work_of_a_captured_gemm_is_2mnk(real):
    t, env, cfg, pk = real
    e = _gemm(t, 14336, 4096)
    w = P.model_work("gemm", e, env, cfg, "decode", [])
    M, N, K = (e.shapes[0][k] for k in "MNK")
    assert w.shape_source == "captured"
    assert {c.flops_est for c in w.res.candidates} == {2 * M * N * K}
    # the weights alone (N x K at the weight dtype's width) are a floor on every byte model
    assert all(c.bytes_est >= N * K * w.dt["weight_bytes"] for c in w.res.candidates)


def test_byte_model_choice_is_the_largest_feasible_else_flags_all_infeasible(real):
    t, env, cfg, pk = real
    e = _gemm(t, 14336, 4096)
    w = P.model_work("gemm", e, env, cfg, "decode", [])
    pf, cdt, tol = P.compute_roof(pk, w.res.compute_dtype, w.shape_source, [])
    t_s = e.regimes["decode"].base_latency_ms / 1e3
    alts, chosen = P.choose_byte_model("gemm", w.res, t_s, pk.hbm_bw_bytes_s, pf, tol, [])
    feas = [a for a in alts if a["feasible"]]
    assert feas and chosen["bytes_est"] == max(a["bytes_est"] for a in feas)
    # a thousand times faster than measured: every model implies more than the HBM peak
    notes = []
    alts, chosen = P.choose_byte_model("gemm", w.res, t_s / 1000, pk.hbm_bw_bytes_s, pf, tol, notes)
    assert not any(a["feasible"] for a in alts)
    assert chosen["bytes_est"] == min(a["bytes_est"] for a in alts)
    # a dense GEMM has one byte model (each operand once): the choice is that one, said infeasible
    assert len(alts) == 1 and alts[0]["model"] == "dense" and alts[0]["roofline_pct_raw"] > 1.0


def test_verdict_flags_dispatch_floor_and_l3(real):
    m = {"hbm_util": 0.9, "compute_util": 0.1}
    f = P.verdict_flags("memory", m, 0.5, 0.9, 1e6, 4.8e12, 5e-4, [])
    assert f.verdict is True and f.bound_type == "memory" and not f.dispatch_bound and not f.suspect
    f = P.verdict_flags("memory", m, P.DISPATCH_FLOOR_MS * 0.8, 0.9, 1e6, 4.8e12, 4e-6, [])
    assert f.verdict is False and f.dispatch_bound and f.bound_type == "latency"
    f = P.verdict_flags("memory", m, 0.5, 1.5, 1e6, 4.8e12, 5e-4, [])     # impossible ratio
    assert f.verdict is False and f.suspect and f.stage_c_candidate and f.bytes_upper_bound == pytest.approx(4.8e12 * 5e-4)
    # served from the L2: no verdict, unless stage C measured the bytes
    assert P.verdict_flags("memory", m, 0.5, 0.9, 1e6, 4.8e12, 5e-4, [], l2_resident=True).verdict is False
    assert P.verdict_flags("memory", m, 0.5, 0.9, 1e6, 4.8e12, 5e-4, [], l2_resident=True, measured=True).verdict


def test_attainable_speedup_is_capped_at_the_dispatch_floor():
    t_ms = 2 * P.DISPATCH_FLOOR_MS
    attain, uncapped = P.attainable_speedup(0.8, 0.1, t_ms, [])
    assert attain == pytest.approx(2.0) and uncapped == pytest.approx(8.0)
    assert P.attainable_speedup(0.8, 0.4, 1.0, []) == (pytest.approx(2.0), None)   # far above the floor: target / achieved
    assert P.attainable_speedup(None, 0.4, 1.0, []) == (None, None)


def test_unmodellable_entries_are_refused(real):
    t, env, cfg, pk = real
    e = _gemm(t, 14336, 4096)
    with pytest.raises(EntryError, match="cannot be modelled"):
        P.check_modelable(e, "unknown", pk)
    # a collective is modellable where the peaks have an interconnect roof, and refused without one
    P.check_modelable(e, "comm", pk)
    import dataclasses
    with pytest.raises(EntryError, match="no interconnect roof"):
        P.check_modelable(e, "comm", dataclasses.replace(pk, interconnect_bw_bytes_s=None))
    with pytest.raises(EntryError, match="cannot be modelled"):
        P.check_modelable(e, "no_such_class", pk)
    P.check_modelable(e, "gemm", pk)   # a GEMM on H200 peaks is modellable


def test_analyze_entry_is_the_steps_composed(real):
    t, env, cfg, pk = real
    e = _gemm(t, 14336, 4096)
    out, info = P.analyze_entry(e, t, env, cfg, pk, "B", None, [])
    assert out["modeled"] and out["regime"] == "decode" and out["shape_source"] == "captured"
    M, N, K = 64, 14336, 4096
    assert out["flops_est"] == 2 * M * N * K
    # counted here: bf16 operands once (the fewest bytes), the trace's time of one logical op, the
    # table's roofs; the axis from the ridge
    nbytes = 2 * (M * K + N * K + M * N)
    t_s = e.regimes["decode"].base_latency_ms * e.launches_per_logical_op / 1e3
    bw, pf = pk.hbm_bw_bytes_s, pk.compute_peak("bf16")
    hbm, comp = nbytes / t_s / bw, 2 * M * N * K / t_s / pf
    axis = "compute" if 2 * M * N * K / nbytes > pf / bw else "memory"
    assert out["bytes_est"] == nbytes and out["roof_axis"] == axis == "memory"
    assert out["hbm_util"] == pytest.approx(hbm, rel=1e-12) and out["compute_util"] == pytest.approx(comp, rel=1e-12)
    assert out["roofline_pct_raw"] == pytest.approx(hbm, rel=1e-12)

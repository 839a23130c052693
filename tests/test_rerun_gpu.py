"""The isolated re-run on the device: check first, time, counters (if ncu is there)."""
import pytest

pytestmark = pytest.mark.gpu


def test_measure_problems_checks_then_times_beside_cublas():
    from roofline.rerun import Problem
    from roofline.stagec.timing import measure_problems

    m = measure_problems([Problem("dense", 512, 1024, 1024, "bf16", 2.0)], level_id=3)
    assert m["check_ok"] and m["problems"][0]["check_ok"]
    p = m["problems"][0]
    assert 0 < p["ladder_t_ms_p20"] <= p["ladder_t_ms"] <= p["ladder_t_ms_p80"]
    assert m["ladder_t_ms"] == pytest.approx(2.0 * p["ladder_t_ms"])   # count x per-GEMM time
    assert m["cublas_t_ms"] == pytest.approx(2.0 * p["cublas_t_ms"])


def test_collect_counters_reads_the_isolated_launch():
    import shutil

    from roofline.rerun import Problem
    from roofline.stagec.profiler import collect_counters

    if not shutil.which("ncu"):
        pytest.skip("no ncu on PATH")
    c = collect_counters(Problem("dense", 256, 512, 512, "bf16", 1.0), level_id=3)
    assert c and "error" not in c, c
    # the tensor pipe issued at least the useful 2MNK (tiles pad M/N up to 128)
    assert c["tensor_flops_by_dtype"]["bf16"] >= 2 * 256 * 512 * 512
    assert c["dram_bytes"] > 0


def test_nsight_python_path_where_installed():
    import shutil

    pytest.importorskip("nsight")
    from roofline.rerun import Problem
    from roofline.stagec.profiler import _collect_ncu_cli, collect_counters, counters_backend

    if not shutil.which("ncu"):
        pytest.skip("no ncu on PATH")
    backend, why = counters_backend()
    if backend != "nsight-python":
        pytest.skip(why)
    p = Problem("dense", 256, 512, 512, "bf16", 1.0)
    c = collect_counters(p, level_id=3)
    assert c and "error" not in c, c
    assert c["source"] == "nsight-python" and c["backend"].startswith("nsight-python 0.9")
    cli = _collect_ncu_cli(p, level_id=3)
    # the two paths read the same hardware counters of the same launch configuration
    assert c["flops_issued"] == cli["flops_issued"]
    assert c["dram_bytes"] == pytest.approx(cli["dram_bytes"], rel=0.05)


def test_rerun_of_an_moe_head_runs_its_expert_gemms(tmp_path):
    """An MoE head reduces to its two expert GEMMs at the average tokens per hit expert; the re-run
    times both (count = experts hit) and writes stage C."""
    import json

    from roofline import api
    from roofline.report import artifact as report
    from roofline.rerun import rerun_artifact
    from roofline.core.models.moe import experts_hit

    topn = {"serving": {"n_decode_steps": 100, "n_prefill_steps": 1}, "entries": [{
        "name": "fused_moe_kernel", "pct_gpu_time": 30.0, "classification": "moe",
        "regimes": {"decode": {"base_latency_ms": 0.2, "launches_per_step": 48}}, "launches_per_logical_op": 2,
        "shapes": [{"M": 64, "E": 64, "top_k": 8, "hidden": 2048, "inter": 768}], "dtypes": {"act": "bf16", "weight": "bf16"}}]}
    env = {"gfx": "sm_90", "gpu_name": "NVIDIA H200", "model_arch_class": "moe", "model_dtype": "bf16",
           "workload": {"isl": 1024, "osl": 1024, "conc": 64}}
    art = api.analyze(topn, env)
    d = tmp_path / "r"
    report.write_artifact(art, d)
    res = rerun_artifact(d / "profile_roofline.json", counters=False, playbook_dir=tmp_path / "kb")
    assert res["rerun"] == ["fused_moe_kernel"], res
    out = json.loads((d / "profile_roofline.json").read_text())
    m = out["entries"][0]["measured"]
    hit = experts_hit(64, 512)
    assert out["stage"] == "C" and [p["label"] for p in m["problems"]] == ["moe stage1 (gate/up)", "moe stage2 (down)"]
    # each stage is ONE grouped GEMM of M x top_k rows over the E experts (as torch._grouped_mm runs it),
    # with a drawn routing whose experts hit stand beside the model's expected count
    assert all(p["check_ok"] and p["count"] == 1.0 and p["experts_hit_model"] == pytest.approx(hit)
               and 0 < p["experts_hit_drawn"] <= 64 for p in m["problems"])
    assert m["ladder_t_ms"] == pytest.approx(sum(p["count"] * p["ladder_t_ms"] for p in m["problems"]))

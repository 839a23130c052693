"""The isolated re-run on the device: check first, time, counters (if ncu is there)."""
import pytest

pytestmark = pytest.mark.gpu


def test_measure_problems_checks_then_times_beside_cublas():
    from roofline.rerun import Problem, measure_problems

    m = measure_problems([Problem("dense", 512, 1024, 1024, "bf16", 2.0)], level_id=3)
    assert m["check_ok"] and m["problems"][0]["check_ok"]
    p = m["problems"][0]
    assert 0 < p["ladder_t_ms_p20"] <= p["ladder_t_ms"] <= p["ladder_t_ms_p80"]
    assert m["ladder_t_ms"] == pytest.approx(2.0 * p["ladder_t_ms"])   # count x per-GEMM time
    assert m["cublas_t_ms"] == pytest.approx(2.0 * p["cublas_t_ms"])


def test_collect_counters_reads_the_isolated_launch():
    import shutil

    from roofline.rerun import Problem, collect_counters

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
    from roofline.rerun import Problem, _collect_ncu_cli, collect_counters, counters_backend

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

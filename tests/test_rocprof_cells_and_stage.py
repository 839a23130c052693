"""Issue 34 item 5: a rocprofv3 Counter_Value that is no number is named by its row and cell, and an
artifact says stage "C" only when a counter was used (through the CLI, on the rocprof fixture: the
bf16 4096^3 GEMM of fixtures/rocprof/gemm_synthesized.csv, on an MI355X env report)."""
import csv
import io
import json

from click.testing import CliRunner

from roofline.cli import main

from conftest import FIXTURES

SYNTH = FIXTURES / "rocprof" / "gemm_synthesized.csv"
BF16 = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_K1_MIWT4_4"


def _round(tmp_path):
    rd = tmp_path / "profile" / "round_1"
    rd.mkdir(parents=True)
    topn = {"schema_version": 1, "round": 1, "serving": {"n_decode_steps": 0, "n_prefill_steps": 10},
            "entries": [{"name": BF16, "pct_gpu_time": 60.0, "classification": "gemm",
                         "regimes": {"prefill": {"base_latency_ms": 0.192, "launches_per_step": 1}},
                         "shapes": [{"M": 4096, "N": 4096, "K": 4096}],
                         "dtypes": {"act": "bf16", "weight": "bf16", "out": "bf16"}}]}
    (rd / "profile_topN.json").write_text(json.dumps(topn))
    (rd / "env_report.json").write_text(json.dumps({"gfx": "gfx950", "gpu_name": "AMD Instinct MI355X",
                                                    "model_dtype": "bf16", "model_arch_class": "dense",
                                                    "workload": {"isl": 4096, "osl": 1, "conc": 1}}))
    return rd


def _analyze(rd, csv_path):
    r = CliRunner().invoke(main, ["analyze", str(rd / "profile_topN.json"), "--counters", str(csv_path),
                                  "--format", "json", "--no-write"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_counters_used_make_stage_c(tmp_path):
    art = _analyze(_round(tmp_path), SYNTH)
    (e,) = art["entries"]
    assert art["stage"] == "C" and "implausible" not in e["counters"]
    assert "stage C" in e["notes"] or e["bytes_est"] == e["counters"]["dram_bytes"]


def test_a_non_numeric_counter_value_names_its_row_and_cell_and_the_stage_stays_b(tmp_path):
    text = SYNTH.read_text()
    rows = list(csv.reader(io.StringIO(text)))
    col = rows[0].index("Counter_Value")
    i = next(i for i, r in enumerate(rows) if i and r[rows[0].index("Counter_Name")] == "FETCH_SIZE"
             and r[rows[0].index("Kernel_Name")] == BF16)
    rows[i][col] = "n/a"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    bad = tmp_path / "bad.csv"
    bad.write_text(out.getvalue())
    art = _analyze(_round(tmp_path), bad)
    (e,) = art["entries"]
    why = e["counters"]["implausible"]
    assert why and all(f"row {i + 1}, Counter_Value (FETCH_SIZE): 'n/a'" in w for w in why)   # line i+1 of the file
    assert art["stage"] == "B"          # the only counter record was not used: no stage C
    assert e["bytes_est"] != e["counters"]["dram_bytes"]

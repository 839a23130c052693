"""The input policy of docs/input_policy.md, field by field: every numeric field of every input kind
x NaN, Infinity, -Infinity, null, a string, a boolean, an array, a negative, zero, 10^5000, each
checked against the outcome the policy gives, through the CLI and the hook (tests/input_policy.py
says what each outcome checks). Deterministic: every case runs on every CI run."""
import collections

import pytest

import input_policy as P

CASES = P.all_cases()


def test_the_sweep_covers_every_numeric_field_of_every_kind():
    by_kind = collections.Counter(c.kind for c in CASES)
    assert set(by_kind) == {"topn", "env", "config", "ncu_csv", "rocprof_csv", "peaks_md"}
    fields = collections.defaultdict(set)
    for c in CASES:
        fields[c.kind].add(c.field)
    # each field gets all ten bad values
    for c_kind, names in fields.items():
        for f in names:
            assert {c.bad for c in CASES if c.kind == c_kind and c.field == f} == {b for b, _, _ in P.BAD}, f
    # every number of the documents is swept (an independent walk of the JSON)
    assert fields["topn"] == {P._jpath(p) for p in P.numeric_paths(P.policy_topn())}
    assert {"entries[0].launches_per_logical_op", "entries[0].est_shape.M", "entries[1].regimes.prefill.base_latency_ms",
            "entries[5].shapes[0].shape[1]", "entries[2].shape_launches[0]", "serving.n_decode_steps",
            "total_gpu_time_ms"} <= fields["topn"]
    assert fields["env"] == {"workload.isl", "workload.osl", "workload.conc", "tp"}
    # every column of the counter fixture that the ncu reader maps, each with its policy rule
    assert fields["ncu_csv"] == set(P.ncu_columns()) and {"dram__bytes_read.sum", "gpu__time_duration.sum"} \
        <= fields["ncu_csv"]
    assert {"text_config.hidden_size", "text_config.num_experts", "text_config.vocab_size"} <= fields["config"]


@pytest.mark.parametrize("kind", ["topn", "env", "config", "ncu_csv", "rocprof_csv", "peaks_md"])
def test_policy_sweep(kind):
    cases = [c for c in CASES if c.kind == kind]
    bad = P.run_all(cases)
    assert not bad, f"{len(bad)} violations in {len(cases)} cases:\n" + "\n".join(bad[:30])


# ------------------------------------------------------------------ each class of issue 26, CLI and hook
import copy  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import reliability as R  # noqa: E402
from roofline import hook  # noqa: E402
from roofline.report import artifact as report

ART, MD = report.ARTIFACT_JSON, report.ARTIFACT_MD


@pytest.fixture
def rd(tmp_path):
    work = tmp_path / "run"
    work.mkdir()
    d, _ = R._round(work, None)
    return d


def _write_topn(rd: Path, text: str) -> Path:
    (rd / "profile_topN.json").write_text(text)
    return rd / "profile_topN.json"


def _prior(rd: Path) -> tuple[bytes, bytes]:
    return R._seed_prior(rd)


def _both(rd: Path, *extra, **hook_kw):
    """(exit code, stderr, CLI artifact or None, hook summary, the hook's artifact or None): the
    CLI writes into a fresh --out directory, the hook into the round directory."""
    out = rd.parent / "cli_out"
    out.mkdir(exist_ok=True)
    code, stdout, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--out", str(out), "--format", "json",
                               *extra])
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
        assert not any(out.iterdir()), "a refused CLI run wrote files"
    s = hook.run(rd, **hook_kw)
    assert isinstance(s, dict)
    assert not [e for e in s["skill_errors"] if "internal error" in e["error"]]
    hart = json.loads((rd / ART).read_text()) if (rd / ART).exists() else None
    if hart is not None:
        assert report.to_markdown(hart) == (rd / MD).read_text()   # a pair
    return code, err, (json.loads(stdout) if code == 0 else None), s, hart


def _baseline():
    art = R.cli(["analyze", str(R.FIX / "hook" / "round_b_topN.json"), "--env", str(R.FIX / "hook" / "env_report.json"),
                 "--format", "json", "--no-write"])
    return json.loads(art[1])


def _same_except(art, base, name):
    got = {e["name"]: P._key(e) for e in art["entries"]}
    return all(got.get(e["name"]) == P._key(e) for e in base["entries"] if e["name"] != name)


def test_wrong_accept_a_null_dimension_degrades_never_a_verdict(rd):
    top = copy.deepcopy(R.BASE_TOPN)
    top["entries"][0]["shapes"][0]["N"] = None
    _write_topn(rd, json.dumps(top))
    prior = _prior(rd)
    code, err, art, s, hart = _both(rd)
    name = top["entries"][0]["name"]
    want = [{"name": name, "reason": "entries[0].shapes[0].N: expected a positive dimension (at most 2^48), got null"}]
    for a in (art, hart):
        assert code == 0 and a["degraded"] == want
        e = next(x for x in a["entries"] if x["name"] == name)
        assert e["modeled"] is False and e["headroom_class"] == "unknown" and "provisional_headroom_class" not in e
        assert _same_except(a, _baseline(), name)
    assert (rd / ART).read_bytes() != prior[0] and s["degraded"] == 1


@pytest.mark.parametrize("steps", ["-2000", "NaN", "-Infinity", P.HUGE])
def test_wrong_accept_a_negative_step_count_is_refused_with_its_path(rd, steps):
    text = json.dumps(R.BASE_TOPN).replace('"n_decode_steps": 2000', f'"n_decode_steps": {steps}')
    assert text != json.dumps(R.BASE_TOPN)
    p = _write_topn(rd, text)
    prior = _prior(rd)
    code, err, _, s, _ = _both(rd)
    found = {"-2000": "-2000", "NaN": "NaN", "-Infinity": "-Infinity"}.get(steps, "a 5001-digit integer")
    line = f"{p}: serving.n_decode_steps: expected a step count >= 0 (at most 2^48), got {found}"
    assert code == 2 and err.strip() == f"roofline analyze: {line}"
    assert [e["error"] for e in s["skill_errors"] if e["where"] == "analyze"] == [f"InputError: {line}"]
    assert ((rd / ART).read_bytes(), (rd / MD).read_bytes()) == prior   # nothing replaced
    assert s["json"] == str(rd / ART) and s["ranking_by_pct"] == []


def test_wrong_accept_a_kernel_without_a_name(tmp_path, rd):
    # a trace: refused by `roofline topn`, nothing written
    for layout in ("fast", "compact"):
        a, b = R._KERNEL_ITEMS[0]
        item = R.BASE_TRACE_TEXT[a:b]
        m = R._FIELD_RX["name"].search(item)
        text = R.BASE_TRACE_TEXT[:a] + item[:m.start(2)] + b'""' + item[m.end(2):] + R.BASE_TRACE_TEXT[b:]
        src = tmp_path / f"t_{layout}.json"
        src.write_bytes(R._layout(text, layout))
        out = tmp_path / f"o_{layout}" / "profile_topN.json"
        code, _, err = R.cli(["topn", str(src), "-o", str(out)])
        assert code == 2 and err.strip().startswith(f"roofline topn: {src}: 1 kernel launch(es) have an empty name")
        assert "internal error" not in err and not out.parent.exists()
    # a Top-N entry named '': degraded, named by its place, through the CLI and the hook
    top = copy.deepcopy(R.BASE_TOPN)
    top["entries"][1]["name"] = ""
    _write_topn(rd, json.dumps(top))
    code, err, art, s, hart = _both(rd)
    for a in (art, hart):
        assert {"name": "entries[1]", "reason": "entries[1].name: expected the kernel's name, got an empty string"} \
            in a["degraded"] and "" not in a["ranking_by_pct"]


def _ncu_with(col_values: dict, kernel: str) -> bytes:
    rows = [list(r) for r in R._csv_rows(R.BASE_NCU_COUNTERS_CSV)]
    h = rows[0]
    for r in rows[2:]:
        if r[h.index("Kernel Name")] == kernel:
            for col, v in col_values.items():
                r[h.index(col)] = v
    return R._csv_bytes(rows)


def _floor_bytes() -> float:
    """The 64x8192x8192 bf16 GEMM's operands (A, B, C once) less one L2 of the H200 table."""
    import yaml

    l2 = yaml.safe_load(R.BASE_PEAKS_TEXT)["l2_bytes"]
    return (64 * 8192 + 8192 * 8192 + 64 * 8192) * 2 - l2


def _own_memory_roof(kernel: str) -> float:
    """The report's own DRAM peak for `kernel`: peak bytes per cycle x the DRAM clock, launch mean."""
    rows = R._csv_rows(R.BASE_NCU_COUNTERS_CSV)
    h = rows[0]
    vals = [float(r[h.index("dram__bytes.sum.peak_sustained")].replace(",", ""))
            * float(r[h.index("dram__cycles_elapsed.avg.per_second")].replace(",", ""))
            for r in rows[2:] if r[h.index("Kernel Name")] == kernel]
    return sum(vals) / len(vals)


@pytest.mark.parametrize("cells,reason", [
    ({"dram__bytes_read.sum": "2", "dram__bytes_write.sum": "0"},
     lambda k: f"2 DRAM bytes per logical op, below the {_floor_bytes():.3g} the operands need"),
    ({"dram__bytes_read.sum": "1e999"}, lambda k: "dram_bytes is inf: not a count or a time"),
    ({"dram__bytes_read.sum": "1e14"}, lambda k: f"above the memory roof {_own_memory_roof(k):.3g} B/s"),
    ({"sm__ops_path_tensor_src_bf16_dst_fp32.sum": "1e15"}, lambda k: "of the tensor peak"),
])
def test_wrong_accept_implausible_counters_are_l4_never_high(rd, tmp_path, cells, reason):
    name = R.BASE_TOPN["entries"][0]["name"]   # 64x8192x8192 bf16 GEMM, ~37 us, 136 MB of operands
    reason = reason(name)
    c = tmp_path / "counters.csv"
    c.write_bytes(_ncu_with(cells, name))
    code, err, art, s, hart = _both(rd, "--counters", str(c), counters=str(c))
    good = json.loads(R.cli(["analyze", str(rd / "profile_topN.json"), "--counters",
                             str(R.FIX / "ncu" / "known_raw.csv"), "--format", "json", "--no-write"])[1])
    for a in (art, hart):
        assert code == 0
        e = next(x for x in a["entries"] if x["name"] == name)
        assert e["confidence"] == "medium" and "bytes_measured" not in e
        assert any(reason in r for r in e["counters"]["implausible"]), e["counters"]["implausible"]
        assert "L4: implausible counters" in e["notes"] and reason in e["notes"]
        assert _same_except(a, good, name)   # the other heads keep their measured bytes
    # with the real counters the same head is measured (confidence high): the rule does not fire
    assert next(x for x in good["entries"] if x["name"] == name)["confidence"] == "high"


@pytest.mark.parametrize("field,literal,found", [
    ("pct_gpu_time", "NaN", "NaN"), ("pct_gpu_time", "Infinity", "Infinity"), ("pct_gpu_time", "-31.2", "-31.2"),
    ("base_latency_ms", "-Infinity", "-Infinity"), ("launches_per_step", "NaN", "NaN"), ("K", P.HUGE, "a 5001-digit integer"),
])
def test_contract_one_bad_entry_never_stops_the_run(rd, field, literal, found):
    old = {"pct_gpu_time": '"pct_gpu_time": 31.2', "base_latency_ms": '"base_latency_ms": 0.037835',
           "launches_per_step": '"launches_per_step": 32', "K": '"K": 8192'}[field]
    text = json.dumps(R.BASE_TOPN)
    assert text.count(old) == 1
    _write_topn(rd, text.replace(old, old.split(": ")[0] + ": " + literal))
    code, err, art, s, hart = _both(rd)
    name = R.BASE_TOPN["entries"][0]["name"]
    path = {"pct_gpu_time": "pct_gpu_time", "base_latency_ms": "regimes.decode.base_latency_ms",
            "launches_per_step": "regimes.decode.launches_per_step", "K": "shapes[0].K"}[field]
    for a in (art, hart):
        assert code == 0
        [d] = a["degraded"]
        assert d["name"] == name and d["reason"].startswith(f"entries[0].{path}: expected ")
        assert d["reason"].endswith(f"got {found}")
        assert (name in a["ranking_by_pct"]) is (field != "pct_gpu_time")   # no share: degraded[] only
        assert _same_except(a, _baseline(), name)
    assert s["degraded"] == 1 and len(s["ranking_by_pct"]) == len(art["ranking_by_pct"])


def test_contract_peak_table_errors_name_the_file(rd, tmp_path):
    import yaml

    d = yaml.safe_load(R.BASE_PEAKS_TEXT)
    d["flops"]["bf16"]["measured"]["value"] = float("nan")
    p = tmp_path / "bad_peaks.yaml"
    p.write_text(yaml.safe_dump(d))
    prior = _prior(rd)
    code, err, _, s, _ = _both(rd, "--peaks", str(p), peaks=str(p))
    line = f"{p}: flops.bf16.measured.value: expected a positive number, got nan"
    assert code == 2 and err.strip() == f"roofline analyze: {line}"
    assert any(line in e["error"] for e in s["skill_errors"])
    assert ((rd / ART).read_bytes(), (rd / MD).read_bytes()) == prior


@pytest.mark.parametrize("damage", ["flip", "crc", "header", "cut"])
def test_contract_corrupt_gzip_is_one_line_naming_the_file(rd, tmp_path, damage):
    def hurt(gz: bytes) -> bytes:
        return {"flip": gz[:40] + bytes(b ^ 0x55 for b in gz[40:48]) + gz[48:], "crc": gz[:-8] + b"\0\0\0\0" + gz[-4:],
                "header": b"\x1f\x8b\x09" + gz[3:], "cut": gz[: len(gz) // 2]}[damage]
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes(hurt(gzip.compress(R.BASE_TRACE_TEXT)))
    code, _, err = R.cli(["topn", str(trace), "-o", str(tmp_path / "o" / "profile_topN.json")])
    assert code == 2 and err.strip().startswith(f"roofline topn: {trace}: gzip data "), err
    assert not (tmp_path / "o").exists()
    counters = tmp_path / "counters.csv.gz"
    counters.write_bytes(hurt(gzip.compress(R.BASE_NCU_COUNTERS_CSV)))
    prior = _prior(rd)
    code, err, _, s, _ = _both(rd, "--counters", str(counters), counters=str(counters))
    assert code == 2 and err.strip().startswith(f"roofline analyze: {counters}: gzip data "), err
    assert any(str(counters) in e["error"] and "gzip data" in e["error"] for e in s["skill_errors"])
    assert ((rd / ART).read_bytes(), (rd / MD).read_bytes()) == prior


def test_contract_a_5000_digit_number_in_a_file_level_field(rd):
    _write_topn(rd, json.dumps(R.BASE_TOPN).replace('"total_gpu_time_ms": 20480.0', f'"total_gpu_time_ms": {P.HUGE}'))
    code, err, _, s, _ = _both(rd)
    assert code == 2 and err.strip().endswith("total_gpu_time_ms: expected a time >= 0 (ms), got a 5001-digit integer")


def test_contract_a_lone_surrogate_in_a_name(rd):
    top = copy.deepcopy(R.BASE_TOPN)
    top["entries"][0]["name"] = "nvjet_\ud800_kernel"
    top["entries"][1]["shapes"][0]["layout"] = "row\udfff"   # a key no model reads: kept, never judged
    _write_topn(rd, json.dumps(top))   # ensure_ascii: the file holds the JSON escapes \ud800, \udfff
    code, err, art, s, hart = _both(rd)
    for a in (art, hart):
        assert code == 0 and a["degraded"][0]["name"] == "nvjet_\\ud800_kernel"
        assert "a lone surrogate, \\ud800 at character 6" in a["degraded"][0]["reason"]
        assert "nvjet_\\ud800_kernel" in a["ranking_by_pct"]
    assert "nvjet_\\ud800_kernel" in (rd / MD).read_text(encoding="utf-8")
    e1 = next(e for e in hart["entries"] if e["name"] == top["entries"][1]["name"])
    assert e1["shape"]["layout"] == "row\\udfff" and e1["headroom_class"] != "unknown"   # analysed, written escaped
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--no-write"])   # the table on stdout
    assert code == 0 and "internal error" not in err


@pytest.mark.parametrize("value,found", [("NaN", "NaN"), ("Infinity", "Infinity"), ("-1", "-1"), ("null", "null")])
def test_contract_a_non_finite_workload_field_is_named(rd, value, found):
    env = rd.parent.parent / "env_report.json"
    env.write_text(json.dumps(R.BASE_ENV).replace('"conc": 64', f'"conc": {value}'))
    prior = _prior(rd)
    code, err, _, s, _ = _both(rd)
    assert code == 2 and err.strip().startswith(f"roofline analyze: {env}: workload.conc: expected a ")
    assert f"got {found}" in err
    assert any(f"{env}: workload.conc: expected a " in e["error"] for e in s["skill_errors"])
    assert ((rd / ART).read_bytes(), (rd / MD).read_bytes()) == prior


def test_contract_an_infinite_dram_count_is_l4_not_a_schema_break(rd, tmp_path):
    name = R.BASE_TOPN["entries"][0]["name"]
    c = tmp_path / "counters.csv"
    c.write_bytes(_ncu_with({"dram__bytes_read.sum": "inf", "dram__bytes.sum": "inf"}, name))
    code, err, art, s, hart = _both(rd, "--counters", str(c), counters=str(c))
    assert code == 0 and "schema" not in err
    for a in (art, hart):
        e = next(x for x in a["entries"] if x["name"] == name)
        assert e["counters"]["implausible"] == ["dram_bytes is inf: not a count or a time",
                                                "dram_read_bytes is inf: not a count or a time"]
        assert e["counters"]["dram_bytes"] is None and e["confidence"] == "medium"


def test_contract_two_entries_with_one_name_are_kept_apart(rd):
    top = copy.deepcopy(R.BASE_TOPN)
    dup = copy.deepcopy(top["entries"][0])
    top["entries"][0]["pct_gpu_time"], dup["pct_gpu_time"] = 20.0, 11.2   # the 31.2% split in two rows
    top["entries"].append(dup)
    _write_topn(rd, json.dumps(top))
    code, err, art, s, hart = _both(rd)
    name = dup["name"]
    assert code == 0 and f"entries[0] and entries[5] share the kernel name {name[:60]!r}: kept apart" in err
    for a in (art, hart):
        rows = [e for e in a["entries"] if e["name"] == name]
        assert sorted(e["pct_gpu_time"] for e in rows) == [11.2, 20.0]   # the shares as given, not merged
        assert all("kept apart, each with its own pct_gpu_time as given, not merged" in e["notes"] for e in rows)
        assert a["ranking_by_pct"].count(name) == 2 and a["ranking_by_expected_gain"].count(name) == 2
    assert s["ranking_by_pct"].count(name) == 2
    # the table shows each row with its own share (it matched the rows by name before)
    code, out, _ = R.cli(["analyze", str(rd / "profile_topN.json"), "--no-write", "--wide"])
    label = dup["short_name"]
    at = out.splitlines()[0].index("% GPU")      # the column, by the header (a regime / aten op column precedes it)
    shares = sorted(float(ln[at:].split()[0]) for ln in out.splitlines() if f" {label} " in ln)
    assert shares == [11.2, 20.0]

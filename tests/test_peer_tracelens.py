"""A peer analyzer beside roofline: TraceLens's per-op figures on the real H200 traces
(fixtures/peer/tracelens_<trace>.csv, recorded by benchmarks/peer_tracelens.py) against an
independent count made here from the shapes the profiling script used
(fixtures/traces_real/fixtures_meta.json), and roofline's own figures against the same count.

Independent count (per launch): GEMM 2*M*N*K FLOPs; attention 4*b*hq*sq*sk*d (x0.5 causal);
elementwise one FLOP per output element; a reduction one FLOP per input element; bytes are the
fewest the op can move: every input element read once and every output element written once,
each at its own dtype size (bf16 2, fp32 4, int64 indices 8); a Python scalar operand is a kernel
argument, not memory. No TraceLens import here.

Where roofline is wrong today (issue 11 item 8 and two found beside it) the test asserts the
correct value and is xfail(strict): once the fix lands it XPASSes, fails, and the marker must go.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "fixtures" / "peer"
REAL = ROOT / "fixtures" / "traces_real"
META = json.loads((REAL / "fixtures_meta.json").read_text())
MODEL = META["model"]
TRACES = ("prefill_llama", "decode_b64_cat", "graph_decode_mixed")
BF16, FP32, I64 = 2, 4, 8
BF, F = "c10::BFloat16", "float"
EXACT = 1e-9


# ----------------------------------------------------------------------------- fixture reading
def peer_rows(trace):
    out = []
    with open(PEER / f"tracelens_{trace}.csv", newline="") as f:
        for r in csv.DictReader(f):
            for k in ("parent_ops", "input_dims", "input_types", "concrete_inputs", "kernel_names",
                      "kernel_dur_us_mean_by_name", "peer_params"):
                r[k] = json.loads(r[k])
            r["launches"] = int(r["launches"])
            r["kernels_per_op"] = int(r["kernels_per_op"])
            for k in ("kernel_time_us_mean", "kernel_time_us_sum", "tflops_per_s_mean", "tb_per_s_mean",
                      "data_moved_mib"):
                r[k] = float(r[k]) if r[k] != "" else None
            for k in ("flops_per_op", "bytes_per_op"):
                r[k] = int(r[k]) if r[k] != "" else None
            out.append(r)
    return out


PEER_ROWS = {t: peer_rows(t) for t in TRACES}


def peer(trace, op, dims, types=None):
    """The one peer row of this op whose leading Input Dims (and types) are these."""
    hits = [r for r in PEER_ROWS[trace] if r["op"] == op and r["input_dims"][:len(dims)] == dims
            and (types is None or r["input_types"][:len(types)] == types)]
    assert len(hits) == 1, f"{trace}: {len(hits)} peer rows for {op} {dims} {types}"
    return hits[0]


# ----------------------------------------------------------------------------- independent count
def n(*shape):
    p = 1
    for s in shape:
        p *= s
    return p


def gemm(M, N, K, b=BF16):
    return dict(flops=2 * M * N * K, bytes=b * (M * K + K * N + M * N))


def attention(b, hq, hkv, sq, sk, d, causal, e=BF16):
    return dict(flops=4 * b * hq * sq * sk * d // (2 if causal else 1),
                bytes=e * (2 * b * hq * sq * d + 2 * b * hkv * sk * d))


def tokens(trace):
    m = META["traces"][trace]
    return m["batch"] * m.get("seq_len", 1)


def ops_per_window(trace):
    """Eager steps whose ops the trace records (graph replays have no aten ops)."""
    m = META["traces"][trace]
    if "eager_steps" in m:
        return m["eager_steps"]
    return m["steps"]["prefill"] + m["steps"]["decode"]


def elementwise_cases(trace):
    """The RMSNorm chain, residual add and SwiGLU, as the model writes them (tools/device/
    make_real_profiles.py): (label, op, dims, types, launches, flops, bytes, roofline selector)."""
    T, d, ff = tokens(trace), MODEL["d"], MODEL["d_ff"]
    L = META["traces"][trace]["n_layers"]
    norms, steps = 2 * L + 1, ops_per_window(trace)
    return [
        ("copy bf16->fp32 (x.to(float32))", "aten::copy_", [[T, d], [T, d]], [F, BF], norms * steps,
         n(T, d), n(T, d) * (BF16 + FP32), ("unrolled_elementwise_kernel[direct_copy_kernel", "bf16")),
        ("copy fp32->bf16 (h.to(bf16))", "aten::copy_", [[T, d], [T, d]], [BF, F], norms * steps,
         n(T, d), n(T, d) * (FP32 + BF16), ("vectorized_elementwise_kernel[bfloat16_copy_kernel", None)),
        ("pow(2) fp32", "aten::pow", [[T, d], []], [F], norms * steps,
         n(T, d), n(T, d) * 2 * FP32, ("vectorized_elementwise_kernel", "fp32", True)),
        ("rsqrt [T,1] fp32", "aten::rsqrt", [[T, 1]], [F], norms * steps,
         T, 2 * T * FP32, ("vectorized_elementwise_kernel[rsqrt_kernel", None)),
        ("mul h*rsqrt [T,d]x[T,1] fp32", "aten::mul", [[T, d], [T, 1]], [F, F], norms * steps,
         n(T, d), n(T, d) * FP32 + T * FP32 + n(T, d) * FP32, ("elementwise_kernel[MulFunctor]", "fp32")),
        ("mul weight*h [d]x[T,d] bf16", "aten::mul", [[d], [T, d]], [BF, BF], norms * steps,
         n(T, d), d * BF16 + 2 * n(T, d) * BF16, ("elementwise_kernel[MulFunctor]", "bf16")),
        ("residual add bf16", "aten::add", [[T, d], [T, d]], [BF, BF], 2 * L * steps,
         n(T, d), 3 * n(T, d) * BF16, ("vectorized_elementwise_kernel[CUDAFunctor_add]", None)),
        ("silu [T,ff] bf16", "aten::silu", [[T, ff]], [BF], L * steps,
         n(T, ff), 2 * n(T, ff) * BF16, ("vectorized_elementwise_kernel[silu_kernel]", None)),
        ("mul silu*up [T,ff] bf16", "aten::mul", [[T, ff], [T, ff]], [BF, BF], L * steps,
         n(T, ff), 3 * n(T, ff) * BF16, ("vectorized_elementwise_kernel[MulFunctor]", None)),
    ]


def mean_count(trace):
    """mean(-1, keepdim=True) of an fp32 [T, d]: reads T*d, writes T (one per row)."""
    T, d = tokens(trace), MODEL["d"]
    return dict(flops=n(T, d), bytes=n(T, d) * FP32 + T * FP32)


def eps_add_count(trace):
    """var + eps: a [T,1] fp32 tensor plus a Python scalar (a kernel argument)."""
    T = tokens(trace)
    return dict(flops=T, bytes=2 * T * FP32)


def gather_count(trace):
    """embedding(ids): `rows` table rows read, written once each, plus the int64 ids."""
    rows, d = tokens(trace), MODEL["d"]
    return dict(flops=0, bytes=2 * rows * d * BF16 + rows * I64)


def cat_counts(trace):
    """torch.cat([cache, new], dim=-2): every input read once, the output written once."""
    out = []
    for c in META["traces"][trace].get("cat_shapes", []):
        elems = sum(n(*s) for s in c["inputs"])
        out.append(dict(inputs=c["inputs"], launches=c["calls"], bytes=2 * elems * BF16, flops=0))
    return out


def index_copy_count(trace):
    """cache.index_copy_(2, pos, k): reads the [b, hkv, 1, hd] source and the one index, writes
    the same number of elements into the cache; the rest of the cache is untouched."""
    m = META["traces"][trace]
    src = n(m["batch"], MODEL["n_kv"], 1, MODEL["hd"])
    return dict(flops=0, bytes=2 * src * BF16 + 1 * I64)


def hbm_peak_bytes_s():
    """The H200 memory roof roofline uses (its peaks table)."""
    from roofline import peaks
    return peaks.resolve("NVIDIA H200", "sm_90").hbm_bw_bytes_s


# ============================================================================= peer == count
@pytest.mark.parametrize("trace", TRACES)
def test_peer_gemm_equals_count(trace):
    m = META["traces"][trace]
    by_shape = {}
    for g in m["gemm_shapes"]:
        key = (g["M"], g["N"], g["K"])
        by_shape[key] = by_shape.get(key, 0) + g["calls_per_step"]
    assert len(by_shape) >= 4
    for (M, N, K), calls in by_shape.items():
        r = peer(trace, "aten::mm", [[M, K], [K, N]], [BF, BF])
        c = gemm(M, N, K)
        assert (r["flops_per_op"], r["bytes_per_op"]) == (c["flops"], c["bytes"]), (M, N, K)
        assert r["launches"] == calls * ops_per_window(trace)
        # TraceLens's "Data Moved (MB)" is MiB; its TFLOP/s is FLOPs over its busy kernel time
        assert r["data_moved_mib"] * 2 ** 20 == pytest.approx(c["bytes"], rel=EXACT)
        assert r["tflops_per_s_mean"] * 1e12 * r["kernel_time_us_mean"] * 1e-6 == pytest.approx(c["flops"], rel=0.05)


@pytest.mark.parametrize("trace", TRACES)
def test_peer_attention_equals_count(trace):
    m, hq, hkv, d = META["traces"][trace], MODEL["n_q"], MODEL["n_kv"], MODEL["hd"]
    if trace == "prefill_llama":
        cases = [(a["batch"], a["q_len"], a["seq_len"], a["causal"], a["calls_per_step"] * ops_per_window(trace))
                 for a in m["attn_shapes"]]
    elif "context_len_first" in m:
        cases = [(m["batch"], 1, s, False, m["n_layers"])
                 for s in range(m["context_len_first"], m["context_len_last"] + 1)]
    else:
        cases = [(m["batch"], 1, m["static_cache_len"], False, m["n_layers"] * ops_per_window(trace))]
    for b, sq, sk, causal, launches in cases:
        r = peer(trace, "aten::_scaled_dot_product_cudnn_attention",
                 [[b, hq, sq, d], [b, hkv, sk, d], [b, hkv, sk, d]])
        c = attention(b, hq, hkv, sq, sk, d, causal)
        assert (r["flops_per_op"], r["bytes_per_op"]) == (c["flops"], c["bytes"]), (b, sq, sk)
        assert r["launches"] == launches
        assert r["peer_params"]["causal"] is causal


@pytest.mark.parametrize("trace", TRACES)
def test_peer_elementwise_and_copy_equal_count(trace):
    """Unary, binary (broadcast included) and the mixed-dtype copies in both directions."""
    for label, op, dims, types, launches, flops, nbytes, _ in elementwise_cases(trace):
        r = peer(trace, op, dims, types)
        assert (r["flops_per_op"], r["bytes_per_op"]) == (flops, nbytes), label
        assert r["launches"] == launches, label


# ============================================================================= peer != count
@pytest.mark.parametrize("trace", TRACES)
def test_peer_mean_output_is_one_element_count_is_one_per_row(trace):
    """TraceLens reads dim/keepdim from Concrete Inputs as Python values; the Kineto trace stores
    them as strings ('[-1]', 'True'), so it falls back to a full reduction: one output element.
    The op is mean(-1, keepdim=True): one output per row. The count is right; the gap is tiny
    (4*(T-1) bytes) and both are below the HBM roof."""
    T, d = tokens(trace), MODEL["d"]
    r = peer(trace, "aten::mean", [[T, d]], [F])
    assert r["concrete_inputs"][1:3] == ["[-1]", "True"]           # what the trace says
    assert r["peer_params"]["num_output_elems"] == 1                # what the peer made of it
    c = mean_count(trace)
    assert r["flops_per_op"] == c["flops"]
    assert r["bytes_per_op"] == n(T, d) * FP32 + 1 * FP32
    assert c["bytes"] - r["bytes_per_op"] == (T - 1) * FP32
    assert c["bytes"] / (r["kernel_time_us_mean"] * 1e-6) <= hbm_peak_bytes_s()


@pytest.mark.parametrize("trace", TRACES)
def test_peer_counts_a_python_scalar_as_an_8_byte_read(trace):
    """var + eps: the trace types eps 'double' with empty dims; TraceLens counts it as a
    one-element fp64 tensor read (8 B). It is a kernel argument: the count is right."""
    T = tokens(trace)
    r = peer(trace, "aten::add", [[T, 1], []], [F, "double"])
    c = eps_add_count(trace)
    assert r["flops_per_op"] == c["flops"]
    assert r["bytes_per_op"] == c["bytes"] + 8


@pytest.mark.parametrize("trace", TRACES)
def test_peer_has_no_model_for_gather_cat_index_copy(trace):
    """The peer times these ops but models neither FLOPs nor bytes; the count, over the peer's own
    time, stays under the HBM roof (a plausible count), which a whole-table or whole-cache count
    cannot (see the roofline tests below)."""
    peak = hbm_peak_bytes_s()
    T, d = tokens(trace), MODEL["d"]
    g = peer(trace, "aten::gather", [[MODEL["vocab"], d], [], [T, d]])
    assert g["peer_model"] == "none" and g["bytes_per_op"] is None and g["flops_per_op"] is None
    assert g["parent_ops"][:2] == ["aten::index_select", "aten::embedding"]
    assert gather_count(trace)["bytes"] / (g["kernel_time_us_mean"] * 1e-6) <= peak
    cats = cat_counts(trace)
    for c in cats:
        r = peer(trace, "aten::cat", [c["inputs"]], ["TensorList"])
        assert r["peer_model"] == "none" and r["bytes_per_op"] is None
        assert r["launches"] == c["launches"]
        bw = c["bytes"] / (r["kernel_time_us_mean"] * 1e-6)
        assert 0.5 * peak <= bw <= peak                      # a KV-cache copy streams near the roof
    assert bool(cats) == (trace == "decode_b64_cat")
    if trace == "graph_decode_mixed":
        m = META["traces"][trace]
        cache = [m["batch"], MODEL["n_kv"], m["static_cache_len"], MODEL["hd"]]
        r = peer(trace, "aten::index_copy_", [cache, [], [1], [m["batch"], MODEL["n_kv"], 1, MODEL["hd"]]])
        assert r["peer_model"] == "none" and r["launches"] == 2 * m["n_layers"]
        assert index_copy_count(trace)["bytes"] / (r["kernel_time_us_mean"] * 1e-6) <= peak


@pytest.mark.parametrize("trace", ("decode_b64_cat", "graph_decode_mixed"))
def test_peer_times_split_k_gemm_with_its_reduce(trace):
    """A split-K GEMM's reduce kernel is launched by the same aten::mm: the peer times the pair
    as one op (busy time = GEMM + reduce), which is the logical op's time."""
    split = [r for r in PEER_ROWS[trace] if r["op"] == "aten::mm" and r["kernels_per_op"] == 2]
    assert split
    for r in split:
        names = r["kernel_names"]
        assert "splitK" in names[0] and "splitKreduce_kernel" in names[1]
        per = r["kernel_dur_us_mean_by_name"]
        # busy time is the union of the two intervals: the reduce may start a little before the
        # GEMM ends (programmatic dependent launch), so it lies between the GEMM alone and the sum
        assert per[names[0]] * 1.03 < r["kernel_time_us_mean"] <= (per[names[0]] + per[names[1]]) * (1 + 1e-6)
        assert per[names[1]] > 0.05 * per[names[0]]                   # not negligible


@pytest.mark.parametrize("trace", TRACES)
def test_peer_kernel_times_match_profiler_totals(trace):
    """The fixture's times are the trace's: per kernel name, launches x mean over the peer's rows
    equals the profiler's own total (key_averages, recorded on the device)."""
    totals = META["traces"][trace]["kineto_kernel_totals"]
    got = {}
    for r in PEER_ROWS[trace]:
        for k, us in r["kernel_dur_us_mean_by_name"].items():
            got[k] = got.get(k, 0.0) + us * r["launches"]
    kernels = [k for k in totals if not k.endswith("_step") and k != "Memset (Device)"]
    assert len(kernels) >= 15
    for k in kernels:
        assert got.get(k, 0.0) == pytest.approx(totals[k]["duration_ns"] / 1e3, rel=1e-3), k[:60]


def test_the_wrong_models_would_need_more_than_the_hbm_roof():
    """Why the count is right where a model counts more: over the measured time (the peer's, from
    the trace) these byte counts would need more bandwidth than the H200 has."""
    peak = hbm_peak_bytes_s()
    T, d = tokens("prefill_llama"), MODEL["d"]
    t = peer("prefill_llama", "aten::mean", [[T, d]])["kernel_time_us_mean"] * 1e-6
    assert 2 * n(T, d) * FP32 / t > peak                   # mean with an output as large as its input
    assert mean_count("prefill_llama")["bytes"] / t <= peak
    for trace in TRACES:                                   # embedding: the whole 32000-row table
        Tt = tokens(trace)
        t = peer(trace, "aten::gather", [[MODEL["vocab"], d], [], [Tt, d]])["kernel_time_us_mean"] * 1e-6
        assert (n(MODEL["vocab"], d) + n(Tt, d)) * BF16 / t > peak, trace
    m = META["traces"]["graph_decode_mixed"]               # index_copy_: the whole static cache
    cache = [m["batch"], MODEL["n_kv"], m["static_cache_len"], MODEL["hd"]]
    t = peer("graph_decode_mixed", "aten::index_copy_", [cache])["kernel_time_us_mean"] * 1e-6
    assert n(*cache) * BF16 / t > peak


# ============================================================================= roofline vs count
ENV = {"prefill_llama": {"isl": 4096, "osl": 1, "conc": 4},
       "decode_b64_cat": {"isl": 1024, "osl": 8, "conc": 64},
       "graph_decode_mixed": {"isl": 1024, "osl": 7, "conc": 32}}


def roofline_artifact(trace, tmp):
    """`roofline topn` + `analyze` of one real trace, every entry analysed."""
    from click.testing import CliRunner

    from roofline.api import analyze
    from roofline.commands.topn import topn

    m = META["traces"][trace]
    d = tmp / trace / "profile" / "round_1"
    d.mkdir(parents=True)
    steps = ["--prefill-steps", str(m["steps"]["prefill"])] if m["steps"]["prefill"] else \
        ["--decode-steps", str(m["steps"]["decode"])]
    res = CliRunner().invoke(topn, [str(REAL / f"{trace}.json.gz"), "-o", str(d / "profile_topN.json"),
                                    "--top", "100", "-q", *steps])
    assert res.exit_code == 0, res.output
    env = {"gpu_name": "NVIDIA H200", "gfx": "sm_90", "model_arch_class": "dense", "model_dtype": "bf16",
           "kv_cache_dtype": "bf16", "workload": ENV[trace], "framework": "torch", "tp": 1}
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": MODEL["d"],
           "intermediate_size": MODEL["d_ff"], "num_attention_heads": MODEL["n_q"],
           "num_key_value_heads": MODEL["n_kv"], "head_dim": MODEL["hd"],
           "num_hidden_layers": m["n_layers"], "vocab_size": MODEL["vocab"], "torch_dtype": "bfloat16"}
    art = analyze(d / "profile_topN.json", env=env, config=cfg, head_threshold_pct=0.0, head_cap=100)
    return art


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    pytest.importorskip("ijson")
    tmp = tmp_path_factory.mktemp("peer_roofline")
    return {t: roofline_artifact(t, tmp) for t in TRACES}


def rl(art, short, act=None, exact=False):
    hits = [e for e in art["entries"]
            if (e["short_name"] == short if exact else e["short_name"].startswith(short))
            and (act is None or (e.get("dtypes") or {}).get("act") == act)]
    assert len(hits) == 1, f"{len(hits)} roofline entries for {short} {act}"
    return hits[0]


def gemm_kernels(trace):
    """Per cuBLAS GEMM kernel name (from the peer's op -> kernel links): its shapes, launches."""
    out = {}
    for r in PEER_ROWS[trace]:
        if r["op"] != "aten::mm":
            continue
        main = [k for k in r["kernel_names"] if k != "Memset (Device)" and "splitKreduce" not in k]
        (M, K), (_, N) = r["input_dims"][:2]
        out.setdefault(main[0], []).append(((M, N, K), r["launches"]))
    return out


GEMM_CASES = [(t, k) for t in TRACES for k in gemm_kernels(t)]


def _mark_gemm(t, k):
    # issue 11 item 2 (fixed): a kernel name with several GEMM shapes is launch-weighted
    return pytest.param(t, k)


@pytest.mark.parametrize("trace,kernel", [_mark_gemm(t, k) for t, k in GEMM_CASES])
def test_roofline_gemm_work_equals_count(artifacts, trace, kernel):
    shapes = gemm_kernels(trace)[kernel]
    total = sum(L for _, L in shapes)
    flops = sum(gemm(*s)["flops"] * L for s, L in shapes) / total
    nbytes = sum(gemm(*s)["bytes"] * L for s, L in shapes) / total
    e = rl(artifacts[trace], kernel, exact=True)
    assert e["flops_est"] == pytest.approx(flops, rel=EXACT)
    assert e["bytes_est"] == pytest.approx(nbytes, rel=EXACT)
    k = META["traces"][trace]["kineto_kernel_totals"][kernel]        # the profiler's own time
    if "splitK" in kernel:
        # the split-K reduce is folded into the GEMM's time (one logical op): the rate is over the
        # pair's busy time, which the peer measures per op (test_roofline_split_k_logical_op_time...)
        rows = [r for r in PEER_ROWS[trace] if r["kernel_names"] and r["kernel_names"][0] == kernel]
        pair_s = sum(r["kernel_time_us_mean"] * r["launches"] for r in rows) / sum(r["launches"] for r in rows) / 1e6
        assert e["achieved_flops"] == pytest.approx(flops / pair_s, rel=0.02)
        assert e["achieved_flops"] < flops * k["count"] / (k["duration_ns"] * 1e-9)
    else:
        assert e["achieved_flops"] == pytest.approx(flops * k["count"] / (k["duration_ns"] * 1e-9), rel=1e-3)


@pytest.mark.parametrize("trace", TRACES)
def test_roofline_elementwise_and_copy_bytes_equal_count(artifacts, trace):
    """Unary/binary elementwise and both mixed-dtype copies: roofline's bytes are the count
    (on these traces each kernel name has one shape, so no averaging is involved)."""
    for label, op, dims, types, launches, flops, nbytes, sel in elementwise_cases(trace):
        e = rl(artifacts[trace], sel[0], sel[1], exact=len(sel) > 2)
        assert e["bytes_est"] == pytest.approx(nbytes, rel=EXACT), label


@pytest.mark.parametrize("trace", TRACES)
def test_roofline_binary_elementwise_flops_equal_count(artifacts, trace):
    for label, op, dims, types, launches, flops, nbytes, sel in elementwise_cases(trace):
        e = rl(artifacts[trace], sel[0], sel[1], exact=len(sel) > 2)
        assert e["flops_est"] == pytest.approx(flops, rel=EXACT), label


@pytest.mark.parametrize("trace", TRACES)
def test_roofline_mean_bytes_equal_count(artifacts, trace):
    e = rl(artifacts[trace], "reduce_kernel[MeanOps]")
    assert e["bytes_est"] == pytest.approx(mean_count(trace)["bytes"], rel=1e-6)


@pytest.mark.parametrize("trace", TRACES)
def test_roofline_gather_bytes_equal_count(artifacts, trace):
    e = rl(artifacts[trace], "vectorized_gather_kernel")
    # rel 1e-3: the 8-byte ids are 0.05% of the bytes; a model without them still reads right
    assert e["bytes_est"] == pytest.approx(gather_count(trace)["bytes"], rel=1e-3)


def test_roofline_cat_bytes_equal_count(artifacts):
    cats = cat_counts("decode_b64_cat")
    per_launch = sum(c["bytes"] * c["launches"] for c in cats) / sum(c["launches"] for c in cats)
    e = rl(artifacts["decode_b64_cat"], "CatArrayBatchedCopy")
    assert e["bytes_est"] == pytest.approx(per_launch, rel=1e-6)


def test_roofline_index_copy_bytes_equal_count(artifacts):
    e = rl(artifacts["graph_decode_mixed"], "index_elementwise_kernel")
    assert e["bytes_est"] == pytest.approx(index_copy_count("graph_decode_mixed")["bytes"], rel=1e-3)


@pytest.mark.parametrize("trace", TRACES)
def test_roofline_scalar_operand_is_not_memory(artifacts, trace):
    e = rl(artifacts[trace], "vectorized_elementwise_kernel[CUDAFunctorOnSelf_add")
    c = eps_add_count(trace)
    assert (e["bytes_est"], e["flops_est"]) == (pytest.approx(c["bytes"], rel=EXACT), pytest.approx(c["flops"], rel=EXACT))


def split_k_cases():
    out = []
    for t in ("decode_b64_cat", "graph_decode_mixed"):
        for r in PEER_ROWS[t]:
            if r["op"] == "aten::mm" and r["kernels_per_op"] == 2:
                out.append((t, r["kernel_names"][0]))
    return out


@pytest.mark.parametrize("trace,kernel", split_k_cases())
def test_roofline_split_k_logical_op_time_includes_reduce(artifacts, trace, kernel):
    rows = [r for r in PEER_ROWS[trace] if r["kernel_names"] and r["kernel_names"][0] == kernel]
    n_ops = sum(r["launches"] for r in rows)
    gemm_us = sum(r["kernel_dur_us_mean_by_name"][kernel] * r["launches"] for r in rows) / n_ops
    pair_us = sum(r["kernel_time_us_mean"] * r["launches"] for r in rows) / n_ops   # busy time of the pair
    assert pair_us > 1.03 * gemm_us
    e = rl(artifacts[trace], kernel, exact=True)
    # roofline folds the reduce into its GEMM (topn: folded_kernels): one launch of the entry is
    # the pair, so per-launch and per-logical-op time both equal the pair's busy time
    assert e["t_logical_op_ms"] == e["t_ms"]
    assert e["t_ms"] * 1e3 == pytest.approx(pair_us, rel=0.02)


@pytest.mark.parametrize("trace", ("decode_b64_cat", "graph_decode_mixed"))
def test_roofline_split_k_reduce_is_not_a_suspect_row_of_its_own(artifacts, trace):
    rows = [e for e in artifacts[trace]["entries"] if e["short_name"].startswith("splitKreduce")]
    assert not [e for e in rows if e.get("suspect")]


@pytest.mark.parametrize("trace", TRACES)
def test_roofline_attention_work(artifacts, trace):
    """FLOPs equal the count. Bytes: prefill equals the count; decode counts K and V only (a
    documented approximation in roofline/core/models/attention.py), short of the count by exactly the
    Q read and the O write (0.4%)."""
    m, hq, hkv, d = META["traces"][trace], MODEL["n_q"], MODEL["n_kv"], MODEL["hd"]
    e = rl(artifacts[trace], "cudnn_generated_fort_native_sdpa")
    if trace == "prefill_llama":
        a = m["attn_shapes"][0]
        c = attention(a["batch"], hq, hkv, a["q_len"], a["seq_len"], d, a["causal"])
        assert (e["flops_est"], e["bytes_est"]) == (pytest.approx(c["flops"], rel=EXACT),
                                                     pytest.approx(c["bytes"], rel=EXACT))
        return
    lens = (list(range(m["context_len_first"], m["context_len_last"] + 1)) if "context_len_first" in m
            else [m["static_cache_len"]])
    cs = [attention(m["batch"], hq, hkv, 1, s, d, False) for s in lens]
    flops = sum(c["flops"] for c in cs) / len(cs)
    nbytes = sum(c["bytes"] for c in cs) / len(cs)
    q_and_o = 2 * m["batch"] * hq * d * BF16
    assert e["flops_est"] == pytest.approx(flops, rel=EXACT)
    assert e["bytes_est"] == pytest.approx(nbytes - q_and_o, rel=EXACT)
    assert q_and_o / nbytes < 0.005


# ============================================================================= rejects
def test_peer_lookup_rejects_a_shape_the_trace_does_not_have():
    with pytest.raises(AssertionError, match="0 peer rows"):
        peer("prefill_llama", "aten::mm", [[16384, 4096], [4096, 4097]])


def test_script_rejects_a_missing_trace_in_one_line(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peer_tracelens.py"), "--traces", "no_such",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert not (tmp_path / "out").exists()
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("peer_tracelens: ")
    assert "Traceback" not in r.stderr


def test_fixture_rows_are_unique_groups():
    for t in TRACES:
        keys = [(r["op"], json.dumps(r["input_dims"]), json.dumps(r["input_types"]),
                 json.dumps(r["concrete_inputs"]), tuple(r["kernel_names"])) for r in PEER_ROWS[t]]
        assert len(keys) == len(set(keys)), t

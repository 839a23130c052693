"""CPU-only: the launchers of levels 12-13 size the ping-pong builds by one consumer's unit tile.

A ping-pong build's registry tile_mnk is one consumer's unit (UM x UN x KE; the CPU build test
static_asserts it against ws.cuh's Cfg). Here gpu_moe_fp8.launch_fp8 / launch_grouped run against fake
CuPy / driver objects that record the tensor-map boxes and the grid, and the grid is checked
against the kernel's own work walk (ws.cuh WsWork: units u = cid + i * #clusters) recomputed here:
every unit owned by exactly one cluster, no cluster idle, and the fewest rounds the SMs allow."""
from types import SimpleNamespace

import pytest

from roofline.ladder import gpu, gpu_moe_fp8
from roofline.ladder.registry import VARIANTS, get_level

SMS = 132


class _Arr:
    def __init__(self, shape, ptr=4096):
        self.shape = tuple(shape)
        self.data = SimpleNamespace(ptr=ptr)
        self.dtype = "u8"
        self.size = 1
        for d in shape:
            self.size *= d

    def __setitem__(self, key, value):   # gpu_moe_fp8._pad_last copies into a zeroed buffer
        pass


class _Kern:
    def __init__(self):
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


@pytest.fixture
def fake(monkeypatch):
    rec = SimpleNamespace(maps=[], strides=[], kern=_Kern())
    cp = SimpleNamespace(int32=int, float32="f32", uint16="u16",
                         zeros=lambda n, dtype=None: _Arr(n if isinstance(n, tuple) else (n,), ptr=8192))
    monkeypatch.setattr(gpu, "cupy", lambda: cp)
    monkeypatch.setattr(gpu, "sm_count", lambda: SMS)
    monkeypatch.setattr(gpu, "max_active_clusters", lambda level, kern: None)
    monkeypatch.setattr(gpu, "_ws_buffers", lambda nf, nc: ("ws", "cnt"))
    monkeypatch.setattr(gpu, "tensor_map", lambda ptr, rows, cols, stride, box_rows, box_cols=64: ("C", box_rows))
    monkeypatch.setattr(gpu_moe_fp8, "get_kernel", lambda level: rec.kern)
    monkeypatch.setattr(gpu_moe_fp8, "_NULL", _Arr((4,)))

    def nd(ptr, eb, dims, strides, box):
        rec.maps.append((eb, dims, box))
        rec.strides.append((ptr, strides))
        return ("map", dims, box)
    monkeypatch.setattr(gpu_moe_fp8, "tensor_map_nd", nd)
    return rec


def _walk(units: int, clusters: int) -> list[int]:
    """Units per cluster in ws.cuh's walk u = cid + i * clusters."""
    return [len(range(cid, units, clusters)) for cid in range(clusters)]


@pytest.mark.parametrize("name,um,un", [("l13_pingpong", 128, 128), ("l13_pingpong_wide", 64, 256)])
def test_fp8_pingpong_grid_and_boxes(fake, name, um, un):
    lv = VARIANTS[name]
    m = n = k = 8192
    gpu_moe_fp8.launch_fp8(lv, _Arr((m, k)), _Arr((n, k)), _Arr((m,)), _Arr((n,)), _Arr((m, n)), m, n, k)
    (grid, block, args, smem), = fake.kern.calls
    (eb_a, _, box_a), (eb_b, _, box_b) = fake.maps
    # A box: one consumer's unit rows x 128 bytes; B box: the unit's columns split over the cluster
    assert (eb_a, box_a) == (1, (128, um)) and (eb_b, box_b) == (1, (128, un // lv.cluster))
    assert block == (lv.threads, 1, 1) and smem == lv.dyn_smem_bytes
    units = ((m // um + lv.cluster - 1) // lv.cluster) * (n // un)   # cluster tiles of 2 units
    clusters = grid[0] // lv.cluster
    per = _walk(units, clusters)
    assert grid[0] % lv.cluster == 0 and sum(per) == units and min(per) > 0
    slots = SMS // lv.cluster
    assert max(per) == -(-units // slots)   # balanced: as few rounds as on every SM
    assert args[4:7] == (m, n, k)


@pytest.mark.parametrize("name,um,un", [("l12_pingpong", 64, 256), ("l12_pingpong_m128", 128, 128), ("12", 128, 256)])
def test_grouped_grid_bound_counts_unit_rows(fake, name, um, un):
    lv = get_level(12) if name == "12" else VARIANTS[name]
    # 8 experts with uneven rows (0, 1, and expert tails that cross a 64-row slab); small enough
    # that the grid is the bound, not #SMs
    counts = [0, 1, 70, 130, 255, 257, 64, 0]
    E, N, K, R = len(counts), 512, 768, sum(counts)
    offs = _Arr((E,))
    gpu_moe_fp8.launch_grouped(lv, _Arr((R, K)), _Arr((E, N, K)), offs, _Arr((R, N)), E, N, K)
    (grid, _, args, smem), = fake.kern.calls
    (_, _, box_a), (_, dims_b, box_b) = fake.maps
    assert box_a == (64, um) and box_b == (64, un) and dims_b == (K, E * N)
    # the kernel's list: ceil(m_e / UM) m-tiles x ceil(N / UN) column blocks per expert (grouped.cuh)
    units = sum(-(-c // um) * -(-N // un) for c in counts)
    bound = (-(-R // um) + E) * -(-N // un)
    assert bound < SMS and grid[0] == bound
    assert grid[0] >= units   # every unit of UM rows has its CTA (a bound counted in 128-row tiles would not)
    assert args[-2] is offs and args[-1] == E and smem == lv.dyn_smem_bytes


# the kernel's grouped list for a ws build (grouped.cuh build_plan with RG = the unit height UM)
def _units(counts, um, un, N):
    return sum(-(-c // um) * -(-N // un) for c in counts)


@pytest.mark.parametrize("counts,N,K", [
    ([0, 1, 70, 130, 255, 257, 64, 0], 512, 768),   # small: the grid is the bound, not #SMs
    ("qwen3-decode64", 1536, 2048),                    # E 128, top-8, 64 tokens: #SMs CTAs
    ([3, 0, 61], 200, 1000),                          # K % 16 != 0: fp8 rows padded to 1008 bytes
])
def test_grouped_fp8_pingpong_maps_scales_and_grid(fake, counts, N, K):
    """l12_fp8_pingpong goes to the ws engine (not level 11's swap-AB launch): uint8 maps with
    128-byte inner boxes of the unit's 64 rows (A) and 256 weight rows (B, 2-D over E*N), the
    scales sa [R] / sw [E, N] in the kernel's WsX slots, K tiles of 128, and a grid bound that
    counts 64-row units."""
    from roofline.ladder.routing import topk_counts
    lv = VARIANTS["l12_fp8_pingpong"]
    assert (lv.contract, lv.kind, lv.tile_mnk) == ("grouped-fp8", "ws", (64, 256, 128))
    if counts == "qwen3-decode64":
        counts = topk_counts(64, 128, 8, seed=0)
    E, R = len(counts), sum(counts)
    a, w, offs, c = _Arr((R, K)), _Arr((E, N, K)), _Arr((E,)), _Arr((R, N))
    sa, sw = _Arr((R,)), _Arr((E, N))
    gpu_moe_fp8.launch_grouped(lv, a, w, offs, c, E, N, K, "enk", sa, sw)
    (grid, block, args, smem), = fake.kern.calls
    (eb_a, dims_a, box_a), (eb_b, dims_b, box_b) = fake.maps
    kp = -(-K // 16) * 16   # TMA row stride: 16-byte multiple of one-byte elements
    assert (eb_a, eb_b) == (1, 1)
    assert box_a == (128, 64) and box_b == (128, 256)
    assert dims_a == (K, R) and dims_b == (K, E * N)
    # rows of kp bytes; padded operands are fresh zeroed buffers (ptr 8192), others the caller's (4096)
    assert fake.strides == [(8192 if kp != K else 4096, (kp,))] * 2
    # kernel arguments (LADDER_WS_KERNEL_X): ..., M, N, K, c_tma, ws, cnt, S, ks, sa, sb, offs, E
    assert args[4:8] == (R, N, K, int(N % 8 == 0))
    assert args[10:12] == (1, -(-K // 128))
    assert args[12] is sa and args[13] is sw and args[14] is offs and args[15] == E
    assert block == (lv.threads, 1, 1) and smem == lv.dyn_smem_bytes
    bound = (-(-R // 64) + E) * -(-N // 256)
    assert grid[0] == min(SMS, bound)
    assert bound >= _units(counts, 64, 256, N)   # every 64-row unit has room (128-row counting would not)


def test_grouped_fp8_pingpong_refuses_missing_or_short_scales(fake):
    lv = VARIANTS["l12_fp8_pingpong"]
    counts = [3, 0, 61]
    E, R, N, K = 3, 64, 256, 256
    ops = (_Arr((R, K)), _Arr((E, N, K)), _Arr((E,)), _Arr((R, N)))
    for sa, sw in ((None, None), (_Arr((R,)), None), (_Arr((R - 1,)), _Arr((E, N))), (_Arr((R,)), _Arr((N,)))):
        with pytest.raises(ValueError, match="scales"):
            gpu_moe_fp8.launch_grouped(lv, *ops, E, N, K, "enk", sa, sw)
    assert not fake.kern.calls and sum(counts) == R


def test_grouped_fp8_pingpong_reaches_check_sanitize_and_the_decode_bench(monkeypatch):
    """The one device driver runs every grouped-fp8 target: the check's grouped cases (prefill-sized
    edge routings: it is a ws build), sanitize's grouped cases, and bench-moe's fp8 rows on every
    decode case beside level 11's fp8 build; the round-3 target set names it."""
    from roofline.ladder import bench, bench_moe_fp8, check, device_suite
    from roofline.ladder.target_sets import TARGET_SETS
    from roofline.ladder.routing import edge_routings

    name = "l12_fp8_pingpong"
    assert name in device_suite.all_targets() and name in device_suite.default_targets(("grouped-fp8",))
    assert TARGET_SETS["x-round3"] == ("l12_fp8_pingpong", "l11_fp8_tn32", "l12_pingpong")
    lv = VARIANTS[name]
    cases = check.grouped_cases(lv, 3, 0)
    assert [c[0] for c in cases[:4 * len(edge_routings(big=True)):4]] == [r for _, r in edge_routings(big=True)]
    seen = []
    monkeypatch.setattr(check, "check_grouped", lambda lv, *a, **k: seen.append(lv.name) or SimpleNamespace(
        ok=True, case="c"))
    assert device_suite.do_sanitize([name]) and seen == [lv.name, lv.name]
    calls = []
    monkeypatch.setattr(bench, "Timer", lambda: None)
    monkeypatch.setattr(bench_moe_fp8, "ceilings", lambda timer: {})
    monkeypatch.setattr(bench_moe_fp8, "meta", lambda what: {})
    monkeypatch.setattr(bench_moe_fp8, "render", lambda res: "")
    monkeypatch.setattr(bench_moe_fp8, "grouped_case", lambda timer, case, lvs, ceil, layout="enk", fp8=False, min_reps=50:
                        calls.append((case, [x.name for x in lvs], fp8)) or [])
    assert device_suite.do_bench("bench-moe", list(TARGET_SETS["x-round3"]), "decode", "moe_decode", None, 50)
    fp8_rows = {case: names for case, names, fp8 in calls if fp8}
    assert set(fp8_rows) == set(bench_moe_fp8.DECODE_CASES)
    assert all(names == ["grouped_fp8_pingpong", "grouped_decode_fp8_tn32"] for names in fp8_rows.values())
    assert {tuple(n) for _, n, fp8 in calls if not fp8} == {("grouped_prefill_pingpong",)}


def test_the_driver_reads_check_sanitize_and_bench_from_the_contract_record(monkeypatch):
    """device_suite names no contract's functions: a record pointing elsewhere changes what runs."""
    import dataclasses

    from roofline.ladder import check, device_suite
    from roofline.ladder.contracts import CONTRACTS

    seen = []
    monkeypatch.setattr(check, "sanitize_fp8", lambda lv: seen.append(("sanitize", lv.name)) or [])
    monkeypatch.setattr(check, "check_fp8_level", lambda lv, seed=0, **kw: seen.append(("check", lv.name, kw)) or [])
    rec = CONTRACTS["grouped-fp8"]
    monkeypatch.setitem(CONTRACTS, "grouped-fp8", dataclasses.replace(rec, sanitize=check.sanitize_fp8,
                                                                       check=check.check_fp8_level))
    assert device_suite.do_sanitize(["l12_fp8_pingpong"]) and seen == [("sanitize", "grouped_fp8_pingpong")]

    class _Q:
        def put(self, rec):
            seen.append(rec["target"])
    device_suite._check_child("l12_fp8_pingpong", 3, _Q())
    assert seen[1:] == [("check", "grouped_fp8_pingpong", {"n_random": 3}), "l12_fp8_pingpong"]
    monkeypatch.setattr(check, "sanitize_fp8", lambda *a, **k: seen.append("bench") or {"meta": {}, "rows": []})
    monkeypatch.setitem(CONTRACTS, "gemm-fp8", dataclasses.replace(
        CONTRACTS["gemm-fp8"], bench=check.sanitize_fp8, report=check.sanitize_fp8))
    assert device_suite.do_bench("bench-fp8", ["13"], "all", "x", None, 50) and seen[-2:] == ["bench", "bench"]

"""CPU-only: the launchers of levels 12-13 size the ping-pong builds by one consumer's unit tile.

A ping-pong build's registry tile_mnk is one consumer's unit (UM x UN x KE; the CPU build test
static_asserts it against ws.cuh's Cfg). Here gpu_x.launch_fp8 / launch_grouped run against fake
CuPy / driver objects that record the tensor-map boxes and the grid, and the grid is checked
against the kernel's own work walk (ws.cuh WsWork: units u = cid + i * #clusters) recomputed here:
every unit owned by exactly one cluster, no cluster idle, and the fewest rounds the SMs allow."""
from types import SimpleNamespace

import pytest

from roofline.ladder import gpu, gpu_x
from roofline.ladder.registry import VARIANTS, get_level

SMS = 132


class _Arr:
    def __init__(self, shape, ptr=4096):
        self.shape = tuple(shape)
        self.data = SimpleNamespace(ptr=ptr)
        self.size = 1
        for d in shape:
            self.size *= d


class _Kern:
    def __init__(self):
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


@pytest.fixture
def fake(monkeypatch):
    rec = SimpleNamespace(maps=[], kern=_Kern())
    cp = SimpleNamespace(int32=int, float32="f32", uint16="u16", zeros=lambda n, dtype=None: _Arr((n,)))
    monkeypatch.setattr(gpu, "cupy", lambda: cp)
    monkeypatch.setattr(gpu, "sm_count", lambda: SMS)
    monkeypatch.setattr(gpu, "max_active_clusters", lambda level, kern: None)
    monkeypatch.setattr(gpu, "_ws_buffers", lambda nf, nc: ("ws", "cnt"))
    monkeypatch.setattr(gpu, "tensor_map", lambda ptr, rows, cols, stride, box_rows, box_cols=64: ("C", box_rows))
    monkeypatch.setattr(gpu_x, "get_kernel", lambda level: rec.kern)
    monkeypatch.setattr(gpu_x, "_NULL", _Arr((4,)))

    def nd(ptr, eb, dims, strides, box):
        rec.maps.append((eb, dims, box))
        return ("map", dims, box)
    monkeypatch.setattr(gpu_x, "tensor_map_nd", nd)
    return rec


def _walk(units: int, clusters: int) -> list[int]:
    """Units per cluster in ws.cuh's walk u = cid + i * clusters."""
    return [len(range(cid, units, clusters)) for cid in range(clusters)]


@pytest.mark.parametrize("name,um,un", [("l13_pingpong", 128, 128), ("l13_pingpong_wide", 64, 256)])
def test_fp8_pingpong_grid_and_boxes(fake, name, um, un):
    lv = VARIANTS[name]
    m = n = k = 8192
    gpu_x.launch_fp8(lv, _Arr((m, k)), _Arr((n, k)), _Arr((m,)), _Arr((n,)), _Arr((m, n)), m, n, k)
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
    gpu_x.launch_grouped(lv, _Arr((R, K)), _Arr((E, N, K)), offs, _Arr((R, N)), E, N, K)
    (grid, _, args, smem), = fake.kern.calls
    (_, _, box_a), (_, dims_b, box_b) = fake.maps
    assert box_a == (64, um) and box_b == (64, un) and dims_b == (K, E * N)
    # the kernel's list: ceil(m_e / UM) m-tiles x ceil(N / UN) column blocks per expert (grouped.cuh)
    units = sum(-(-c // um) * -(-N // un) for c in counts)
    bound = (-(-R // um) + E) * -(-N // un)
    assert bound < SMS and grid[0] == bound
    assert grid[0] >= units   # every unit of UM rows has its CTA (a bound counted in 128-row tiles would not)
    assert args[-2] is offs and args[-1] == E and smem == lv.dyn_smem_bytes

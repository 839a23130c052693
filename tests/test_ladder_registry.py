"""CPU-only: the level registry, the sources it names, shape domains, bf16 conversions, CLI."""
import numpy as np
import pytest
from click.testing import CliRunner

from roofline.ladder import check
from roofline.ladder.build import level_source
from roofline.ladder.gpu import bf16_bits_to_f32, f32_to_bf16_bits
from roofline.ladder.registry import KERNEL_DIR, LEVELS, VARIANTS, WRONG, get_level, render_markdown_table


def test_levels_are_numbered_and_files_exist():
    assert [lv.id for lv in LEVELS] == list(range(1, len(LEVELS) + 1))
    for lv in list(LEVELS) + list(WRONG.values()) + list(VARIANTS.values()):
        assert lv.path.is_file()
        assert lv.path.parent == KERNEL_DIR
        assert lv.file.startswith(f"l{lv.id % 100:02d}_")
        src = level_source(lv)
        assert f'extern "C" __global__' in src and lv.kernel in src
        assert "#include" not in src  # common.cuh inlined: NVRTC needs no include path


def test_every_level_has_notes():
    notes = KERNEL_DIR.parent.parent / "notes"
    for lv in LEVELS:
        assert (notes / f"l{lv.id:02d}.md").is_file()


def test_domains():
    l1, l2, l3 = (get_level(i) for i in (1, 2, 3))
    assert l1.supports(128, 128, 64) and not l1.supports(128, 128, 65) and not l1.supports(129, 1, 1)
    assert l2.supports(128, 128, 10000) and not l2.supports(129, 128, 64)
    assert l3.supports(8192, 28672, 4096) and l3.supports(1, 1, 1)
    assert not l3.supports(0, 1, 1)
    assert l3.grid(129, 257) == (3, 2, 1) and l1.grid(100, 100) == (1, 1, 1)
    with pytest.raises(KeyError):
        get_level(99)


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: f"L{lv.id}")
def test_check_shapes_stay_in_domain(level):
    shapes = check.edge_shapes(level) + check.random_shapes(level, 200, seed=1)
    assert len(shapes) >= 200
    assert all(level.supports(*s) for s in shapes)
    ks = [s[2] for s in shapes]
    assert 1 in ks and any(k < 64 for k in ks)
    if level.max_k is None:
        assert any(k % 64 for k in ks if k > 64)  # K tails
    if level.max_m is None:
        assert any(m % 128 for m, _, _ in shapes if m > 128)


def test_new_levels_kinds_and_grids():
    l4, l5, l6 = (get_level(i) for i in (4, 5, 6))
    assert (l4.kind, l5.kind, l6.kind) == ("tma", "tma", "persistent")
    assert l4.tile_mnk == (128, 128, 64) and l5.tile_mnk == l6.tile_mnk == (128, 256, 64)
    assert l5.grid(129, 257) == (2, 2, 1)
    assert l6.grid(8192, 8192) == (64 * 32, 1, 1)  # #tiles; gpu.launch caps it at #SMs
    for lv in (l4, l5, l6):
        assert lv.supports(1, 1, 1) and lv.supports(8192, 28672, 4096)


def test_shape_sets():
    from roofline.ladder.bench import FORMER_NAMES, SHAPE_SETS
    s6 = set(SHAPE_SETS[FORMER_NAMES["issue6"]])
    want = {(4096, 4096, 4096), (8192, 8192, 8192), (64, 4096, 4096), (64, 28672, 4096)}
    want |= {(m, n, k) for m in (2048, 8192) for n, k in ((4096, 4096), (28672, 4096), (4096, 14336))}
    assert want <= s6
    assert set(SHAPE_SETS["default"]) <= s6


def test_persistent_check_shapes_cross_tiles():
    l6 = get_level(6)
    shapes = check.edge_shapes(l6) + check.random_shapes(l6, 200, seed=6)
    many = [s for s in shapes if ((s[0] + 127) // 128) * ((s[1] + 255) // 256) > 132]
    assert len(many) >= 30  # CTAs that walk several tiles
    assert any(k % 8 for _, _, k in many) and any(n % 8 for _, n, _ in many)


def test_bf16_round_trip_numpy():
    x = np.array([1.0, -2.5, 3.14159, 1e-3, np.inf, -np.inf, np.nan, 65504.0, 1.0 + 2 ** -8], np.float32)
    b = f32_to_bf16_bits(x, np)
    assert b.dtype == np.uint16
    y = bf16_bits_to_f32(b, np)
    assert y[0] == 1.0 and y[1] == -2.5 and y[4] == np.inf and y[5] == -np.inf and np.isnan(y[6])
    assert abs(y[2] - 3.140625) < 1e-6
    assert y[8] == 1.0  # tie rounds to even
    assert np.all(np.abs(y[:4] - x[:4]) <= 2 ** -8 * np.abs(x[:4]))


def test_readme_table_from_registry():
    t = render_markdown_table()
    for lv in LEVELS:
        assert lv.file in t
    readme = (KERNEL_DIR.parent.parent / "README.md").read_text()
    assert t in readme, "ladder/README.md level table is stale: paste `roofline ladder list --markdown`"


def test_cli_list_and_bad_shape():
    from roofline.ladder.cli import ladder
    r = CliRunner().invoke(ladder, ["list"])
    assert r.exit_code == 0 and all(lv.file in r.output for lv in LEVELS)
    r = CliRunner().invoke(ladder, ["run", "--level", "1", "--shape", "4096x4096"])
    assert r.exit_code != 0
    r = CliRunner().invoke(ladder, ["run", "--level", "1", "--shape", "4096x4096x4096"])
    assert r.exit_code != 0 and "supports" in r.output


def test_roofline_bound():
    from roofline.ladder.bench import gemm_min_bytes, roofline_bound_ms
    assert gemm_min_bytes(64, 4096, 4096) == 2 * (64 * 4096 + 4096 * 4096 + 64 * 4096)
    # 8192^3 at 1 PFLOP/s and 1 TB/s: compute term 1.0995 ms > bytes term 0.4027 ms
    assert roofline_bound_ms(8192, 8192, 8192, 1e15, 1e12) == pytest.approx(1e3 * 2 * 8192 ** 3 / 1e15)


def test_shape_sets_are_named_by_what_they_are_and_former_names_map_onto_them():
    from roofline.ladder import bench
    from roofline.ladder.bench import FORMER_NAMES, SHAPE_SETS
    assert not [n for n in SHAPE_SETS if "issue" in n]
    assert set(FORMER_NAMES.values()) <= set(SHAPE_SETS)
    # the decode set is decode batches (M = tokens in flight <= 256), the prefill set long prompts
    from roofline.ladder.dispatch import shape_class
    assert max(s[0] for s in SHAPE_SETS["serving-decode"]) <= 256
    assert {shape_class(*s) for s in SHAPE_SETS["serving-prefill"]} == {"prefill"}
    # the two ragged shapes: 3000x5000x1000 is ragged, 777x1531x263 mid (fewer than two waves of tiles)
    assert set(SHAPE_SETS["serving"]) == set(SHAPE_SETS["serving-prefill"]) | set(SHAPE_SETS["serving-decode"]) | {
        s for s in SHAPE_SETS["serving"] if shape_class(*s) in ("ragged", "mid")}
    assert {shape_class(*s) for s in bench.RAGGED} == {"ragged", "mid"}
    assert {shape_class(*s) for s in bench.MID if s[0] > 256} == {"mid"}


def test_named_target_sets_name_registry_builds_only():
    from roofline.ladder.registry import get_level
    from roofline.ladder.target_sets import TARGET_SETS

    for name, targets in TARGET_SETS.items():
        assert targets and len(set(targets)) == len(targets), name
        for t in targets:
            get_level(t)   # raises KeyError for a build the registry does not have


def test_one_contract_record_per_contract_names_callables_and_shipped_tables():
    """Each contract is one record (operands, launcher, library op, check, bench, dispatch table); every
    function it names resolves, every level solves a recorded contract, and the dispatch and re-run
    read their table files and library names from the records."""
    from importlib import resources

    from roofline.ladder import device_suite, dispatch
    from roofline.ladder.contracts import CONTRACTS, contract_fn
    from roofline.ladder.registry import VARIANTS
    from roofline.stagec import timing

    assert {lv.contract for lv in (*LEVELS, *VARIANTS.values())} == set(CONTRACTS)
    for name, c in CONTRACTS.items():
        assert c.name == name
        for role in ("launcher", "library_fn", "check", "sanitize", "bench", "report"):
            assert callable(contract_fn(name, role)), (name, role)
        assert resources.files("roofline").joinpath("data", c.dispatch_table).is_file()
        assert c.table_builder.startswith("--build-") and c.command in device_suite.SUBCOMMANDS
        # the driver's bench subcommand for the record runs the record's bench over the record's builds
        assert name in device_suite.SUBCOMMANDS[c.command][0]
    assert dispatch.TABLE_FILES == {n: c.dispatch_table for n, c in CONTRACTS.items()}
    assert timing.LIBRARY == {n: c.library for n, c in CONTRACTS.items()}
    assert contract_fn("grouped-fp8", "library_fn").__name__ == "torch_scaled_grouped"


def test_the_levels_read_top_to_bottom():
    """Levels 7-15: each file opens with "// Level N:" and a header that names a level below it (what
    it adds to it); every tile-engine level declares its build as named ws.cuh WsBuild fields
    (`struct LN... : ladder::WsBuild`, instantiated by LADDER_WS_LEVEL / LADDER_WS_LEVEL_X), never
    the positional LADDER_WS_KERNEL line; level 11 (its own kernel) names its build switches."""
    import re

    for lv in (lv for lv in LEVELS if lv.id >= 7):
        src = (KERNEL_DIR / lv.file).read_text()
        header = src[:src.index("#include")]
        assert header.startswith(f"// Level {lv.id}:"), lv.file
        below = {int(x) for x in re.findall(r"[Ll]evels? (\d+)", header)} | {
            int(b) for a, b in re.findall(r"[Ll]evels (\d+)-(\d+)", header)}
        assert any(b < lv.id for b in below), (lv.file, "names no level below it")
        if lv.kind == "ws":
            struct = re.search(rf"struct L{lv.id}(Base)? : ladder::WsBuild\b", src)
            assert struct and re.search(rf"LADDER_WS_LEVEL(_X)?\(gemm_l{lv.id:02d}, L{lv.id}\)", src), lv.file
            assert "LADDER_WS_KERNEL" not in src, lv.file
        else:
            assert lv.id == 11 and all(f"L11_{s}" in header for s in ("TN", "CH", "D", "WKN", "FP8")), lv.file

"""Named sets of ladder targets a device call runs (`device_moe_fp8 levels --set NAME`, `device_suite
levels --set NAME`): the device scripts under tools/device/ read them here and never list builds
themselves (tests/test_single_source.py). Every name is a level id or a registry VARIANTS key
(tests/test_ladder_registry.py resolves them all)."""
from __future__ import annotations

TARGET_SETS: dict[str, tuple[str, ...]] = {
    # the grouped / fp8 builds that changed or are new in the second round (notes/l11.md .. l14.md)
    "x-round2": ("11", "l11_tn16", "l11_wkn", "l11_fp8", "l11_fp8_tn32", "12", "l12_pingpong", "l12_pingpong_m128",
                 "13", "l13_pingpong", "l13_pingpong_wide", "14"),
    # the round-2 builds whose racecheck did not finish inside its time limit (start4_round2/racecheck.log)
    "racecheck-round3": ("l12_pingpong_m128", "13", "l13_pingpong", "l13_pingpong_wide", "14"),
    # the fp8 grouped ping-pong build beside level 11's fp8 build and its bf16 twin (notes/l12.md)
    "x-round3": ("l12_fp8_pingpong", "l11_fp8_tn32", "l12_pingpong"),
    # the dense builds beside cuBLAS on the mid shapes (notes/mid.md)
    "mid": ("9", "10", "l09_n192", "l09_n192_cl2", "l09_n192_sk", "l09_m128", "l09_m128_cl2", "l09_mid",
            "l09_nocluster", "l10_m128"),
    # mid round 3 (notes/mid.md): the 128x96 builds, the recalibrated picker, the round-2 best builds
    "mid-round3": ("l09_n96", "l09_n96_cl2", "l09_mid", "9", "10", "l09_m128_cl2", "l09_nocluster"),
    # builds not yet under compute-sanitizer: the round-2 mid builds l09_mid can dispatch to, and two
    # round-1 variants (sanitizer runs of the fourth machine start)
    "san-round4-dense": ("l09_n192", "l09_n192_cl2", "l09_n192_sk", "l09_m128"),
    "san-round4-x": ("l12_m128n128", "l13_nocluster"),
    # the fp8 grouped prefill level and its builds, beside level 12's fp8 ping-pong build (notes/l15.md)
    "x-round5": ("15", "l15_pp_m128", "l15_m128n128", "l12_fp8_pingpong"),
    # the coverage cases (bench_moe_fp8.COVER_CASES): what the grouped tables dispatch, bf16 and fp8
    # (the builds the grouped tables dispatch: bf16 decode / prefill, fp8 decode / prefill)
    "cover-round5": ("12", "l12_pingpong", "l11_fp8_tn32", "l15_pp_m128"),
    # round 6 (notes/l13.md, l15.md): level 13 beside its per-warp-epilogue and cluster stream-K builds
    "x-round6-fp8": ("13", "l13_wepi", "l13_sk", "l13_sk_wepi"),
    # level 15's best build beside its per-warp-epilogue twins (the plan now holds 512 experts)
    "x-round6-moe": ("l15_pp_m128", "l15_pp_m128_wepi", "l15_wepi"),
    # the grouped tile-engine builds whose plan changed (uint16 m-tile prefix, 512 experts): checked again
    "x-round6-plan": ("15", "12", "l12_pingpong", "l12_pingpong_m128", "l12_m128n128", "l12_fp8_pingpong", "l15_m128n128"),
    # Qwen3-Next fp8 prefill (E 512): level 15's best build and its twin beside what the table dispatched in round 5
    "x-round6-e512": ("l15_pp_m128", "l15_pp_m128_wepi", "l11_fp8_tn32"),
    # the plan builds the first round-6 call did not reach (its check stopped at its time limit)
    "x-round6-recheck": ("l12_fp8_pingpong", "l15_m128n128"),
    # the 512-expert check (round6_extra.py check-e512): level 15's builds and level 12 (bf16) on the new plan
    "x-round6-e512-check": ("l15_pp_m128", "l15_pp_m128_wepi", "15", "12"),
    # round 7 (notes/l13.md, l15.md): the builds with the column scales staged in shared memory (new: checked,
    # sanitized, timed), and what each is timed beside: level 13 / l15_pp_m128 and their round-6 per-warp twins
    "x-round7-new": ("l13_ssc", "l15_pp_m128_ssc"),
    "x-round7-fp8": ("13", "l13_wepi", "l13_ssc"),
    "x-round7-moe": ("l15_pp_m128", "l15_pp_m128_wepi", "l15_pp_m128_ssc"),
    # what round 7 left for the next device call: the staged-scale grouped build's full check (its 50 s cap ended it)
    # and the paired-unit tile order (built, never run): checked, sanitized, then timed beside l15_pp_m128
    "x-round7-next": ("l15_pp_m128_pairs", "l15_pp_m128_ssc"),
    "x-round7-next-moe": ("l15_pp_m128", "l15_pp_m128_pairs", "l15_pp_m128_ssc"),
    # round 8 (tools/device/call_round8.sh): the held-out-like cases, every build a table can dispatch there
    "x-round8-decode": ("11", "l11_fp8_tn32", "l11_fp8", "12", "l12_pingpong", "l12_pingpong_m128", "l12_fp8_pingpong",
                        "l15_pp_m128"),
    "x-round8-prefill": ("12", "l12_pingpong", "l12_pingpong_m128", "15", "l15_pp_m128", "l15_m128n128", "l12_fp8_pingpong"),
    "x-round8-fp8": ("13", "14", "l13_pingpong", "l13_pingpong_wide", "l13_ssc"),
}

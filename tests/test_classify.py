"""Kernel name -> op class and short name: real names from the H200 fixtures, plus library names."""
import json
import os

import pytest

from roofline.core.classify import OP_CLASSES, RULES, classify, is_library_kernel, short_name

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "traces")

# Names as the profilers printed them (torch 2.11 traces on the H200, ncu CSV, and common serving stacks).
CASES = [
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "gemm"),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, float, "
     "__nv_bfloat16, __nv_bfloat16, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*)", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)", "gemm"),
    ("void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 160u, 128u, 1u, 8u, 128u, 4u, 1u, (deep_gemm::GemmType)0>(float*, int*, unsigned int, CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap)", "gemm"),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB1", "gemm"),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false>(float, float)", "gemm"),
    ("fused_moe_kernel", "moe"),
    ("void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, int>(float const*, bool const*, float*, int, int*, int*, int, int, int)", "moe"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized> > >(Params)", "moe"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0", "attn"),
    ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_cga1x1x1_kernel0_0", "attn"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)", "attn"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attn"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false, 512>(float*)", "attn"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u>(Params)", "attn"),
    ("void reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*)", "elementwise"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", "norm"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)", "norm"),
    ("void cunn_SoftMaxForward<4, float, float, float, Epilogue>(float*, float const*, int)", "norm"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "inductor"),
    ("void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, long)", "quant"),
    ("void vllm::per_token_group_quant_8bit_kernel<__nv_bfloat16, c10::Float8_e4m3fn>(__nv_bfloat16 const*)", "quant"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "elementwise"),
    ("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>)", "elementwise"),
    ("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)", "elementwise"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(int)", "elementwise"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*)", "elementwise"),
    ("triton_poi_fused_mul_silu_1", "inductor"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "comm"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", "comm"),
    ("my_custom_thing_v2", "unknown"),
    ("", "unknown"),
]


@pytest.mark.parametrize("name,cls", CASES)
def test_classify_names(name, cls):
    assert classify(name) == cls


def test_every_fixture_kernel_is_classified():
    """Every kernel the real H200 traces hold gets a class (no 'unknown' in our own model)."""
    meta = json.load(open(os.path.join(FIX, "fixtures_meta.json")))
    names = set()
    for t in meta["traces"].values():
        names |= {n for n in t["key_averages"] if not n.endswith("_step") and not n.startswith("Memset")}
    assert len(names) >= 15
    got = {n: classify(n) for n in names}
    assert "unknown" not in got.values(), got


def test_rules_are_data_and_classes_valid():
    assert all(isinstance(p, str) and c in OP_CLASSES for p, c in RULES)
    for name, _ in CASES:
        assert classify(name) in OP_CLASSES


def test_hints():
    assert classify("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", hint="moe") == "moe"   # explicit class wins
    assert classify("nvjet_sm90_tst_64x8", hint="other") == "gemm"                    # 'other' is no hint
    assert classify("my_kernel", hint="aten::mm") == "gemm"                           # op name: fallback only
    assert classify("my_kernel", hint="aten::_cudnn_attention_forward") == "attn"
    assert classify("vectorized_layer_norm_kernel", hint="aten::mm") == "norm"        # name rules first
    assert classify("my_kernel", hint=None) == "unknown"
    assert classify("my_kernel", hint="Attention") == "attn"


@pytest.mark.parametrize("name,short", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "vectorized_elementwise_kernel[FillFunctor]"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel[CUDAFunctor_add]"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&)::{lambda(int)#1}>(int)",
     "elementwise_kernel[MulFunctor]"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
     "reduce_kernel[MeanOps]"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, float, c10::BFloat16 const*)",
     "vectorized_layer_norm_kernel"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)",
     "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8"),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"),
    ("fused_moe_kernel", "fused_moe_kernel"),
    ("_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE", "flash_fwd_kernel"),
    ("", ""),
])
def test_short_name(name, short):
    assert short_name(name) == short


def test_short_name_drops_templates_and_args_on_fixture_names():
    meta = json.load(open(os.path.join(FIX, "fixtures_meta.json")))
    for t in meta["traces"].values():
        for n in t["key_averages"]:
            s = short_name(n)
            assert s and "(" not in s and "<" not in s and len(s) <= 120, (n, s)


def test_library_kernels_not_editable():
    assert is_library_kernel("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT")
    assert is_library_kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7")
    assert not is_library_kernel("fused_moe_kernel")
    assert not is_library_kernel("void at::native::vectorized_elementwise_kernel<8>(int)")

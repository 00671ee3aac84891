"""harness.evidence.kernels, harness.evidence.gpu_peaks and the pure parts of harness.evidence, on recorded real data.

Kernel names are copied from real Ampere/Hopper profiler and Nsight traces (sources: the notes'
section 4, public trace dumps); where a template argument list was abbreviated in the source, it is
abbreviated the same way here. No GPU is needed: everything below is data in, data out.
"""

from __future__ import annotations

import os
import sys
import types
from collections import namedtuple
from pathlib import Path

import pytest

from harness.evidence import gpu_peaks, kernels

DATA = Path(__file__).parent / "data"

# (name, category, precision or None)
REAL_KERNELS = [
    # cuBLAS / CUTLASS GEMMs, Ampere
    ("ampere_sgemm_128x64_tn", "gemm", "fp32-simt"),
    ("volta_sgemm_128x64_nn", "gemm", "fp32-simt"),
    ("cutlass_80_simt_sgemm_64x64_8x5_tn_align1", "gemm", "fp32-simt"),
    ("void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)", "gemm", "fp32-simt"),
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel", "gemm", "tf32"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8", "gemm", "fp32"),
    ("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", "gemm", "tf32"),
    ("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", "gemm", "bf16"),
    ("ampere_bf16_s1688gemm_bf16_128x128_ldg8_f2f_stages_32x1_nn", "gemm", "bf16"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)", "gemm", "bf16"),
    ("cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>", "gemm", "bf16"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)", "gemm", "bf16"),
    ("void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*)", "gemm", None),
    # cuBLAS GEMMs, Hopper
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm", "bf16"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm", "bf16"),
    ("nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", "gemm", "fp16"),
    ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "gemm", "fp16"),
    ("nvjet_sm90_hss_320x128", "gemm", "fp16"),
    ("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "gemm", "bf16"),
    ("nvjet_tst_128x8_64x12_2x1_v_bz_splitK_TNT", "gemm", "bf16"),
    # attention
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)", "attention", "bf16"),
    ("void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<96, 64, 128, 8, 2, 4, 4, true, false, cutlass::half_t, Flash_kernel", "attention", "fp16"),
    ("flash_bwd_dot_do_o_kernel", "attention", None),
    ("flash_bwd_convert_dq_kernel", "attention", None),
    ("pytorch_fmha::fmha_fwd_loop_kernel", "attention", None),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention", "bf16"),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", "attention", "bf16"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", "attention", "fp16"),
    ("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0", "attention", None),
    ("cudnn::fusion::compute_dot_do_o", "attention", None),
    # Inductor
    ("triton_poi_fused_add_0", "triton", None),
    ("triton__0d1d2d3d", "triton", None),
    # optimizer
    ("multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>, FusedAdamMathFunctor<float,4,ADAM_MODE::0,false>>", "optimizer-fused", None),
    ("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", "optimizer-fused", None),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)", "optimizer-foreach", None),
    # copies, communication
    ("Memcpy DtoD (Device -> Device)", "memcpy", None),
    ("Memset (Device)", "memcpy", None),
    ("ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevComm *, unsigned long, ncclWork *)", "communication", None),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", None),
    # elementwise, reductions, normalization
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)", "elementwise", None),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)", "elementwise", None),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)", "elementwise", None),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float>, unsigned int, float, 4>)", "reduction", None),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 4, true>(float*, float const*, int, int, int)", "reduction", None),
    ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)", "reduction", None),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)", "normalization", None),
    ("void at::native::im2col_kernel<float>(long, float const*, long, long, long, long, long, long, long, long, long, long, long, long, float*)", "other", None),
]


@pytest.mark.parametrize("name,category,precision", REAL_KERNELS, ids=[n[:60] for n, _, _ in REAL_KERNELS])
def test_real_kernel_names_classify(name, category, precision):
    assert kernels.classify_kernel(name) == (category, precision)


def test_enough_real_names_across_ampere_and_hopper():
    assert len(REAL_KERNELS) >= 25
    assert {c for _, c, _ in REAL_KERNELS} >= {"gemm", "attention", "triton", "optimizer-fused", "optimizer-foreach",
                                               "memcpy", "communication", "elementwise", "reduction"}


@pytest.mark.parametrize("name,backend", [
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)", "flash"),
    ("pytorch_fmha::fmha_fwd_loop_kernel", "flash"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "efficient"),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", "efficient"),
    ("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0", "cudnn"),
    ("ampere_sgemm_128x64_tn", None),
])
def test_attention_backend_from_kernel_name(name, backend):
    assert kernels.attention_backend(name) == backend


def test_nvjet_single_precision_is_settled_by_the_run():
    # an fp32-in nvjet name does not say TF32 or not; the run's matmul precision does
    assert kernels.resolve_precision("fp32/tf32", "tf32") == "tf32"
    assert kernels.resolve_precision("fp32/tf32", "fp32") == "fp32"
    assert kernels.resolve_precision("fp32/tf32", "bf16") == "fp32/tf32"
    assert kernels.resolve_precision("bf16", "fp32") == "bf16"  # a definite name wins
    assert kernels.resolve_precision(None, "bf16") is None


@pytest.mark.parametrize("op,category", [
    ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::bmm", "gemm"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
    ("aten::_scaled_dot_product_flash_attention", "attention"),  # 2.1 on CPU
    ("aten::_scaled_dot_product_efficient_attention", "attention"),
    ("aten::_fused_adamw_", "optimizer-fused"), ("aten::_foreach_add_", "optimizer-foreach"),
    ("aten::native_layer_norm_backward", "normalization"), ("aten::_log_softmax", "reduction"),
    ("aten::copy_", "memcpy"), ("aten::fill_", "memcpy"), ("aten::gelu", "elementwise"),
    ("## Call CompiledFxGraph f2eyfh5xtjw45jw432c34ehbdhtarkas3buifavbe37hyzslpafs ##", "triton"),
    ("Torch-Compiled Region: 0/0", "triton"),
    ("Optimizer.step#AdamW.step", "other"), ("aten::view", "other"),
])
def test_cpu_op_categories(op, category):
    assert kernels.classify_cpu_op(op) == category


def test_sdpa_backend_choice():
    assert kernels.sdpa_backend({"flash": 10.0}, True) == "flash"
    assert kernels.sdpa_backend({"flash": 1.0, "cudnn": 5.0}, True) == "cudnn"  # most attention time wins
    assert kernels.sdpa_backend({}, True) == "math"  # SDPA with no fused kernel: the math path
    assert kernels.sdpa_backend({"flash": 1.0}, False) is None  # naive attention


def _role(op, shapes, vocab, strides=None, n_embd=None):
    found = kernels.vocab_gemm_role(op, shapes, vocab, strides, n_embd)
    return None if found is None else (found["role"], found["shape"], found["padded_to"])


def test_vocab_gemm_roles_from_recorded_shapes():
    V = 50257
    # shapes as torch.profiler records them (record_shapes=True) for GPT-2 124M, B*T = 16384
    assert _role("aten::mm", [[16384, 768], [768, V]], V) == ("forward", [16384, V, 768], None)
    assert _role("aten::mm", [[16384, V], [V, 768]], V) == ("backward-input", [16384, 768, V], None)
    assert _role("aten::mm", [[V, 16384], [16384, 768]], V) == ("backward-weight", [V, 768, 16384], None)
    # Inductor's extern mm passes out=: a third shape
    assert _role("aten::mm", [[16384, 768], [768, V], [16384, V]], V) == ("forward", [16384, V, 768], None)
    assert _role("aten::addmm", [[2304], [16384, 768], [768, 2304]], V) is None
    assert _role("aten::matmul", [[16, 1024, 768], [768, V]], V) is None  # composite, not the GEMM
    # 50304 is not what the compiler pads 50257 to (pad_mm: a multiple of 4 or 8): not the lm_head of a V=50257 run
    assert _role("aten::mm", [[16384, 768], [768, 50304]], V) is None


def test_lm_head_gemm_named_when_inductor_pads_the_vocab():
    """H100/H200 records (torch 2.11) of vocab 50257 under TF32/bf16 had no GEMM with N = 50257 in the
    forward and backward-input roles: Inductor's pad_mm had padded them (../shared/notes section 1)."""
    V = 50257
    bf16 = kernels.vocab_gemm_role("aten::mm", [[16384, 768], [768, 50264]], V, n_embd=768)
    assert (bf16["role"], bf16["shape"], bf16["padded_to"]) == ("forward", [16384, 50264, 768], 50264)
    assert "pad_mm" in bf16["padding"] and "multiple of 8" in bf16["padding"]
    tf32 = kernels.vocab_gemm_role("aten::mm", [[16384, 768], [768, 50260], [16384, 50260]], V, n_embd=768)
    assert (tf32["role"], tf32["padded_to"]) == ("forward", 50260) and "multiple of 4" in tf32["padding"]
    dx = kernels.vocab_gemm_role("aten::mm", [[16384, 50264], [50264, 768]], V, n_embd=768)
    assert (dx["role"], dx["shape"], dx["padded_to"]) == ("backward-input", [16384, 768, 50264], 50264)
    dw = kernels.vocab_gemm_role("aten::mm", [[50264, 16384], [16384, 768]], V, n_embd=768)
    assert (dw["role"], dw["padded_to"]) == ("backward-weight", 50264)
    # comprehensive_padding keeps the shape and pads the row stride to 128 bytes (bf16: 50304)
    dw_stride = kernels.vocab_gemm_role("aten::mm", [[V, 16384], [16384, 768]], V, [[1, 50304], [768, 1]], n_embd=768)
    assert (dw_stride["padded_to"], dw_stride["row_stride"]) == (None, 50304)
    assert "comprehensive_padding" in dw_stride["stride_padding"]
    # a stride that is the extent of another dimension is no padding
    assert kernels.vocab_gemm_role("aten::mm", [[V, 16384], [16384, 768]], V, [[16384, 1], [768, 1]])["row_stride"] is None
    # not padded sizes, or the other dimension is not n_embd: not the lm_head
    assert _role("aten::mm", [[16384, 768], [768, 50272]], V, n_embd=768) is None  # 50272: no pad_mm alignment gives it
    assert _role("aten::mm", [[16384, 3072], [3072, 50264]], V, n_embd=768) is None
    assert _role("aten::mm", [[16384, 768], [768, 50304]], 50304, n_embd=768) == ("forward", [16384, 50304, 768], None)


def test_padded_alignment_is_pad_mms_rule():
    assert kernels.padded_alignment(50264, 50257) == 8 and kernels.padded_alignment(50260, 50257) == 4
    assert kernels.padded_alignment(50257, 50257) is None and kernels.padded_alignment(50304, 50257) is None
    assert kernels.padded_alignment(50264, 50260) == 8  # 50260 is a multiple of 4: only bf16 pads it
    assert kernels.padded_alignment(50304, 50304) is None


# --------------------------------------------------------------------------- datasheet peaks

@pytest.mark.parametrize("device_name,key", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H800", "H800 SXM"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    # not in the table: no guess
    ("NVIDIA H100 NVL", None), ("NVIDIA H200 NVL", None), ("NVIDIA L40", None), ("NVIDIA RTX A1000", None),
    ("NVIDIA GeForce RTX 4090", None), (None, None), ("", None),
])
def test_gpu_name_matching(device_name, key):
    assert gpu_peaks.match_gpu(device_name) == key


def test_datasheet_peaks_are_the_dense_figures():
    assert gpu_peaks.datasheet_peak("NVIDIA A100-SXM4-80GB", "bf16")["peak_flops"] == 312e12
    assert gpu_peaks.datasheet_peak("NVIDIA A100-PCIE-40GB", "tf32")["peak_flops"] == 156e12
    assert gpu_peaks.datasheet_peak("NVIDIA A100-SXM4-40GB", "fp32")["peak_flops"] == 19.5e12
    assert gpu_peaks.datasheet_peak("NVIDIA H100 80GB HBM3", "bf16")["peak_flops"] == 989e12
    assert gpu_peaks.datasheet_peak("NVIDIA H100 80GB HBM3", "tf32")["peak_flops"] == 494.5e12
    assert gpu_peaks.datasheet_peak("NVIDIA H100 PCIe", "bf16")["peak_flops"] == 756e12
    assert gpu_peaks.datasheet_peak("NVIDIA H800", "fp16")["peak_flops"] == 989e12
    assert gpu_peaks.datasheet_peak("NVIDIA L4", "fp32")["peak_flops"] == 30.3e12
    assert gpu_peaks.datasheet_peak("NVIDIA L40S", "tf32")["peak_flops"] == 183e12
    for key, peaks in gpu_peaks.PEAKS.items():
        assert peaks["fp16"] == peaks["bf16"] > peaks["tf32"] > peaks["fp32"], key
        assert "dense" in gpu_peaks.SOURCES[key]
    assert gpu_peaks.datasheet_peak("NVIDIA H100 NVL", "bf16") is None
    assert gpu_peaks.datasheet_peak(None, "bf16") is None


# --------------------------------------------------------------------------- MFU formula

def test_gpt2_124m_flops_per_token_matches_the_anchor():
    from gpt.model import GPT

    model = GPT(12, 12, 768, 50257, 1024, "sdpa")
    n_total = sum(p.numel() for p in model.parameters())  # tied wte/lm_head counted once by parameters()
    assert n_total == 124_439_808  # GPT-2 small with vocab 50257 and T=1024
    assert model.num_params() == n_total - 1024 * 768  # nanoGPT's N: without wpe
    flops = model.flops_per_token()
    assert flops == 6 * model.num_params() + 12 * 12 * 12 * 64 * 1024
    assert abs(flops / 854.8e6 - 1) < 0.005  # ../shared/notes/gpt2-workload-anchors.md: 854.8 MFLOP/token


# --------------------------------------------------------------------------- loaded libraries

def test_maps_parsing_on_a_recorded_sample():
    from harness.evidence import libraries

    found = libraries.parse_mapped_libraries((DATA / "proc_self_maps_sample.txt").read_text())
    site = "/venv/lib/python3.11/site-packages/nvidia"
    assert found["cublas"] == [f"{site}/cublas/lib/libcublas.so.12"]
    # two copies of cuBLASLt in one process: the wheel's first (mapped first), the toolkit's after it
    assert found["cublasLt"] == [f"{site}/cublas/lib/libcublasLt.so.12",
                                 "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcublasLt.so.12.4.5.8"]
    assert found["cudnn"] == [f"{site}/cudnn/lib/libcudnn.so.9"]  # not libcudnn_graph / engines sub-libraries
    assert found["nccl"] == [f"{site}/nccl/lib/libnccl.so.2"]
    bundled = "7f00-7f01 r--p 00000000 08:01 1 /opt/conda/lib/python3.10/site-packages/torch/lib/libcublas-3b81d170.so.11\n"
    assert libraries.parse_mapped_libraries(bundled)["cublas"] == ["/opt/conda/lib/python3.10/site-packages/torch/lib/libcublas-3b81d170.so.11"]


@pytest.mark.parametrize("key,raw,version", [
    ("cublasLt", 120103, "12.1.3"), ("cublas", 130101, "13.1.1"), ("cudnn", 8902, "8.9.2"),
    ("cudnn", 90100, "9.1.0"), ("cudnn", 92400, "9.24.0"), ("nccl", 21801, "2.18.1"), ("nccl", 23007, "2.30.7"),
    ("nccl", 2708, "2.7.8"), ("nccl", None, None),
])
def test_library_version_decoding(key, raw, version):
    from harness.evidence import libraries

    assert libraries.decode_version(key, raw) == version


# --------------------------------------------------------------------------- power summary and sampler

def _samples(powers, reasons=0, energy_start=None, dt=0.1, clock=1980):
    out = []
    for i, w in enumerate(powers):
        energy = None if energy_start is None else energy_start + sum(powers[:i]) * dt * 1000  # mJ
        out.append({"t": 100.0 + i * dt, "power_w": w, "sm_clock_mhz": clock - 10 * i,
                    "reasons": reasons if isinstance(reasons, int) else reasons[i], "energy_mj": energy})
    return out


def test_power_summary_keeps_the_timed_window_and_flags_throttling():
    from harness.evidence import power

    # 1 s of idle-ish compile (100 W) then 0.5 s of timed steps at 700 W, power-capped in two samples
    powers = [100.0] * 10 + [700.0] * 6
    reasons = [0x1] * 10 + [0x0, 0x0, 0x4, 0x4, 0x0, 0x0]
    s = power.summarize_power(_samples(powers, reasons, energy_start=5_000_000), 0.1, window_s=0.5, tokens=8192,
                                max_sm_clock_mhz=1980)
    assert s["available"] and s["samples"] == 6 and s["samples_total"] == 16
    assert s["mean_w"] == pytest.approx(700.0) and s["peak_w"] == 700.0
    assert s["joules_method"] == "nvml-energy-counter"
    assert s["joules"] == pytest.approx(350.0) and s["joules_per_token"] == pytest.approx(350.0 / 8192)
    assert s["throttle_reasons"] == ["sw_power_cap"] and s["throttled"] is True
    assert s["throttle_reason_share"]["sw_power_cap"] == pytest.approx(2 / 6)
    assert s["sm_clock_mhz_min"] == 1980 - 150 and s["sm_clock_mhz_max"] == 1980
    assert s["clock_deficit"] == pytest.approx(1 - 1855 / 1980)  # mean of 1880 .. 1830


def test_power_cap_without_falling_clocks_is_not_throttling():
    """The H100 records of torch 2.11: sw_power_cap raised in a third of the samples while the SM clock stayed
    at 1965-1975 of 1980 MHz. That is not a throttled run; a real clock drop or a thermal reason is."""
    from harness.evidence import power

    samples = [{"t": 100.0 + i * 0.1, "power_w": 640.0, "sm_clock_mhz": c, "reasons": r, "energy_mj": None}
               for i, (c, r) in enumerate(zip([1980, 1975, 1965, 1980, 1980, 1975], [0, 0x4, 0x4, 0, 0, 0], strict=True))]
    s = power.summarize_power(samples, 0.1, window_s=None, tokens=None, max_sm_clock_mhz=1980)
    assert s["throttle_reasons"] == ["sw_power_cap"] and s["throttled"] is False
    assert s["clock_deficit"] == pytest.approx(1 - s["sm_clock_mhz_mean"] / 1980) and s["clock_deficit"] < 0.01
    fell = [{**x, "sm_clock_mhz": 1500} for x in samples]  # the H200 tf32 record's 1500 MHz
    assert power.summarize_power(fell, 0.1, window_s=None, tokens=None, max_sm_clock_mhz=1980)["throttled"] is True
    thermal = [{**x, "reasons": 0x20} for x in samples]  # sw thermal slowdown counts on its own
    assert power.summarize_power(thermal, 0.1, window_s=None, tokens=None, max_sm_clock_mhz=1980)["throttled"] is True
    # without the maximum clock a power cap cannot be judged: neither true nor false
    assert power.summarize_power(samples, 0.1, window_s=None, tokens=None)["throttled"] is None


def test_power_summary_idle_reasons_are_not_throttling_and_no_energy_counter():
    from harness.evidence import power

    s = power.summarize_power(_samples([300.0, 320.0, 310.0], 0x1 | 0x2), 0.1, window_s=None, tokens=None)
    assert s["throttled"] is False and s["throttle_reasons"] == ["applications_clocks_setting", "gpu_idle"]
    assert s["joules_method"] == "mean-power-x-time" and s["joules"] == pytest.approx(310.0 * 0.2)
    assert s["joules_per_token"] is None
    short = power.summarize_power(_samples([300.0, 320.0]), 0.1, window_s=0.01, tokens=10)
    assert short["samples"] == 2 and short["window"].startswith("last samples")
    assert power.throttle_reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]


class FakeNVML(types.ModuleType):
    """pynvml as far as harness.evidence uses it, for one GPU drawing 400 W."""

    NVML_CLOCK_SM = 1
    Process = namedtuple("Process", "pid usedGpuMemory")

    def __init__(self, processes):
        super().__init__("pynvml")
        self.processes = processes
        self.energy = 0

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetPowerUsage(self, handle):
        return 400_000

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1755

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        raise AssertionError("the newer name is preferred where it exists")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.energy += 40_000
        return self.energy

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self.processes

    def nvmlDeviceGetMemoryInfo(self, handle):
        return types.SimpleNamespace(used=30 * 2**30, total=80 * 2**30)


def test_power_sampler_thread_with_a_fake_nvml(monkeypatch):
    import torch

    from harness.evidence import power

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([]))
    sampler = power.PowerSampler(torch.device("cuda", 0), interval_s=0.01).start()
    assert sampler.reason is None
    import time

    time.sleep(0.1)
    sampler.stop()
    sampler.stop()  # idempotent
    s = sampler.summary(window_s=0.05, tokens=1000)
    assert s["available"] and s["mean_w"] == 400.0 and s["throttled"] is True and s["sm_clock_mhz_mean"] == 1755
    assert s["joules_method"] == "nvml-energy-counter" and s["joules"] > 0
    cpu = power.PowerSampler(torch.device("cpu")).start()
    assert cpu.summary()["reason"].startswith("not available on cpu")


def test_memory_split_arithmetic_with_a_fake_nvml(monkeypatch):
    import torch

    from harness.evidence import memory

    gib = 2**30
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 20 * gib)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: 26 * gib)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 25 * gib)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    fake = FakeNVML([FakeNVML.Process(os.getpid(), 27 * gib), FakeNVML.Process(1, 5 * gib)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    m = memory.memory_split(torch.device("cuda", 0))
    assert m["available"] and m["method"] == "nvml-process"
    assert (m["tensors_bytes"], m["allocator_cache_bytes"], m["outside_allocator_bytes"]) == (20 * gib, 6 * gib, 2 * gib)
    assert m["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    fake.processes = [FakeNVML.Process(1, 5 * gib)]  # this process invisible (container PID namespace)
    m = memory.memory_split(torch.device("cuda", 0))
    assert m["method"] == "nvml-device-minus-reserved" and m["outside_allocator_bytes"] == 5 * gib and "1 other" in m["note"]
    assert memory.memory_split(torch.device("cpu"))["reason"].startswith("not available on cpu")


# --------------------------------------------------------------------------- kernel inventory from CUDA events

def test_inventory_from_recorded_cuda_events():
    """The CUDA branch of the inventory on events shaped as torch.profiler returns them: kernels as device
    events, each CPU op carrying the kernels it launched. Names are real H100 kernel names; durations are
    test fixtures, not measurements."""
    from torch.autograd import DeviceType

    from harness.evidence import profiling

    Kernel = namedtuple("Kernel", "name device duration")
    V = 50257
    lm_fwd, lm_dx, lm_dw = ("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN",
                            "nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT")
    qkv = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
    flash = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, "
             "Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>"
             "(pytorch_flash::Flash_fwd_params)")
    adam = "multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>, FusedAdamMathFunctor<float,4,ADAM_MODE::0,false>>"

    def ev(name, device_type, us=0.0, shapes=(), launched=(), cpu_us=1.0):
        return types.SimpleNamespace(
            name=name, device_type=device_type, is_async=False, input_shapes=[list(s) for s in shapes],
            kernels=[Kernel(k, 0, d) for k, d in launched], self_cpu_time_total=cpu_us,
            time_range=types.SimpleNamespace(elapsed_us=lambda us=us: us))

    CPU, CUDA = DeviceType.CPU, DeviceType.CUDA
    events = []
    for _ in range(2):  # two profiled steps
        events += [
            ev("aten::addmm", CPU, shapes=[[2304], [16384, 768], [768, 2304]], launched=[(qkv, 500.0)]),
            ev(qkv, CUDA, 500.0),
            ev("aten::_scaled_dot_product_flash_attention", CPU, launched=[(flash, 300.0)]),
            ev(flash, CUDA, 300.0),
            ev("aten::mm", CPU, shapes=[[16384, 768], [768, V]], launched=[(lm_fwd, 3000.0)]),
            ev(lm_fwd, CUDA, 3000.0),
            ev("aten::mm", CPU, shapes=[[16384, V], [V, 768]], launched=[(lm_dx, 3100.0)]),
            ev(lm_dx, CUDA, 3100.0),
            ev("aten::mm", CPU, shapes=[[V, 16384], [16384, 768]], launched=[(lm_dw, 3200.0)]),
            ev(lm_dw, CUDA, 3200.0),
            ev("Optimizer.step#AdamW.step", CPU),
            ev("Optimizer.step#AdamW.step", CUDA, 900.0),  # gpu_user_annotation: spans the kernels below, not one
            ev("aten::_fused_adamw_", CPU, launched=[(adam, 800.0)]),
            ev(adam, CUDA, 800.0),
            ev("Memcpy DtoD (Device -> Device)", CUDA, 100.0),
        ]
    k = profiling.inventory(events, "cuda", 2, 0.05, "bf16", V, True)
    assert k["available"] and k["device"] == "cuda"
    assert k["busy_us_per_step"] == pytest.approx(500 + 300 + 3000 + 3100 + 3200 + 800 + 100)
    names = [t["name"] for t in k["top"]]
    assert "Optimizer.step#AdamW.step" not in names
    assert sum(t["share"] for t in k["top"]) == pytest.approx(1.0)
    assert k["lm_head_gemm"]["name"] == lm_fwd and k["lm_head_gemm"]["precision"] == "bf16"
    assert k["lm_head_gemm"]["shape"] == [16384, V, 768] and k["lm_head_gemm"]["per_step_us"] == pytest.approx(3000.0)
    assert [g["role"] for g in k["vocab_gemms"]] == ["forward", "backward-input", "backward-weight"]
    assert k["vocab_gemms"][2]["name"] == lm_dw
    assert k["attention_kernels"] == [flash] and k["sdpa_backend"] == "flash"
    assert set(k["by_category"]) == {"gemm", "attention", "optimizer-fused", "memcpy"}
    assert k["by_category"]["gemm"]["per_step_us"] == pytest.approx(500 + 3000 + 3100 + 3200)
    assert k["step_time_us"] == pytest.approx(25_000.0)


def test_inventory_names_the_padded_lm_head_and_keeps_every_gemm_shape():
    """Events shaped like the H100 bf16 rung at vocab 50257 under torch 2.11 (B*T = 16384): Inductor's pad_mm
    padded the forward and backward-input GEMMs to 50264, and the backward-weight operand carries a padded
    row stride. Kernel names are real H100 names; which GEMM ran which is a fixture, durations too."""
    from torch.autograd import DeviceType

    from harness.evidence import profiling

    Kernel = namedtuple("Kernel", "name device duration")
    V = 50257
    fwd, dx = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
    dw = ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x6_nt_align8>"
          "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x6_nt_align8::Params)")
    qkv = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"

    def op(name, shapes, strides, launched):
        return types.SimpleNamespace(
            name=name, device_type=DeviceType.CPU, is_async=False, input_shapes=shapes, structured_input_strides=strides,
            input_dtypes=["c10::BFloat16"] * len(shapes), kernels=[Kernel(k, 0, d) for k, d in launched],
            self_cpu_time_total=1.0, time_range=types.SimpleNamespace(elapsed_us=lambda: 0.0))

    def kernel(name, us):
        return types.SimpleNamespace(name=name, device_type=DeviceType.CUDA, is_async=False, input_shapes=[],
                                     kernels=[], self_cpu_time_total=0.0,
                                     time_range=types.SimpleNamespace(elapsed_us=lambda us=us: us))

    events = []
    for _ in range(3):
        events += [
            op("aten::addmm", [[2304], [16384, 768], [768, 2304]], [[1], [768, 1], [1, 768]], [(qkv, 400.0)]),
            kernel(qkv, 400.0),
            op("aten::mm", [[16384, 768], [768, 50264], [16384, 50264]], [[768, 1], [1, 768], [50264, 1]], [(fwd, 3000.0)]),
            kernel(fwd, 3000.0),
            op("aten::mm", [[16384, 50264], [50264, 768]], [[50264, 1], [768, 1]], [(dx, 2900.0)]),
            kernel(dx, 2900.0),
            op("aten::mm", [[V, 16384], [16384, 768]], [[1, 50304], [768, 1]], [(dw, 2400.0)]),
            kernel(dw, 2400.0),
        ]
    k = profiling.inventory(events, "cuda", 3, 0.1, "bf16", V, False, n_embd=768)
    lm = k["lm_head_gemm"]
    assert lm["name"] == fwd and lm["shape"] == [16384, 50264, 768] and lm["padded_to"] == 50264
    assert "pad_mm" in lm["padding"] and lm["strides"] == [[768, 1], [1, 768], [50264, 1]]
    assert lm["per_step_us"] == pytest.approx(3000.0)
    roles = {g["role"]: g for g in k["vocab_gemms"]}
    assert set(roles) == {"forward", "backward-input", "backward-weight"}
    assert roles["backward-input"]["padded_to"] == 50264
    assert roles["backward-weight"]["padded_to"] is None and roles["backward-weight"]["row_stride"] == 50304
    # every GEMM is in the inventory with its shapes and strides, the lm_head ones marked, by time
    assert [g["name"] for g in k["gemms"]] == [fwd, dx, dw, qkv]
    qkv_entry = k["gemms"][-1]
    assert qkv_entry["shapes"] == [[2304], [16384, 768], [768, 2304]] and qkv_entry["mnk"] == [16384, 2304, 768]
    assert qkv_entry["lm_head"] is None and qkv_entry["calls"] == 3 and qkv_entry["dtypes"][0] == "c10::BFloat16"


# The fused lm_head losses' Triton kernels, named as the libraries' sources name them (not from a real trace: see
# harness/evidence/kernels.py LM_HEAD_LOSS_KERNELS); liger's says cross_entropy, which would otherwise read as a reduction.
@pytest.mark.parametrize("name", ["liger_cross_entropy_kernel", "element_mul_kernel", "_cce_lse_forward_kernel",
                                  "_cce_backward_kernel", "_indexed_neg_dot_forward_kernel"])
def test_fused_lm_head_loss_kernels_have_their_own_category(name):
    assert kernels.classify_kernel(name) == ("lm-head-loss", None)
    assert "lm-head-loss" in kernels.CATEGORIES


def test_triton_kernels_named_like_their_cpu_side_event_are_kept():
    """torch 2.4+ flags GPU copies of record_function ranges with is_user_annotation; Inductor also records each
    Triton launch as a CPU-side event of the kernel's own name, which must not drop the kernel (torch 2.11's
    H100/H200 records show no Triton kernel at all). Without the flag (2.1) the name rule still applies."""
    from torch.autograd import DeviceType

    from gpt import torch_compat

    def event(name, device, annotation=None, us=10.0):
        e = types.SimpleNamespace(name=name, device_type=device, time_range=types.SimpleNamespace(elapsed_us=lambda: us))
        if annotation is not None:
            e.is_user_annotation = annotation
        return e

    new = [event("triton_poi_fused_add_0", DeviceType.CPU, False), event("triton_poi_fused_add_0", DeviceType.CUDA, False),
           event("Optimizer.step#AdamW.step", DeviceType.CPU, False), event("Optimizer.step#AdamW.step", DeviceType.CUDA, True),
           event("nvjet_tst_128x64", DeviceType.CUDA, False, 30.0)]
    assert torch_compat.device_kernel_events(new) == [("triton_poi_fused_add_0", 10.0), ("nvjet_tst_128x64", 30.0)]
    old = [event("Optimizer.step#AdamW.step", DeviceType.CPU), event("Optimizer.step#AdamW.step", DeviceType.CUDA),
           event("triton__0d1d2d", DeviceType.CUDA)]
    assert torch_compat.device_kernel_events(old) == [("triton__0d1d2d", 10.0)]

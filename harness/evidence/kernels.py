"""Kernel-name classification: which kind of work a GPU kernel (or a CPU op) did, and in which precision.

Pure functions on names, no torch: compare/report and the tests import this without a GPU. The
patterns come from real Ampere/Hopper traces (../shared/notes/torch-builds-and-apis.md section 4);
tests/test_kernels.py holds the names they were checked against.

Categories: gemm, attention, triton (Inductor-generated code), lm-head-loss (a fused linear + cross-entropy
library's kernels), optimizer-fused, optimizer-foreach, elementwise, reduction, normalization, memcpy (copies and
memsets), communication, other.

GEMM precision tags: fp32-simt (no tensor cores), fp32 (fp32 storage and math, tensor-core use not
stated by the name), tf32, bf16, fp16, fp8, fp64, or an ambiguous pair ("fp32/tf32") where the name
does not decide; resolve_precision() settles a pair with the run's own configuration.
"""

from __future__ import annotations

import re

CATEGORIES = (
    "gemm", "attention", "triton", "lm-head-loss", "optimizer-fused", "optimizer-foreach", "elementwise", "reduction",
    "normalization", "memcpy", "communication", "other",
)
# The Triton kernels of the fused lm_head losses (gpt/torch_compat.py linear_cross_entropy), named as in the
# libraries' sources (liger-kernel 0.8.5 ops/fused_linear_cross_entropy.py; cut-cross-entropy 25.1.1): a Triton
# kernel carries its Python function's name. Not yet checked against a real trace.
LM_HEAD_LOSS_KERNELS = ("liger_cross_entropy_kernel", "element_mul_kernel", "_cce_lse_forward_kernel",
                        "_cce_backward_kernel", "_indexed_neg_dot_forward_kernel")
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")


# --------------------------------------------------------------------------- GPU kernel names

def attention_backend(name: str) -> str | None:
    """flash | efficient | cudnn for a fused attention kernel, else None."""
    n = name.lower()
    if "cudnn" in n and any(t in n for t in ("sdpa", "fmha", "flash", "attn", "attention", "dot_do_o")):
        return "cudnn"  # cudnn_generated_fort_native_sdpa_*, *_sdpa_sm90_flash_fprop_*, cudnn::fusion::compute_dot_do_o
    if "fmha_cutlass" in n or "memeffattention" in n or "attentionkernel" in n or "attentionbackwardkernel" in n \
            or "efficient_attention" in n:
        return "efficient"  # fmha_cutlassF_* / fmha_cutlassB_* (PyTorchMemEffAttention::AttentionKernel)
    if "flash" in n or "pytorch_fmha" in n:
        return "flash"  # pytorch_flash::flash_fwd_kernel (2.2+), pytorch_fmha::fmha_fwd_loop_kernel (2.0/2.1)
    return None


def _is_gemm(n: str) -> bool:
    return (
        n.startswith("nvjet") or "gemm" in n or "gemv" in n or "splitkreduce" in n or "cublaslt::" in n
        or "dot_kernel" in n or bool(re.search(r"cutlass.*(tensorop|simt|wmma)", n))
    )


# nvjet (cuBLAS on Hopper and later): nvjet_[smXX_]<A/B type><compute type><C/D type>_..., with BLAS type
# letters s=fp32, d=fp64, h=fp16 (half), t=bf16. The C/D letter is a storage type, so "tst" (bf16 in and
# out, fp32 accumulate) cannot be a TF32 GEMM, whose output is fp32; real traces show nvjet_tst_* in bf16
# workloads and nvjet_hsh_* in fp16 ones. An fp32 GEMM ("sss") may run as TF32 or not: the name says neither.
_NVJET = re.compile(r"^nvjet_(?:sm\d+_)?([a-z])([a-z])([a-z])_")
_NVJET_INPUT = {"s": "fp32/tf32", "d": "fp64", "h": "fp16", "t": "bf16"}


def gemm_precision(name: str) -> str | None:
    n = name.lower()
    m = _NVJET.match(n)
    if m:
        return _NVJET_INPUT.get(m.group(1))
    # Explicit dtype tokens decide first: ampere_fp16_s1688gemm_fp16_* is fp16 even though s1688 alone is TF32's MMA shape.
    if "tf32" in n:  # sm80_xmma_gemm_f32f32_tf32f32_*, cutlass3x_*_tf32gemm_*
        return "tf32"
    if "bf16" in n or "bfloat16" in n:
        return "bf16"
    if any(t in n for t in ("fp16", "f16f16", "_f16_", "h16816", "h1688", "hgemm", "half_t", "__half")):
        return "fp16"
    if any(t in n for t in ("e4m3", "e5m2", "fp8")):
        return "fp8"
    if any(t in n for t in ("dgemm", "f64", "fp64")):
        return "fp64"
    if "s1688gemm" in n:  # cutlass_80_tensorop_s1688gemm_*: fp32 operands on the m16n8k8 TF32 tensor-core MMA
        return "tf32"
    if "sgemm" in n or "simt" in n or "gemv" in n or "gemmsn" in n or "gemmk1" in n:
        return "fp32-simt"  # ampere_sgemm_*, cutlass_80_simt_sgemm_*, gemv2T_kernel_val: CUDA cores
    if "f32f32_f32f32" in n:  # sm80_xmma_gemm_f32f32_f32f32_f32_*: IEEE fp32
        return "fp32"
    return None


def _tensor_dtype(n: str) -> str | None:
    """dtype of an attention kernel from its template arguments or infix."""
    if "bf16" in n or "bfloat16" in n:
        return "bf16"
    if "half_t" in n or "__half" in n or "_f16_" in n or "fp16" in n or re.search(r"cutlass[fb]_f16", n):
        return "fp16"
    if re.search(r"cutlass[fb]_f32", n):
        return "fp32"
    return None


def classify_kernel(name: str) -> tuple[str, str | None]:
    """(category, precision) of a GPU kernel (or memcpy/memset) as the profiler names it."""
    n = name.lower()
    if n.startswith(("memcpy", "memset")) or "catarraybatchedcopy" in n:
        return "memcpy", None
    if n.startswith("nccl") or "ncclkernel" in n or "nccldevkernel" in n:
        return "communication", None
    if n.startswith("triton"):  # triton_poi_/red_/per_/tem_/for_ (2.6+), triton__0d1d2d (2.1); before attention: flex attention is Triton too
        return "triton", None
    if attention_backend(name):
        return "attention", _tensor_dtype(n)
    if any(k in n for k in LM_HEAD_LOSS_KERNELS):  # before reduction: liger's kernel name says cross_entropy
        return "lm-head-loss", None
    if "fusedadam" in n or "fused_adam" in n or "fusedsgd" in n or "fused_sgd" in n:
        return "optimizer-fused", None  # multi_tensor_apply_kernel<..., FusedAdamMathFunctor<...>>
    if "multi_tensor_apply" in n or "foreach" in n:
        return "optimizer-foreach", None  # the same launcher with BinaryOpListAlphaFunctor, PointwiseOpScalarFunctor...
    if _is_gemm(n):
        return "gemm", gemm_precision(name)
    if "layer_norm" in n or "layernorm" in n or "gammabeta" in n or "rmsnorm" in n or "rms_norm" in n:
        return "normalization", None
    if any(t in n for t in ("reduce_kernel", "softmax", "nll_loss", "lpnorm", "reduction", "cross_entropy")):
        return "reduction", None
    if "elementwise" in n or "fill" in n or "gelu" in n or "index" in n or "scatter" in n or "gather" in n:
        return "elementwise", None
    return "other", None


# --------------------------------------------------------------------------- CPU ops (the CPU path's "kernels")

CPU_GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_scaled_mm",
                "aten::mkldnn_linear", "mkldnn::_linear_pointwise"}
_CPU_ATTENTION = {  # op name prefix -> SDPA backend; *_backward ops match the same prefix
    "aten::_scaled_dot_product_flash_attention": "flash",  # also *_for_cpu (2.3+)
    "aten::_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_attention_math": "math",
}
_CPU_REDUCTION = ("sum", "mean", "norm", "amax", "max", "min", "softmax", "log_softmax", "nll_loss", "cross_entropy",
                  "_log_softmax", "_softmax", "_log_softmax_backward_data", "_softmax_backward_data", "nll_loss_forward",
                  "nll_loss_backward", "nll_loss2d_forward", "linalg_vector_norm", "var", "std", "argmax")
_CPU_MEMCPY = ("copy_", "_to_copy", "to", "clone", "contiguous", "fill_", "zero_", "zeros", "zeros_like", "empty",
               "empty_like", "empty_strided", "ones", "ones_like", "cat", "_copy_from")
_CPU_ELEMENTWISE = ("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "gelu", "gelu_backward", "tanh",
                    "sqrt", "rsqrt", "exp", "pow", "neg", "addcdiv", "addcdiv_", "addcmul", "addcmul_", "lerp_",
                    "masked_fill", "masked_fill_", "where", "eq", "ne", "lt", "gt", "clamp", "clamp_", "embedding",
                    "embedding_dense_backward", "embedding_backward", "index_select", "index_add_", "index_put_",
                    "scatter", "gather", "threshold_backward", "relu", "abs", "maximum", "minimum", "reciprocal")


def cpu_attention_backend(op: str) -> str | None:
    for prefix, backend in _CPU_ATTENTION.items():
        if op.startswith(prefix):
            return backend
    return None


def classify_cpu_op(name: str) -> str:
    """Category of a CPU-side op name (aten::mm, aten::_fused_adamw_, ...)."""
    if name in CPU_GEMM_OPS or name.startswith("mkldnn::") and "linear" in name:
        return "gemm"
    if cpu_attention_backend(name):
        return "attention"
    if name.startswith(("aten::_fused_adam", "aten::_fused_sgd")):
        return "optimizer-fused"
    if name.startswith("aten::_foreach_"):
        return "optimizer-foreach"
    if name.startswith(("c10d::", "nccl:", "gloo:")) or name == "record_param_comms":
        return "communication"
    if name.startswith(("cpp_fused", "triton_", "CompiledFunction", "Torch-Compiled Region")) or "CompiledFxGraph" in name:
        return "triton"  # code Inductor generated (C++ on CPU) runs as self time of the compiled-graph call
    if not name.startswith("aten::"):
        return "other"
    op = name[len("aten::"):]
    if op in ("native_layer_norm", "native_layer_norm_backward", "layer_norm", "rms_norm", "_fused_rms_norm"):
        return "normalization"
    if op in _CPU_REDUCTION:
        return "reduction"
    if op in _CPU_MEMCPY:
        return "memcpy"
    if op in _CPU_ELEMENTWISE:
        return "elementwise"
    return "other"


# --------------------------------------------------------------------------- precision and SDPA backend

def resolve_precision(tag: str | None, run_dtype: str | None) -> str | None:
    """Settle an ambiguous name tag ("fp32/tf32") with the run's GEMM dtype; a definite tag stays as it is."""
    if tag and "/" in tag and run_dtype in tag.split("/"):
        return run_dtype
    return tag


def sdpa_backend(attention_times: dict[str, float], uses_sdpa: bool) -> str | None:
    """The SDPA backend that ran: the one with the most attention time among fused backends seen
    (kernel names on GPU, op names on CPU). An SDPA model with no fused attention anywhere ran the math
    path (composite bmm + softmax, or Inductor's decomposition of it). None when the model has no SDPA."""
    if not uses_sdpa:
        return None
    seen = {b: t for b, t in attention_times.items() if b in SDPA_BACKENDS}
    if not seen:
        return "math"
    return max(seen, key=seen.get)


# --------------------------------------------------------------------------- GEMMs that touch the vocabulary

# Inductor's pad_mm (torch._inductor.config.shape_padding, on since 2.1) pads a GEMM dimension up to a
# multiple of 16 bytes: 4 elements in fp32/TF32, 8 in bf16/fp16 (fx_passes/pad_mm.py get_alignment_size).
# So under compile, vocab 50257 reaches the profiler as 50260 (fp32/TF32) or 50264 (bf16).
PAD_MM_ALIGNMENTS = (4, 8)
# comprehensive_padding (on by default from 2.4) keeps the shape and pads the row *stride* of generated
# buffers to 128 bytes (config.padding_alignment_bytes): 32 fp32 or 64 bf16 elements (50257 -> 50272 / 50304).
STRIDE_PAD_ALIGNMENTS = (32, 64)
SHAPE_PADDING = "Inductor pad_mm (config.shape_padding): the GEMM's {dim} rounded up from {size} to a multiple of {align}"
STRIDE_PADDING = ("Inductor comprehensive_padding (config.comprehensive_padding): row stride {stride} for {size} "
                  "columns (128-byte aligned rows)")


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def padded_alignment(dim, size: int) -> int | None:
    """The pad_mm alignment that turns `size` into `dim` (dim > size), else None."""
    if not isinstance(dim, int) or dim == size:
        return None
    return next((a for a in PAD_MM_ALIGNMENTS if size % a and dim == round_up(size, a)), None)


def _is(dim, size: int | None) -> bool:
    """dim is `size` itself or `size` as pad_mm pads it (any size when None)."""
    return size is None or dim == size or padded_alignment(dim, size) is not None


def gemm_operands(op: str, shapes: list) -> tuple[list, list] | None:
    """(A shape, B shape) of a 2-D GEMM op from the profiler's recorded input shapes, else None.

    aten::mm(a, b[, out]) and aten::addmm(bias, a, b); Inductor calls mm with out=, a third shape."""
    if op == "aten::mm" and len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
    elif op == "aten::addmm" and len(shapes) >= 3:
        a, b = shapes[1], shapes[2]
    else:
        return None
    if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == 2 and len(b) == 2):
        return None
    return list(a), list(b)


def gemm_mnk(op: str, shapes: list) -> list[int] | None:
    """[M, N, K] of a 2-D GEMM op (A is M x K, B is K x N), else None."""
    operands = gemm_operands(op, shapes)
    if operands is None:
        return None
    (m, k), (k2, n) = operands
    return [m, n, k] if k == k2 else None


def stride_padding(shapes: list, strides: list | None, vocab_size: int) -> int | None:
    """A row stride that is vocab_size rounded up to 128 bytes while no extent is: comprehensive padding."""
    padded = {round_up(vocab_size, a) for a in STRIDE_PAD_ALIGNMENTS} - {vocab_size}
    extents = {d for s in shapes or [] if isinstance(s, (list, tuple)) for d in s}
    for s in strides or []:
        for value in s if isinstance(s, (list, tuple)) else []:
            if value in padded and value not in extents:
                return value
    return None


def vocab_gemm_role(op: str, shapes: list, vocab_size: int, strides: list | None = None,
                    n_embd: int | None = None) -> dict | None:
    """Which lm_head GEMM this is, if any: {"role", "shape" [M, N, K], "padded_to", "padding", "row_stride",
    "stride_padding"}.

    forward: logits[M=B*T, N=V] = x[M, K=C] @ W^T[K, N]; backward-input: dx = dlogits @ W (K = V);
    backward-weight: dW[M=V, N=C] = dlogits^T @ x. V may appear padded by Inductor's pad_mm (50257 ->
    50264 in bf16, 50260 in fp32/TF32): the GEMM is still the lm_head, with padded_to and the mechanism
    recorded. With n_embd given, the other operand dimension must be C too, so no unrelated GEMM of a
    vocab-like size is taken for it."""
    mnk = gemm_mnk(op, shapes)
    if mnk is None:
        return None
    m, n, k = mnk
    roles = (("forward", n, "N", k), ("backward-input", k, "K", n), ("backward-weight", m, "M", n))
    for role, vocab_dim, dim_name, other in roles:
        if _is(vocab_dim, vocab_size) and _is(other, n_embd):
            align = padded_alignment(vocab_dim, vocab_size)
            row_stride = stride_padding(shapes, strides, vocab_size)
            return {
                "role": role, "shape": mnk,
                "padded_to": vocab_dim if align else None,
                "padding": SHAPE_PADDING.format(dim=dim_name, size=vocab_size, align=align) if align else None,
                "row_stride": row_stride,
                "stride_padding": STRIDE_PADDING.format(stride=row_stride, size=vocab_size) if row_stride else None,
            }
    return None

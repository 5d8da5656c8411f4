"""Kernel names shortened as profilers show them; full names elsewhere."""

from __future__ import annotations

import pytest

from tuiprof.report.names import short_kernel_name
from tuiprof.report.views import VIEWS


@pytest.mark.parametrize(
    ("full", "short"),
    [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >"
         "(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "vectorized_elementwise_kernel<CUDAFunctor_add>"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
         "at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, "
         "float, float, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3>)", "vectorized_elementwise_kernel<DivFunctor>"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>"
         "(at::TensorIteratorBase&, float)::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::"
         "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, at::detail::Array<char*, 2>)",
         "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
         "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
         "reduce_kernel<MeanOps>"),
        ("void at::native::(anonymous namespace)::indexSelectLargeIndex<long, long, unsigned int, 1, 1, -2, true>"
         "(at::cuda::detail::TensorInfo<long, unsigned int>, long)", "indexSelectLargeIndex"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1>(cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1::Params)",
         "Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1>"),
        ("void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)", "bn_fw_tr_1C11_singleread"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
        ("volta_sgemm_64x64_nn", "volta_sgemm_64x64_nn"),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "triton_red_fused_add_mean_mul_pow_rsqrt_0"),
    ],
)
def test_short_kernel_names(full: str, short: str) -> None:
    assert short_kernel_name(full) == short


def test_tables_show_short_names_and_keep_full_ones() -> None:
    column = VIEWS["kernels"].column("name")
    full = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int)"
    assert column.format(full) == "vectorized_elementwise_kernel<FillFunctor>"
    assert not column.numeric  # filters and layout treat it as the name column


def test_module_names_are_cut_in_the_middle_keeping_their_index() -> None:
    from tuiprof.report.names import fit_name

    assert fit_name("Sequential_5", 12) == "Sequential_5"
    assert fit_name("Sequential_5", 9) == "Sequen…_5"
    assert fit_name("BatchNorm2d_10", 8) == "Batc…_10"
    assert fit_name("Sequential", 6) == "Seq…al"  # no index: head and tail
    assert fit_name("…/Sequential_5/BasicBlock_7", 10) == "…/Basic…_7"
    assert fit_name("…/Sequential_5/BasicBlock_7", 14) == "…/BasicBlock_7"
    assert fit_name("Conv2d_1", 3) == "Co…"
    assert fit_name("Conv2d_1", 1) == "…" and fit_name("Conv2d_1", 0) == ""
    assert all(len(fit_name("Linear_123456", w)) <= w for w in range(12))

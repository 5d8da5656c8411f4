"""Kernel names shortened as profilers show them; full names elsewhere."""

from __future__ import annotations

import pytest

from tuiprof.report.names import fit_name, short_kernel_name
from tuiprof.report.views import TRACE_VIEWS


@pytest.mark.parametrize(
    ("full", "short"),
    [
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >"
            "(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
            "vectorized_elementwise_kernel<CUDAFunctor_add>",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
            "at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, "
            "float, float, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3>)",
            "vectorized_elementwise_kernel<DivFunctor>",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>"
            "(at::TensorIteratorBase&, float)::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::"
            "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, at::detail::Array<char*, 2>)",
            "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
            "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
            "reduce_kernel<MeanOps>",
        ),
        (
            "void at::native::(anonymous namespace)::indexSelectLargeIndex<long, long, unsigned int, 1, 1, -2, true>"
            "(at::cuda::detail::TensorInfo<long, unsigned int>, long)",
            "indexSelectLargeIndex",
        ),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1>(cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1::Params)",
            "Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1>",
        ),
        (
            "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
            "bn_fw_tr_1C11_singleread",
        ),
        (
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
        ),
        ("volta_sgemm_64x64_nn", "volta_sgemm_64x64_nn"),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "triton_red_fused_add_mean_mul_pow_rsqrt_0"),
    ],
)
def test_short_kernel_names(full: str, short: str) -> None:
    assert short_kernel_name(full) == short


def test_tables_show_short_names_and_keep_full_ones() -> None:
    column = TRACE_VIEWS["kernels"].column("name")
    full = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int)"
    assert column.format(full) == "vectorized_elementwise_kernel<FillFunctor>"
    assert not column.numeric  # filters and layout treat it as the name column


def test_module_names_are_cut_in_the_middle_keeping_their_index() -> None:
    from tuiprof.report.names import fit_name

    assert fit_name("Sequential_5", 12) == "Sequential_5"
    assert fit_name("Sequential_5", 9) == "Sequen…_5"
    assert fit_name("BatchNorm2d_10", 8) == "Batc…_10"
    assert fit_name("Sequential", 6) == "Seq…al"  # no index: head and tail
    assert fit_name("…/Sequential_5/BasicBlock_7", 10) == "BasicBl…_7"  # one cut: the level on its own
    assert fit_name("…/Sequential_5/BasicBlock_7", 14) == "…/BasicBlock_7"
    assert fit_name("Conv2d_1", 3) == "Co…"
    assert fit_name("Conv2d_1", 1) == "…" and fit_name("Conv2d_1", 0) == ""
    assert all(len(fit_name("Linear_123456", w)) <= w for w in range(12))


def test_the_cutting_rule_keeps_what_tells_rows_apart() -> None:
    from tuiprof.report.names import fit_name

    path = "ResNet_0/Sequential_5/BasicBlock_1/Conv2d_2"
    assert fit_name(path, 36) == "…/Sequential_5/BasicBlock_1/Conv2d_2"  # the tail of a path
    assert fit_name(path, 24) == "…/BasicBlock_1/Conv2d_2"
    assert fit_name("autograd::engine::evaluate_function: ConvolutionBackward0", 24) == "…: ConvolutionBackward0"
    assert fit_name("aten::convolution_backward", 22) == "…convolution_backward"  # the namespace goes first
    assert (
        fit_name("vectorized_elementwise_kernel<CUDAFunctor_add>", 26) == "vectoriz…<CUDAFunctor_add>"
    )  # the argument outlasts the base
    assert fit_name("vectorized_elementwise_kernel<GeluCUDAKernelImpl>", 22) == "vectori…<GeluCU…lImpl>"
    assert (
        fit_name("ResNet_0/Conv2d_3 → ResNet_0/Conv2d_4", 23) == "…/Conv2d_3 → …/Conv2d_4"
    )  # both sides of an aligned row
    assert (
        fit_name("cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1", 21) == "cutlass_80…_tn_align1"
    )  # head and tail
    names = [
        path,
        "autograd::engine::evaluate_function: ConvolutionBackward0",
        "vectorized_elementwise_kernel<CUDAFunctor_add>",
        "a → b",
        "x" * 80,
        "Linear_123456",
        "漢字の名前_12",
    ]
    assert all(len(fit_name(name, width)) <= width for name in names for width in range(0, 60))


def test_names_that_would_read_the_same_show_where_they_differ() -> None:
    from tuiprof.report.names import fit_names

    tiles = [
        f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{t}_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
        for t in ("128x128x64", "128x64x64", "64x64x64", "256x128x64")
    ]
    for width in (20, 24, 30, 40):
        cut = fit_names(tiles, width)
        assert len(set(cut.values())) == len(tiles) and all(len(c) <= width for c in cut.values()), cut
    assert fit_names(tiles, 30)[tiles[0]] == "sm90_xm…ze128x128x6…_5x_cublas"  # head, where they differ, tail


# ------------------------------------------------------------------ one cutting rule, every surface
# A trace whose names share long prefixes and differ only at their end or in their middle, as
# real ones do (a vision transformer's module paths, cuBLAS kernels that differ in their tile
# size, autograd's evaluate_function wrappers): cut from the right, they read the same.

ENCODER = ("Owlv2ForObjectDetection_0", "Owlv2Model_0", "Owlv2VisionTransformer_0", "Owlv2Encoder_0")
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::{0}<float>, at::detail::Array<char*, 3> >"
    "(int, at::native::{0}<float>, at::detail::Array<char*, 3>)"
)
KERNELS = (
    *(ELEMENTWISE.format(functor) for functor in ("CUDAFunctor_add", "MulFunctor", "FillFunctor", "AbsFunctor")),
    *(
        f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{tile}_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
        for tile in ("128x128x64", "128x64x64", "64x64x64")
    ),
    *(
        f"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_{tile}_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_{tile}_tn_align8::Params)"
        for tile in ("128x64_64x3", "64x64_64x6")
    ),
)
# Template instances that differ only in numbers: the same short name, told apart by their arguments.
CONVOLUTIONS = tuple(
    f"void implicit_convolve_sgemm<float, float, {tile}, 3, 3, 5, 1, false, true, true>(int, int, int, float const*, "
    "int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int)"
    for tile in ("1024, 6, 7", "128, 6, 7")
)
BACKWARD = tuple(
    f"autograd::engine::evaluate_function: {name}"
    for name in (
        "ConvolutionBackward0",
        "AddmmBackward0",
        "NativeLayerNormBackward0",
        "torch::autograd::AccumulateGrad",
    )
)


def names_trace(path, scale: float = 1.0):
    """Three encoder layers of three Linear each (9 module paths that differ only in their
    last levels), each Linear's addmm launching one of 9 kernels; backward wrappers in the root,
    two of them launching convolutions that differ only in their template's numbers."""
    from tests.helpers.gpu_trace import GpuTrace

    trace = GpuTrace()
    parent = None
    for depth, name in enumerate(ENCODER):
        parent = trace.module(name, depth, (1000 if depth < 3 else 905) - 2 * depth, parent)
    linear = 0
    for layer in range(3):
        start = 10 + layer * 300
        block = trace.module(f"Owlv2EncoderLayer_{layer}", start, 290, parent)
        attention = trace.module(f"Owlv2Attention_{layer}", start + 1, 285, block)
        for _ in range(3):
            ts = start + 2 + (linear % 3) * 90
            trace.module(f"Linear_{linear}", ts, 85, attention)
            launcher = trace.op("aten::addmm", ts + 1, 80)
            trace.launch(launcher, KERNELS[linear], ts + 2, 5, ts + 10, 20 * scale + linear)
            linear += 1
    for index, name in enumerate(BACKWARD):
        launcher = trace.op(name, 920 + 15 * index, 10 * scale + index)
        if index < len(CONVOLUTIONS):
            trace.launch(launcher, CONVOLUTIONS[index], 921 + 15 * index, 2, 925 + 15 * index, 5 * scale + index)
    trace.op("torch::autograd::AccumulateGrad", 985, 5)
    return trace.write(path)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    return str(names_trace(folder / "a.json")), str(names_trace(folder / "b.json", scale=2.0))


def _distinct(cells: list[str], full: list[str]) -> None:
    """As many different cells as different full names, each cut (else the test shows nothing)."""
    assert len(cells) == len(full), (cells, full)
    assert any("…" in cell for cell in cells), cells  # the surface did cut names
    assert len(set(cells)) == len(set(full)), sorted(cells)


def _output(capsys, *argv: str) -> str:
    from tuiprof import cli

    code = cli.main(list(argv))
    assert code == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _full_names(capsys, *argv: str) -> list[str]:
    import csv
    import io

    return [
        row.get("name") or row["path"] for row in csv.DictReader(io.StringIO(_output(capsys, *argv, "--format", "csv")))
    ]


@pytest.mark.parametrize("view", ["ops", "modules", "kernels"])
def test_plain_tables_keep_rows_apart(traces, capsys, view) -> None:
    full = _full_names(capsys, "summary", traces[0], "--view", view)
    text = _output(capsys, "summary", traces[0], "--view", view)
    body = [line for line in text.splitlines() if line.startswith("| ")][1:]  # ASCII rows after the header
    _distinct([line.split("|")[1].strip() for line in body], full)


@pytest.mark.parametrize("view", ["ops", "modules", "kernels"])
@pytest.mark.parametrize("width", [60, 80])
def test_terminal_tables_keep_rows_apart(traces, capsys, monkeypatch, view, width) -> None:
    import re

    from tuiprof.report import summary

    full = _full_names(capsys, "summary", traces[0], "--view", view)
    monkeypatch.setattr(summary, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(width))
    lines = _output(capsys, "summary", traces[0], "--view", view).splitlines()
    assert max(map(len, lines)) <= width
    rule = next(i for i, line in enumerate(lines) if "───" in line)
    body = [line for line in lines[rule + 1 :] if line.strip()][: len(full)]
    _distinct([re.split(r"\s{2,}", line.strip())[0] for line in body], full)


@pytest.mark.parametrize("view", ["modules", "kernels", "ops"])
def test_diff_text_keeps_rows_apart(traces, capsys, monkeypatch, view) -> None:
    import re

    from tuiprof.report import diff

    full = _full_names(capsys, "diff", *traces, "--view", view)
    piped = _output(capsys, "diff", *traces, "--view", view, "--format", "table", "--limit", "50")
    body = [line for line in piped.splitlines() if line.startswith("| ")][1:]
    _distinct([line.split("|")[1].strip() for line in body], full)
    monkeypatch.setattr(diff, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    lines = _output(capsys, "diff", *traces, "--view", view, "--format", "table", "--limit", "50").splitlines()
    assert max(map(len, lines)) <= 80
    rule = next(i for i, line in enumerate(lines) if "───" in line)
    body = [line for line in lines[rule + 1 :] if line.strip()][: len(full)]
    _distinct([re.split(r"\s{2,}", line.strip())[0] for line in body], full)


async def test_explorer_tables_keep_rows_apart_at_80x24(traces) -> None:
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.sources import FileSource
    from tuiprof.tui.widgets.row_table import RowTable

    def name_cells(table: RowTable) -> list[str]:
        width = table._cell_widths()[0]
        return [table._row_strip(i).text[:width].rstrip() for i in range(len(table.rows))]

    def full(table: RowTable) -> list[str]:
        return [str(row.get(table.columns[0].key)) for row in table.rows]

    app = ExplorerApp(FileSource(traces[0]))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key, table_id in (("4", "#kernels-table"), ("3", "#operators-table"), ("5", "#memory-ops")):
            await pilot.press(key)
            await pilot.pause()
            table = app.query_one(table_id, RowTable)
            _distinct(name_cells(table), full(table))
        await pilot.press("2")  # Modules: the root's operators beside the tree
        await pilot.pause()
        pane = next(t for t in app.query(RowTable) if t.id and "module" in t.id and t.rows)
        _distinct(name_cells(pane), full(pane))


def test_kernels_that_share_a_short_name_show_the_arguments_that_differ() -> None:
    from tuiprof.report.names import short_kernel_names

    wgrad = "void cudnn::cnn::wgrad_alg0_engine<float, 128, {}, 3, 3, {}, false, 512>(int, int, float const*, kernel_grad_params)"
    add = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<at::native::AddFunctor<long> >, at::detail::Array<char*, 2> >(int)",
    )
    names = [wgrad.format("6, 7", 5), wgrad.format("5, 5", 3), *add, ELEMENTWISE.format("MulFunctor")]
    short = short_kernel_names(names)
    assert short[names[0]] == "wgrad_alg0_engine<6, 7, 5>" and short[names[1]] == "wgrad_alg0_engine<5, 5, 3>"
    assert short[add[0]] == "vectorized_elementwise_kernel<AddFunctor<float>, Array<char*, 3>>"
    assert short[add[1]] == "vectorized_elementwise_kernel<BUnaryFunctor<AddFunctor<long> >, Array<char*, 2>>"
    assert short[names[-1]] == "vectorized_elementwise_kernel<MulFunctor>"  # alone with its short name: unchanged


def test_a_qualified_name_is_cut_once() -> None:
    """`…::native_batc…rm_backward` (the Modules view's operator pane) read as two fragments."""
    for name in ("aten::native_batch_norm_backward", "aten::max_pool2d_with_indices_backward", "a/b/Sequential_5"):
        for width in range(4, len(name)):
            shown = fit_name(name, width)
            assert shown.count("…") <= 1 and len(shown) <= width, (name, width, shown)
    assert fit_name("aten::native_batch_norm_backward", 26) == "native_batch…orm_backward"  # never shown as if whole


@pytest.mark.parametrize(
    ("label", "width", "shown"),
    [
        ("layer3.1.bn1 (BatchNorm2d)", 26, "layer3.1.bn1 (BatchNorm2d)"),
        ("layer3.1.bn1 (BatchNorm2d)", 20, "layer3.1.bn1"),  # the class goes first, never "bn1 (Ba…Norm2d)"
        ("layer3.1.bn1 (BatchNorm2d)", 9, "…1.bn1"),  # then the path's head, up to a level
        ("    layer3.0.downsample.0 (Conv2d)", 26, "    layer3.0.downsample.0"),  # a tree table's indent stays
        ("[compiled_0] (compiled, distributed)", 14, "[compiled_0]"),  # never "(compil…ibuted)"
    ],
)
def test_a_module_label_keeps_its_name_and_drops_its_bracket_first(label, width, shown) -> None:
    assert fit_name(label, width) == shown


def test_a_tree_row_names_a_module_less_its_parents_path() -> None:
    """At 60 columns the Modules tree showed ``…0`` and ``la…2`` for layer4.0 and layer1.0.2:
    under its parent's row a module is named by what tells it from its siblings."""
    from tuiprof.analysis.modules import ModuleNode
    from tuiprof.report.names import tree_label

    root = ModuleNode("ResNet_0", 0, qualified_name="model")
    layer4 = ModuleNode("Sequential_4", 1, parent=root, qualified_name="layer4")
    block = ModuleNode("BasicBlock_7", 2, parent=layer4, qualified_name="layer4.0")
    down = ModuleNode("Sequential_9", 3, parent=block, qualified_name="layer4.0.downsample")
    unnamed = ModuleNode("Linear_0", 1, parent=root)
    assert [tree_label(m) for m in (root, layer4, block, down, unnamed)] == [
        "model (ResNet)",
        "layer4 (Sequential)",
        "0 (BasicBlock)",
        "downsample (Sequential)",
        "Linear_0",
    ]

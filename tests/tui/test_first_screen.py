"""What `tuiprof open` shows with no argument is the product: a capture with every view filled
(issue 38), not a bare trace whose views say what they would show."""

from __future__ import annotations

from tuiprof import cli
from tuiprof.analysis import load_model


def test_the_default_sample_fills_every_view() -> None:
    model = load_model(cli.SAMPLE_TRACES / cli.DEFAULT_SAMPLE)
    modules = [node for node in model.modules.walk()]
    assert modules and all(node.qualified_name is not None for node in modules)  # layer4, not Sequential_5
    assert model.memory_categories  # torch's categories: the Memory view's stacked curve and what-ifs
    assert model.step_flops > 0 and model.backward_pass.counted  # FLOPs forward and backward
    assert len(model.steps) >= 3  # the steps' noise can be told (the findings' savings)
    assert not model.report.damaged and not model.report.skipped

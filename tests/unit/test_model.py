"""The analysis model is built once and then only read."""

from __future__ import annotations

import dataclasses

import pytest


def test_assigning_to_a_model_field_raises(resnet_model) -> None:
    steps = resnet_model.steps
    with pytest.raises(dataclasses.FrozenInstanceError):
        resnet_model.steps = []
    with pytest.raises(dataclasses.FrozenInstanceError):
        resnet_model.flops_source = "measured"
    assert resnet_model.steps is steps
    # what is computed on demand still is: the cached totals and the operator tables
    assert resnet_model.total_self_cpu_us == sum(resnet_model.calls.self_ns) / 1000
    assert resnet_model.operators(group_by_shape=True) is resnet_model.operators(group_by_shape=True)

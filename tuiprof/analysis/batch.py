"""How many samples one step of a trace processes: its batch.

A diff of a run at batch 16 against one at batch 32 must compare time per
sample, not per step, so each side's batch is read from the trace, in this
order of trust:

1. **a live capture's settings**: ``tuiprof live`` saves the length of the
   batch it fed the model (``batch_size`` in the trace's ``tuiprofLive``
   member);
2. **the DataLoader's batch**: the first operator on the same thread after the
   first ``enumerate(DataLoader)#...__next__`` returns whose data input is a
   tensor (the batch moved to the device, or fed to the model);
3. **the first module's input**: the first operator inside the first
   top-level ``nn.Module`` call (``with_stack=True``) whose data input is a
   tensor (``aten::conv2d`` of ``ResNet_0``, ``aten::linear`` of a transformer).

The batch is the leading dimension of that input; an operator's data input is
its first one, except :data:`DATA_INPUT`'s (``aten::embedding`` takes the
weight first).  A trace without a live member, DataLoader span or module tree
has no batch: guessing from its first operator (an ``aten::zeros``, a
buffer, an embedding's weight) is wrong too often, so the batch is unknown and
the diff says so.  Needs ``record_shapes=True`` (the Input Dims).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.model import TraceModel
from tuiprof.trace.schema import decode_member

DATALOADER_PREFIX = "enumerate(DataLoader)#"
# Operators whose data input is not their first one: name -> its position.
DATA_INPUT = {"aten::embedding": 1}
# How many calls are read for a tensor input before the batch is called unknown.
CALLS_SCANNED = 64


@dataclass(frozen=True)
class Batch:
    """A side's batch: ``size`` None when it cannot be known, ``source`` says
    where it was read (``ResNet_0's input: aten::conv2d [128, 3, 32, 32]``) or why not."""

    size: int | None
    source: str


def detect_batch(model: TraceModel) -> Batch:
    """The batch of one trace (see the module docstring for the rules)."""
    if model.live_batch_size:
        return Batch(model.live_batch_size, "the live capture's batch")
    if not model.info.record_shapes:
        return Batch(None, "recorded without record_shapes=True")
    found = _dataloader_batch(model)
    if found is None:
        found = _first_module_batch(model)
    if found is None:
        return Batch(None, "no DataLoader span, module tree or live capture to read it from")
    return found


def _dataloader_batch(model: TraceModel) -> Batch | None:
    calls = model.calls
    loader_codes = calls.name_codes(lambda name: name.startswith(DATALOADER_PREFIX))
    if not loader_codes:
        return None
    loaders = np.flatnonzero(np.isin(calls.column("name_id"), loader_codes))
    first = int(loaders[0])
    start = calls.column("start_ns")
    after = int(np.searchsorted(start, calls.end_ns[first], side="left"))
    same_thread = np.flatnonzero(calls.column("thread")[after:] == calls.thread[first]) + after
    return _batch_in(model, same_thread[:CALLS_SCANNED], "DataLoader batch")


def _first_module_batch(model: TraceModel) -> Batch | None:
    roots = [(min(rows), root) for root in model.modules.roots if (rows := root.subtree_operator_rows())]
    if not roots:
        return None
    _, root = min(roots, key=lambda pair: pair[0])
    rows = sorted(root.subtree_operator_rows())[:CALLS_SCANNED]
    return _batch_in(model, rows, f"{root.name}'s input")


def _batch_in(model: TraceModel, rows: Iterable[int], what: str) -> Batch | None:
    """The leading dimension of the first data input that is a tensor among ``rows``."""
    calls = model.calls
    for row in rows:
        name = calls.name(int(row))
        position = DATA_INPUT.get(name, 0)
        dims = decode_member(calls.input_texts(int(row))[0]) or []
        shape = dims[position] if position < len(dims) else None
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape) and shape[0] > 0:
            return Batch(shape[0], f"{what}: {name} {shape}")
    return None

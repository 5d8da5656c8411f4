#!/usr/bin/env python3
"""Make a large, valid trace by replicating a real one as a longer run.

Every event of the source (python frames, ops, kernels, flows, memory) is
written again per replica with timestamps shifted past the previous replica
and every id that joins events (External id, correlation, flow ids, Python
ids, Ev Idx, ProfilerStep numbers) shifted into a fresh range, so joins stay
within a replica and the result reads like more steps of the same run.

Events are written in Kineto's own layout (one member group per line, two-space
indented objects), so the benchmark reads the same bytes a real
``export_chrome_trace`` file holds.  Timestamps are shifted as decimals, never
through a float: ``ts`` on absolute epoch microseconds with nanosecond
decimals (the ns-resolution shape) keeps every digit of the source's text.

    python scripts/make_big_trace.py --size-mb 1024 --from ../shared/traces/X.json.gz -o /tmp/big.json

``--synthetic python-flow`` makes the fourth shape instead (issue 29): the mix of a
real with_stack inference trace of a diffusion transformer (not in this repo),
written by :func:`python_flow_events`: 56 % ``python_function`` (names ~47
characters; args ``Python parent id``, ``Python id``, ``Ev Idx``), 16 % ``ac2g``
flow events, 13 % ``cuda_runtime``, 11 % ``cpu_op``, 3 % kernels, 1 %
``user_annotation`` steps, ~243 bytes an event.

    python scripts/make_big_trace.py --size-mb 1024 --synthetic python-flow -o /tmp/pyflow.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from decimal import Decimal
from pathlib import Path

import orjson

ID_ARGS = ("External id", "external id", "correlation", "Python id", "Python parent id", "Ev Idx", "Record function id")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, required=True, help="approximate uncompressed size")
    parser.add_argument("--from", dest="source", type=Path, help="a real trace (.json or .json.gz)")
    parser.add_argument("--synthetic", choices=("python-flow",), help="make the python-and-flow-heavy shape instead")
    parser.add_argument("-o", "--output", type=Path, required=True, help=".json or .json.gz")
    args = parser.parse_args()
    if args.synthetic:
        return write_python_flow(args.output, args.size_mb)
    if args.source is None:
        parser.error("give --from TRACE or --synthetic python-flow")

    opener = gzip.open if args.source.name.endswith(".gz") else open
    with opener(args.source, "rb") as handle:
        document = json.load(handle, parse_float=Decimal)
    if isinstance(document, list):  # the old autograd profiler's bare array
        document = {"traceEvents": document}
    events = document.pop("traceEvents")
    timed = [
        e
        for e in events
        if e.get("ph") in ("X", "i", "s", "f")
        and isinstance(e.get("ts"), (int, Decimal))
        and e.get("name") != "Record Window End"
    ]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = int((end - start) * 101 / 100) + 10  # whole microseconds: integer ts stay integers
    id_span = 1 + max(
        [int(v) for e in events for k, v in (e.get("args") or {}).items() if k in ID_ARGS and isinstance(v, int)]
        + [int(e["id"]) for e in events if isinstance(e.get("id"), int)]
        + [0]
    )
    step_numbers = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_span = (max(step_numbers) - min(step_numbers) + 1) if step_numbers else 0
    one_copy = sum(len(kineto_text(e)) + 2 for e in events)
    replicas = max(1, round(args.size_mb * 1e6 / one_copy))
    metadata = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]

    out_open = gzip.open if args.output.name.endswith(".gz") else open
    with out_open(args.output, "wb") as out:
        head = orjson.dumps(document, default=float)[:-1]
        out.write(head + (b"," if len(head) > 1 else b"") + b'"traceEvents": [\n')
        first = True
        for event in metadata:
            out.write((b"" if first else b",\n") + kineto_text(event))
            first = False
        for k in range(replicas):
            chunk = []
            for event in body:
                chunk.append(kineto_text(_shift(event, k, span, id_span, step_span)))
            out.write((b"" if first else b",\n") + b",\n".join(chunk))
            first = False
        out.write(b"\n]}\n")
    size = args.output.stat().st_size
    print(f"{args.output}: {replicas} replicas of {len(body)} events, {size / 1e6:.0f} MB on disk", file=sys.stderr)
    return 0


def _member(key: str, value) -> bytes:
    if isinstance(value, Decimal):  # the source's own digits (ts, dur); other floats as floats
        text = format(value, "f") if key in ("ts", "dur") else orjson.dumps(float(value)).decode()
        return orjson.dumps(key) + b": " + text.encode()
    return orjson.dumps(key) + b": " + orjson.dumps(value, default=float)


def kineto_text(event: dict) -> bytes:
    """One event as libkineto's ChromeTraceLogger lays it out."""
    head = b", ".join(_member(k, v) for k, v in event.items() if k != "args")
    text = b"  {\n    " + head
    if "args" in event:
        members = b", ".join(_member(k, v) for k, v in event["args"].items())
        text += b',\n    "args": {\n      ' + members + b"\n    }"
    return text + b"\n  }"


def _shift(event: dict, k: int, span: int, id_span: int, step_span: int) -> dict:
    if k == 0:
        return event
    shifted = dict(event)
    if isinstance(shifted.get("ts"), (int, Decimal)):
        shifted["ts"] = shifted["ts"] + k * span
    if isinstance(shifted.get("id"), int):
        shifted["id"] = shifted["id"] + k * id_span
    args = shifted.get("args")
    if args:
        args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] = args[key] + k * id_span
        shifted["args"] = args
    if step_span:
        match = STEP.match(str(shifted.get("name", "")))
        if match:
            shifted["name"] = f"ProfilerStep#{int(match.group(1)) + k * step_span}"
    return shifted


# ------------------------------------------------------------------ the python-and-flow-heavy shape

# Frames of a diffusion transformer's forward, 47 characters on average.
FRAME_NAMES = (
    "torch/nn/modules/module.py(1750): _call_impl",
    "torch/nn/modules/module.py(1739): _wrapped_call_impl",
    "diffusers/models/attention_processor.py(588): forward",
    "diffusers/models/transformers/transformer_sd3.py(351): forward",
    "torch/nn/modules/linear.py(125): forward",
    "diffusers/models/attention.py(1165): forward",
    "nn.Module: JointTransformerBlock_7",
    "torch/nn/functional.py(2910): layer_norm",
)
OP_NAMES = (
    "aten::linear",
    "aten::addmm",
    "aten::layer_norm",
    "aten::scaled_dot_product_attention",
    "aten::gelu",
    "aten::add",
    "aten::mul",
    "aten::view",
    "aten::to",
    "aten::copy_",
    "aten::empty",
)
RUNTIME_NAMES = ("cudaLaunchKernel", "cudaStreamIsCapturing", "cudaMemcpyAsync")
KERNEL_NAMES = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int, T)",
    "flash_fwd_kernel",
)
PID, TID, STREAM = 2310871, 2310871, 7
EPOCH_US = 1733212800123456  # absolute epoch microseconds, as Kineto writes


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def python_flow_events(block: int) -> list[bytes]:
    """Block ``block`` of the shape: 100 events (one inference step's slice) in Kineto's layout.

    11 operators, each under a chain of 5 python frames (one block has a 6th): 56
    frames; each operator launches one runtime call and the first two of them one more
    (13); 8 runtime calls have their ac2g flow pair (16), 3 of those a kernel (3); one
    ``user_annotation`` spans the block (50 distinct names: a name per block would make the
    operator table 12,000 rows long at 300 MB, which no real trace has).  Ids are unique across blocks."""
    events: list[bytes] = []
    base = EPOCH_US * 1000 + block * 200_000  # ns: one block every 200 us
    python_id, ev_idx, external, correlation = block * 100, block * 100, block * 20, block * 20
    events.append(
        kineto_raw(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"denoise_step_{block % 50}",
                "pid": PID,
                "tid": TID,
                "ts": _us(base),
                "dur": _us(190_000),
            },
            {"External id": external, "Ev Idx": ev_idx},
        )
    )
    ev_idx += 1
    for op in range(11):
        start = base + 1000 + op * 17_000
        depth = 6 if op == 0 else 5
        parent = 0
        for level in range(depth):  # nested frames, outermost first
            python_id += 1
            events.append(
                kineto_raw(
                    {
                        "ph": "X",
                        "cat": "python_function",
                        "name": FRAME_NAMES[(op + level) % len(FRAME_NAMES)],
                        "pid": PID,
                        "tid": TID,
                        "ts": _us(start + level * 100),
                        "dur": _us(16_000 - level * 200),
                    },
                    {"Python parent id": parent, "Python id": python_id, "Ev Idx": ev_idx},
                )
            )
            parent, ev_idx = python_id, ev_idx + 1
        op_start = start + depth * 100 + 50
        external += 1
        events.append(
            kineto_raw(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": OP_NAMES[op],
                    "pid": PID,
                    "tid": TID,
                    "ts": _us(op_start),
                    "dur": _us(14_000),
                },
                {"External id": external, "Record function id": 0, "Ev Idx": ev_idx},
            )
        )
        ev_idx += 1
        for call in range(2 if op < 2 else 1):
            correlation += 1
            launch = op_start + 500 + call * 3000
            name = RUNTIME_NAMES[0] if call == 0 else RUNTIME_NAMES[1 + op % 2]
            events.append(
                kineto_raw(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": name,
                        "pid": PID,
                        "tid": TID,
                        "ts": _us(launch),
                        "dur": _us(2_500),
                    },
                    {"External id": external, "cbid": 211, "correlation": correlation},
                )
            )
            if op < 8 and call == 0:  # its flow pair; and 3 of them a kernel
                gpu_start = launch + 4_000
                events.append(
                    b'  {\n    "ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %s,\n    "cat": "ac2g", "name": "ac2g"\n  }'
                    % (correlation, PID, TID, _us(launch).encode())
                )
                events.append(
                    b'  {\n    "ph": "f", "id": %d, "pid": 0, "tid": %d, "ts": %s,\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }'
                    % (correlation, STREAM, _us(gpu_start).encode())
                )
                if op < 3:
                    events.append(
                        kineto_raw(
                            {
                                "ph": "X",
                                "cat": "kernel",
                                "name": KERNEL_NAMES[op],
                                "pid": 0,
                                "tid": STREAM,
                                "ts": _us(gpu_start),
                                "dur": _us(9_000),
                            },
                            {
                                "External id": external,
                                "device": 0,
                                "stream": STREAM,
                                "correlation": correlation,
                                "grid": [128, 4, 1],
                                "block": [128, 1, 1],
                                "est. achieved occupancy %": 50,
                            },
                        )
                    )
    return events


def kineto_raw(head: dict, args: dict) -> bytes:
    """:func:`kineto_text` for an event whose ``ts``/``dur`` are already decimal texts."""
    members = b", ".join(
        orjson.dumps(k) + b": " + (v.encode() if k in ("ts", "dur") else orjson.dumps(v)) for k, v in head.items()
    )
    text = b"  {\n    " + members
    if args:
        text += (
            b',\n    "args": {\n      '
            + b", ".join(orjson.dumps(k) + b": " + orjson.dumps(v) for k, v in args.items())
            + b"\n    }"
        )
    return text + b"\n  }"


def write_python_flow(output: Path, size_mb: float) -> int:
    out_open = gzip.open if output.name.endswith(".gz") else open
    written, block = 0, 0
    with out_open(output, "wb") as out:
        head = b'{\n  "schemaVersion": 1, "with_stack": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],\n  "traceEvents": [\n'
        out.write(head)
        written = len(head)
        first = True
        while written < size_mb * 1e6:
            text = b",\n".join(python_flow_events(block))
            text = (b"" if first else b",\n") + text
            out.write(text)
            written += len(text)
            first, block = False, block + 1
        out.write(b"\n]}\n")
    size = output.stat().st_size
    print(
        f"{output}: {block} blocks of 100 events, {size / 1e6:.0f} MB on disk, {size / (block * 100):.0f} bytes an event",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

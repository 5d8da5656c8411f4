"""Allocator snapshots: the analysis against answers known by construction (tests/helpers/snapshot_gen.py)
and against torch's own tools (torch.cuda._memory_viz, imported inside the tests only)."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pytest

from tests.helpers.snapshot_gen import make_snapshot, make_stacks
from tuiprof.analysis.snapshot import analyze_snapshot, frame_text, own_frame, stack_lines
from tuiprof.trace.snapshot import decode_snapshot, is_snapshot, read_snapshot


def _frames_key(frames: list[dict]) -> tuple:
    return tuple((f["filename"], f["line"], f["name"]) for f in frames)


def _stack_key(snapshot, stack: int) -> tuple:
    frames = snapshot.frames
    return tuple((frames.filename[i], frames.line[i], frames.name[i]) for i in snapshot.stacks.frame_ids(stack))


@pytest.mark.parametrize("awaiting", [False, True], ids=["frees-at-once", "frees-awaiting"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_peak_and_ooms_match_the_generator(seed: int, awaiting: bool) -> None:
    data, expected = make_snapshot(seed, steps=300, awaiting=awaiting, with_times=seed != 2)
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    stack_index = {_frames_key(frames): number for number, frames in enumerate(make_stacks())}
    for peak in model.peaks:
        assert (peak.allocated, peak.time_us) == (expected.peak_bytes[peak.device], expected.peak_time_us[peak.device])
        by_stack = {stack_index[_stack_key(model.snapshot, g.stack)]: g.bytes for g in peak.groups}
        assert by_stack == expected.peak_by_stack[peak.device]
        assert sum(g.bytes for g in peak.groups) == peak.allocated
        assert [g.bytes for g in peak.groups] == sorted((g.bytes for g in peak.groups), reverse=True)
    for timeline in model.timelines:
        assert timeline.allocated[-1] == expected.live_end[timeline.device]
        assert timeline.reserved[-1] == expected.reserved_end[timeline.device]
    want = [
        (o["device"], o["requested"], o["allocated"], o["device_free"], o["largest_free_block"], o["reserved"])
        for device in range(2)
        for o in expected.ooms
        if o["device"] == device
    ]
    got = [(o.device, o.requested, o.allocated, o.device_free, o.largest_free_block, o.reserved) for o in model.ooms]
    assert got == want and got
    assert all(sum(g.bytes for g in o.held_by) == o.allocated for o in model.ooms)


def test_memory_held_before_the_trace_counts_from_its_start() -> None:
    """A free whose alloc fell out of the ring buffer, and a block active at the end that the trace
    never allocated: both held from the first entry."""
    frames = make_stacks()[0]
    data = {
        "segments": [
            {
                "device": 0,
                "address": 0x1000,
                "total_size": 4096,
                "stream": 0,
                "segment_type": "small",
                "blocks": [
                    {
                        "address": 0x1000,
                        "size": 1024,
                        "requested_size": 1000,
                        "state": "active_allocated",
                        "frames": frames,
                    },
                    {"address": 0x1400, "size": 3072, "requested_size": 0, "state": "inactive", "frames": []},
                ],
            }
        ],
        "device_traces": [
            [
                {"action": "alloc", "addr": 0x1400, "size": 512, "stream": 0, "frames": frames, "time_us": 10},
                {
                    "action": "free_completed",
                    "addr": 0x1800,
                    "size": 2048,
                    "stream": 0,
                    "frames": frames,
                    "time_us": 20,
                },
                {"action": "free_completed", "addr": 0x1400, "size": 512, "stream": 0, "frames": frames, "time_us": 30},
            ]
        ],
    }
    model = analyze_snapshot(decode_snapshot(data, "ring.pickle"))
    assert model.timelines[0].allocated.tolist() == [1024 + 2048 + 512, 1024 + 512, 1024]
    assert (model.peaks[0].allocated, model.peaks[0].time_us) == (3584, 10)
    assert model.timelines[0].reserved.tolist() == [4096, 4096, 4096]


def test_torch_memory_viz_agrees_on_the_peak_and_its_stacks() -> None:
    """Oracle: torch's filter_alloc_free_pairs on every prefix of a device's trace leaves the
    allocations live then; the largest sum is the peak, its frames (torch's own format) the stacks."""
    from torch.cuda import _memory_viz as viz

    data, _ = make_snapshot(4, steps=250)
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    for device, trace in enumerate(data["device_traces"]):
        best, best_stacks = -1, {}
        for end in range(1, len(trace) + 1):
            left = viz.filter_alloc_free_pairs({"device_traces": [list(trace[:end])], "segments": []})["device_traces"][
                0
            ]
            live = [e for e in left if e["action"] == "alloc"]
            total = sum(e["size"] for e in live)
            if total > best:
                best, best_stacks = total, {}
                for e in live:
                    key = ";".join(viz._frames_fmt(e["frames"]))
                    best_stacks[key] = best_stacks.get(key, 0) + e["size"]
        peak = model.peaks[device]
        frames = model.snapshot.frames
        ours = {
            ";".join(
                viz._frames_fmt(
                    [
                        {"filename": frames.filename[i], "line": frames.line[i], "name": frames.name[i]}
                        for i in model.snapshot.stacks.frame_ids(g.stack)
                    ]
                )
            ): g.bytes
            for g in peak.groups
        }
        assert peak.allocated == best
        assert ours == best_stacks


def test_torch_segsum_agrees_on_segments() -> None:
    """Oracle: memory_viz's flamegraph lines (requested bytes by state) and segsum's accounting."""
    from torch.cuda import _memory_viz as viz

    data, _ = make_snapshot(5, steps=250, awaiting=True)
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    lines = viz.memory(data, format_flamegraph=lambda text: text).splitlines()
    allocated = sum(
        int(line.rsplit(" ", 1)[1]) for line in lines if ";active_allocated;" in line and "<gaps>" not in line
    )
    assert sum(s.allocated for s in model.segment_use) == allocated
    summary = viz.segsum(data)  # raises on its own accounting errors
    assert f"segments: {len(model.segment_use)}\n" in summary
    assert [s.reserved for s in model.segment_use] == [s["total_size"] for s in data["segments"]]
    for use, segment in zip(model.segment_use, data["segments"]):
        free = [b["size"] for b in segment["blocks"] if b["state"] == "inactive"]
        assert use.largest_free_block == max(free, default=0)


def test_frames_are_interned_once_and_fx_fields_kept() -> None:
    data, _ = make_snapshot(0, steps=200)
    snapshot = decode_snapshot(data, "gen.pickle")
    distinct = {tuple(sorted(f.items())) for frames in make_stacks() for f in frames}
    assert len(snapshot.frames) == len(distinct)
    assert len(snapshot.stacks) == len(make_stacks()) + 1  # and the empty stack
    fx_stack = next(
        s for s in range(1, len(snapshot.stacks)) if any("addmm_1" in line for line in stack_lines(snapshot, s))
    )
    assert "        x = self.fc(x)" in stack_lines(snapshot, fx_stack)
    assert frame_text(snapshot, own_frame(snapshot, fx_stack)).startswith(
        "/home/user/model.py:15 layer5_forward [fx call_function addmm_1]"
    )


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("compressed", [False, True], ids=["pickle", "pickle.gz"])
def test_protocols_and_gzip_read_alike(tmp_path: Path, protocol: int, compressed: bool) -> None:
    data, expected = make_snapshot(3, steps=120)
    payload = pickle.dumps(data, protocol=protocol)
    path = tmp_path / ("snap.pickle.gz" if compressed else "snap.pickle")
    path.write_bytes(gzip.compress(payload) if compressed else payload)
    assert is_snapshot(path)
    model = analyze_snapshot(read_snapshot(path))
    assert {p.device: p.allocated for p in model.peaks} == expected.peak_bytes


def test_a_snapshot_is_told_by_content_not_name(tmp_path: Path) -> None:
    data, _ = make_snapshot(0, steps=20)
    named_like_a_trace = tmp_path / "run.pt.trace.json"
    named_like_a_trace.write_bytes(pickle.dumps(data))
    named_like_a_snapshot = tmp_path / "trace.pickle"
    named_like_a_snapshot.write_text('{"traceEvents": []}')
    assert is_snapshot(named_like_a_trace)
    assert not is_snapshot(named_like_a_snapshot)


def test_two_snapshots_compare_at_their_peaks_by_stack(tmp_path: Path) -> None:
    """B is A with one allocation of a new stack held from the first entry: B's peak is A's plus
    its size, and it is the only stack that changed."""
    import copy

    from tuiprof.analysis.snapshot import diff_snapshots
    from tuiprof.report.snapshot import diff_lines

    a_data, expected = make_snapshot(6, steps=200)
    device = max(expected.peak_bytes, key=expected.peak_bytes.get)
    b_data = copy.deepcopy(a_data)
    extra = [{"filename": "/home/user/cache.py", "line": 7, "name": "keep_forever"}]
    b_data["device_traces"][device].insert(
        0,
        {
            "action": "alloc",
            "addr": 0x10,
            "size": 3 << 20,
            "stream": 0,
            "frames": extra,
            "time_us": b_data["device_traces"][device][0]["time_us"] - 1,
        },
    )
    a, b = (analyze_snapshot(decode_snapshot(d, name)) for d, name in ((a_data, "a.pickle"), (b_data, "b.pickle")))
    diff = diff_snapshots(a, b)
    assert (diff.a_peak.allocated, diff.b_peak.allocated) == (
        expected.peak_bytes[device],
        expected.peak_bytes[device] + (3 << 20),
    )
    assert [(r.frames, r.change) for r in diff.changes if r.change] == [
        ((("/home/user/cache.py", 7, "keep_forever"),), 3 << 20)
    ]
    assert diff_lines(diff)[0].endswith("the largest growth: cache.py:7 keep_forever +3.00 MiB")


def test_two_snapshots_compare_by_module_too() -> None:
    """Two runs of the module stacks (different seeds): bytes per module path at each side's
    highest peak are the generator's per-stack bytes summed by each stack's hand-written path."""
    from tuiprof.analysis.snapshot import diff_snapshots
    from tuiprof.report.snapshot import diff_document, diff_lines

    sides = [make_snapshot(seed, steps=200, modules=True) for seed in (3, 5)]
    models = [analyze_snapshot(decode_snapshot(data, f"{seed}.pickle")) for seed, (data, _) in zip((3, 5), sides)]
    diff = diff_snapshots(*models)
    wanted: dict[tuple[str, ...], list[int]] = {}
    for side, ((_, expected), peak) in enumerate(zip(sides, (diff.a_peak, diff.b_peak))):
        for stack, size in expected.peak_by_stack[peak.device].items():
            wanted.setdefault(tuple(expected.stack_modules[stack]), [0, 0])[side] += size
    assert {m.path: [m.a, m.b] for m in diff.modules} == wanted
    assert any(m.change for m in diff.modules)
    lines = diff_lines(diff, limit=50)
    assert any("module (its forward's file)" in line for line in lines)
    document = diff_document(diff, None)
    assert {tuple(m["module"]): [m["a_bytes"], m["b_bytes"]] for m in document["modules"]} == wanted


def test_a_window_looks_for_the_peak_and_ooms_inside_it_only() -> None:
    from tuiprof.analysis.snapshot import Window

    data, expected = make_snapshot(7, steps=300)
    first = min(time for curve in expected.curve.values() for time, _ in curve)
    window = Window(500.0, 1400.0)
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"), window)
    for peak in model.peaks:
        inside = [(live, -time) for time, live in expected.curve[peak.device] if 500 <= time - first <= 1400]
        live, time = max(inside)
        assert (peak.allocated, peak.time_us) == (live, -time)
    assert model.ooms and all(500 <= o.time_us - first <= 1400 for o in model.ooms)
    everything = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    assert len(model.ooms) < len(everything.ooms)


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("compressed", [False, True], ids=["pickle", "pickle.gz"])
def test_reading_tells_its_progress_up_to_the_whole_file(tmp_path: Path, protocol: int, compressed: bool) -> None:
    data, _ = make_snapshot(2, steps=100)
    payload = pickle.dumps(data, protocol=protocol)
    path = tmp_path / "snap.pickle"
    path.write_bytes(gzip.compress(payload) if compressed else payload)
    seen: list[tuple[int, int]] = []
    read_snapshot(path, lambda done, total: seen.append((done, total)))
    size = path.stat().st_size
    assert seen and seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_an_oom_is_told_fragmented_or_full_from_the_generators_figures() -> None:
    """The generator fails a request when no gap in its segments fits it and a new segment would
    pass the capacity: fragmented when its gaps plus the GPU's free bytes would have held it."""
    from tuiprof.report.snapshot import summary_lines

    data, expected = make_snapshot(5, steps=300)  # a seed with both kinds
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    want = [
        o["reserved"] - o["allocated"] + o["device_free"] >= o["requested"] > o["largest_free_block"]
        for device in range(2)
        for o in expected.ooms
        if o["device"] == device
    ]
    assert [o.fragmented for o in model.ooms] == want
    assert True in want and False in want  # both kinds occur
    cause = next(
        line
        for line in summary_lines(model)
        if line.startswith("  fragmentation:") or line.startswith("  the GPU was full:")
    )
    assert cause.startswith("  fragmentation:" if model.ooms[0].fragmented else "  the GPU was full:")


@pytest.mark.parametrize("state", ["active_pending_free", "active_awaiting_free"])
def test_a_block_pending_its_free_is_held_in_either_spelling(state: str) -> None:
    """torch writes active_pending_free (Module.cpp); its docstring says active_awaiting_free."""
    data = {
        "segments": [
            {
                "device": 0,
                "address": 0,
                "total_size": 2048,
                "stream": 0,
                "blocks": [
                    {"address": 0, "size": 1024, "requested_size": 1024, "state": state, "frames": []},
                    {"address": 1024, "size": 1024, "requested_size": 0, "state": "inactive", "frames": []},
                ],
            }
        ],
        "device_traces": [[]],
    }
    model = analyze_snapshot(decode_snapshot(data, "pending.pickle"))
    assert (model.peaks[0].allocated, model.peaks[0].reserved) == (1024, 2048)
    assert model.segment_use[0].allocated == 0  # requested bytes of active_allocated blocks, as segsum counts


def test_module_forward_frames_name_modules_and_the_peak_is_grouped_by_them() -> None:
    """Paths written by hand in the generator (make_module_stacks): nn.Module forwards called
    through module.py, a helper named forward that is no module, an FX node's original trace."""
    from tests.helpers.snapshot_gen import make_module_stacks
    from tuiprof.analysis.snapshot import module_path

    data, expected = make_snapshot(3, steps=300, modules=True)
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    stack_index = {_frames_key(frames): number for number, frames in enumerate(make_module_stacks()[0])}
    for peak in model.peaks:
        want: dict[tuple[str, ...], int] = {}
        for stack, size in expected.peak_by_stack[peak.device].items():
            want[expected.stack_modules[stack]] = want.get(expected.stack_modules[stack], 0) + size
        assert {m.path: m.bytes for m in peak.modules} == want
        assert [m.bytes for m in peak.modules] == sorted(want.values(), reverse=True)
        for group in peak.groups:
            assert (
                module_path(model.snapshot, group.stack)
                == expected.stack_modules[stack_index[_stack_key(model.snapshot, group.stack)]]
            )
    assert len({m.path for p in model.peaks for m in p.modules}) >= 3

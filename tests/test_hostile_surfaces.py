"""Hostile input on the surfaces beside `summary` (issue 30): `diff`, `timeline`, the
parent links every command walks, and the option checks.  Each case: one clean line
and exit 2, or a finished run with the damage said; never a hang, never a traceback."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import threading

import numpy as np
import pytest

from tests.conftest import SAMPLES
from tests.test_hostile import PY, ROOT, one_line_exit_2, tuiprof
from tuiprof.analysis.arrays import break_cycles, nearest_ancestor

GLOO_RANK1 = SAMPLES / "ddp_gloo_2ranks" / "train_ddp_gloo.rank1.pt.trace.json.gz"


def _compact(events: list[dict]) -> bytes:
    return json.dumps({"traceEvents": events}, separators=(",", ":")).encode()


# ---------------------------------------------------------------- parent links that loop


def _loops_by_walking(parent: list[int]) -> int:
    """Cycles of a parent list, found by walking each chain in plain Python (the oracle)."""
    state = [0] * len(parent)  # 0 unseen, 1 on the current walk, 2 done
    cycles = 0
    for start in range(len(parent)):
        path, node = [], start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = parent[node]
        cycles += node >= 0 and state[node] == 1
        for seen in path:
            state[seen] = 2
    return cycles


@pytest.mark.parametrize("seed", range(40))
def test_break_cycles_cuts_one_link_per_loop(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    parent = [rng.choice([-1, rng.randrange(n)]) if rng.random() < 0.6 else rng.randrange(n) for _ in range(n)]
    key = [rng.randrange(8) for _ in range(n)]  # ties: the lower index is cut
    repaired, cut = break_cycles(np.array(parent, dtype=np.int64), np.array(key, dtype=np.int64))
    assert cut == _loops_by_walking(parent)
    changed = [i for i in range(n) if repaired[i] != parent[i]]
    assert len(changed) == cut and all(repaired[i] == -1 for i in changed)
    assert _loops_by_walking(repaired.tolist()) == 0
    for i in changed:  # the cut member is the one of least (key, index) in its loop
        loop, node = [i], parent[i]
        while node != i:
            loop.append(node)
            node = parent[node]
        assert (key[i], i) == min((key[m], m) for m in loop)


def test_nearest_ancestor_never_spins_on_a_loop() -> None:
    parent = np.array([-1, 0, 3, 2], dtype=np.int64)  # 2 -> 3 -> 2
    wanted = np.array([True, False, False, False])
    answer: list[list[int]] = []
    walk = threading.Thread(target=lambda: answer.append(nearest_ancestor(parent, wanted).tolist()), daemon=True)
    walk.start()
    walk.join(10)  # main: spins forever (a daemon thread, so a regression fails instead of hanging the suite)
    assert answer == [[-1, 0, -1, -1]]


def _looping_frames() -> bytes:
    """An nn.Module frame and two Python frames whose ids point at each other (2 -> 3 -> 2)."""
    def frame(name, ts, dur, args):
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}
    return _compact([
        frame("nn.Module: M", 0, 9, {"Python id": 1}),
        frame("f", 1, 7, {"Python id": 2, "Python parent id": 3}),
        frame("g", 2, 5, {"Python id": 3, "Python parent id": 2}),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
    ])


def _gloo_rank1_with_a_flipped_bit() -> bytes:
    """The 2-rank gloo sample's rank 1 with one bit flipped: frame 2's parent id 1 -> 3,
    and frame 3 descends from frame 2."""
    text = gzip.decompress(GLOO_RANK1.read_bytes())
    before = b'"Python parent id": 1, "Python id": 2,'
    assert text.count(before) == 1
    return text.replace(before, b'"Python parent id": 3, "Python id": 2,')


@pytest.mark.parametrize("make", [_looping_frames, _gloo_rank1_with_a_flipped_bit], ids=["hand-made", "gloo-bit-flip"])
@pytest.mark.parametrize("command", [["summary", "--view", "modules"], ["timeline"], ["diff", "--format", "csv"]])
def test_python_parent_ids_that_loop_are_cut_and_counted(tmp_path, make, command: list[str]) -> None:
    path = tmp_path / "loop.json"
    path.write_bytes(make())
    args = [command[0], str(path), *([str(path)] if command[0] == "diff" else []), *command[1:]]
    result = tuiprof(*args, timeout=30)  # main: spins forever in arrays.nearest_ancestor
    assert result.returncode == 0, result.stderr
    assert b"Python parent id links that loop (1)" in result.stderr or command[0] != "summary"


def test_a_parent_loop_is_reported_as_a_repair(tmp_path) -> None:
    from tuiprof.analysis import load_model

    path = tmp_path / "loop.json"
    path.write_bytes(_looping_frames())
    model = load_model(path)
    assert model.report.repaired == 1 and [n.name for n in model.modules.walk()] == ["M"]

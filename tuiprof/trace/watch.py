"""The watch history: the append-only file ``tuiprof run --watch DIR`` writes as a job runs.

``DIR/watch.jsonl`` holds one JSON object per line, each written whole with
one ``write()`` on a file opened ``O_APPEND`` (a line is far below the size
a local filesystem appends atomically), so a reader may read it while the
job writes it: a last line without its newline is a line being written, or
the last words of a crashed job, and is left out.  The format is versioned
and every line is checked on read (the file is input: a line that does not
fit is one clear error naming the line, never a traceback).

Version 2, line by line (times in seconds; ``docs/watch.md`` is the reference):

- first line, the header:
  ``{"format": "tuiprof-watch", "version": 1, "pid": 123, "started": 1733350000.0, "what": "train.py", "settings": {...}}``
- a step, one per optimizer step (short keys: there are millions):
  ``{"s": 51, "t": 12.5, "w": 0.0213, "d": 0.0101}`` -- step number (1 = the
  first optimizer step), when it ended (since the watch started), its wall
  time, the time spent in ``DataLoader.__next__`` within it (absent: no
  DataLoader), ``"q"`` the time its thread waited for a CPU (version 2, Linux:
  the run delay of ``/proc/thread-self/schedstat``; absent: not known), and
  ``"p": 1`` when the profiler ran (or wrote a trace) in it -- such steps are
  slower by the profiler, and the slow rule skips them;
- a step's device time, read later from a CUDA event pair without a sync:
  ``{"g": 51, "w": 0.0198}``;
- an event: ``{"e": "trigger", "step": 62, "trigger": "slow", "why": "...", "first_slow": 58}``
  (``first_slow``: a slow trigger's first slow step),
  ``{"e": "capture", "trigger": "slow", "first_step": 64, "last_step": 66, "path": "step000064-slow.pt.trace.json.gz", "bytes": 81234}``
  (under torchrun ``path`` is the capture's run directory, ``step000064-slow``, one trace per rank),
  ``{"e": "dropped", "path": "...", "why": "..."}``, ``{"e": "failure", "step": 64, "what": "..."}``,
  ``{"e": "end", "step": 80, "status": "finished"}`` (status: finished, crashed, interrupted;
  version 3: terminated, by SIGTERM or SIGHUP, and killed, written by a reader, below).

Version 2 (issue 35): the slow rule judges a step's own time (its wall time less
``q``) against a baseline of normal steps and names the first slow step, and the
healthy window may be taken again (the earlier one is ``dropped``; the healthy
window is the last one kept).  A version-1 reader would compare with the dropped
one, so the version went up; version 1 is still read (its rule is the old one).
The header's ``settings`` are checked like every field (a value of the wrong type
is an error naming line 1): they are printed.

Version 3 (issue 42): every history ends with an ``end`` line.  The job writes it when the
script ends, crashes, or gets SIGINT, SIGTERM or SIGHUP (``terminated``); a job killed without
a word (SIGKILL, the OOM killer) cannot, so the next reader does: the job holds an exclusive
``flock`` on its history while it runs (the header says ``"flock": true``), the kernel drops
it with the last process holding it, and a reader that gets the lock, and may write the file,
appends ``{"e": "end", "step": N, "status": "killed"}`` (a line the kill cut short is removed
first: the job cannot finish it).  A version-2 reader would refuse the new statuses by name,
so the version went up.

Reads are bounded: the file is read in pieces of :data:`CHUNK_BYTES`, a line may hold
:data:`MAX_LINE` bytes, and only a regular file is read (a planted FIFO would block).

Imports neither torch nor Textual: ``summary`` and ``open`` read it.
"""

from __future__ import annotations

import fcntl
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import orjson

from tuiprof.errors import TraceError

HISTORY_NAME = "watch.jsonl"
REQUEST_NAME = "capture.request"  # ``tuiprof capture DIR`` creates it; the watched process consumes it
FORMAT = "tuiprof-watch"
VERSION = 3
TRIGGERS = ("healthy", "slow", "demand", "every")
END_STATUSES = ("finished", "crashed", "interrupted", "terminated", "killed")
# The header's settings and what each must be: a whole number >= 0, a number >= 0, or true/false.
# Others are left out (a later tuiprof's); ``ratio`` must also be over 1 (a slow rule's RATIO).
WHOLE_SETTINGS = ("window", "held", "warmup_steps", "every", "profiler_warmup", "active", "keep", "cooldown")
NUMBER_SETTINGS = ("ratio", "disk_mb")
FLAG_SETTINGS = ("catch",)
MAX_LINE = 64 * 1024  # a longer line is not one tuiprof wrote
CHUNK_BYTES = 16 << 20  # read at a time: a planted 3 GB history costs no 3 GB of memory


def history_path(directory: str | os.PathLike[str], rank: int = 0) -> Path:
    """The history of ``directory``; under torchrun each rank writes its own, rank 0's is the one
    ``open``/``summary`` read (rank 0 decides the captures, see :mod:`tuiprof.capture.watch_ranks`)."""
    return Path(directory) / (HISTORY_NAME if rank == 0 else f"watch.rank{rank}.jsonl")


def is_watch_directory(path: str | os.PathLike[str]) -> bool:
    """A folder a watched job wrote (it holds the history file)."""
    return Path(path).is_dir() and history_path(path).is_file()


# ------------------------------------------------------------------ writing


def header_line(pid: int, started: float, what: str, settings: dict[str, Any], flock: bool = False) -> bytes:
    """The first line; ``flock``: the writer holds :func:`lock_history` on the file while it runs."""
    header = {"format": FORMAT, "version": VERSION, "pid": pid, "started": started, "what": what, "settings": settings}
    return _line({**header, "flock": True} if flock else header)


def lock_history(fd: int) -> bool:
    """Hold an exclusive lock on the history open at ``fd`` until it is closed (or the process dies);
    False where the filesystem has no locks (then no reader ends the history for the job)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def step_line(
    step: int, ended_s: float, wall_s: float, data_s: float | None, profiled: bool, wait_s: float | None = None
) -> str:
    """One step's line (formatted by hand: it is written at every step, and a dict through
    a JSON encoder costs several microseconds more)."""
    data = "" if data_s is None else f',"d":{data_s:.7f}'
    wait = "" if wait_s is None else f',"q":{wait_s:.7f}'
    mark = ',"p":1' if profiled else ""
    return f'{{"s":{step},"t":{ended_s:.6f},"w":{wall_s:.7f}{data}{wait}{mark}}}\n'


def device_line(step: int, device_s: float) -> str:
    return f'{{"g":{step},"w":{device_s:.7f}}}\n'


def event_line(kind: str, **fields: Any) -> bytes:
    return _line({"e": kind, **fields})


def _line(record: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(record) + b"\n"
    except TypeError:  # a lone surrogate: a path's byte that is no UTF-8, as argv[0] or an error may hold
        return orjson.dumps(_valid_text(record)) + b"\n"


def _valid_text(value: Any) -> Any:
    """Strings made valid UTF-8: a byte a surrogateescape decode stood in for is written as ``\\x9b``."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_valid_text(key): _valid_text(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_valid_text(item) for item in value]
    return value


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Capture:
    """A trace written for a trigger: watch steps ``first_step``..``last_step`` (its ProfilerStep#N numbers)."""

    trigger: str  # one of TRIGGERS
    first_step: int
    last_step: int
    path: str  # relative to the watch directory
    bytes: int
    dropped: str | None = None  # why it was deleted later (the capture limit, the disk budget), else None


@dataclass(frozen=True)
class Trigger:
    step: int
    trigger: str
    why: str
    first_slow: int | None = None  # a slow trigger's first slow step (version 2)


@dataclass(frozen=True)
class Failure:
    step: int
    what: str


@dataclass
class History:
    """What a watch history holds so far (steps in order; device times by step)."""

    path: Path
    version: int = VERSION
    pid: int = 0
    started: float = 0.0
    what: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)
    ended_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    data_s: list[float | None] = field(default_factory=list)
    wait_s: list[float | None] = field(default_factory=list)  # waiting for a CPU (None: not recorded)
    profiled: list[bool] = field(default_factory=list)
    device_s: dict[int, float] = field(default_factory=dict)
    triggers: list[Trigger] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    end_status: str | None = None  # None: still running, or killed without a word

    @property
    def directory(self) -> Path:
        return self.path.parent


class HistoryReader:
    """Reads a history, then (``read_new``) only what was appended since: the live view follows a job."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        path = history_path(directory)
        if not Path(directory).is_dir():
            raise TraceError(str(directory), "not a folder", "pass the DIR given to tuiprof run --watch")
        if not path.is_file():
            raise TraceError(
                str(directory),
                f"holds no {HISTORY_NAME}: not a watch folder",
                "pass the DIR given to tuiprof run --watch",
            )
        self.history = History(path)
        self._offset = 0
        self._flock = False  # the header says its writer locks the file
        self.lines_read = 0

    def read_new(self) -> bool:
        """Parse the complete lines appended since the last call; whether any were.  A history
        whose job died without its end line gets one here (:meth:`_end_if_killed`)."""
        taken = self._read_lines()
        if self.history.end_status is None and self._flock and self._end_if_killed():
            return True
        return taken

    def _read_lines(self) -> bool:
        try:
            descriptor = os.open(self.history.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise TraceError(
                str(self.history.path), f"cannot be read ({exc.strerror})", "check its permissions"
            ) from None
        taken, pending = False, b""
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                self.fail(1, "the history is not a file")
            file.seek(self._offset)
            while chunk := file.read(CHUNK_BYTES):
                data = pending + chunk
                end = data.rfind(b"\n") + 1
                for raw in data[:end].split(b"\n")[:-1]:
                    self.lines_read += 1
                    self._take(raw)
                self._offset += end
                taken = taken or end > 0
                pending = data[end:]
                if len(pending) > MAX_LINE:
                    first = self.lines_read == 0
                    self.fail(
                        1 + self.lines_read,
                        "its first line is not a watch history header" if first else "the line is too long",
                    )
        return taken

    def _end_if_killed(self) -> bool:
        """Write the ``killed`` end line of a job that died without its own (module docstring):
        only when the job's lock is free and the file is this user's; whether it was written."""
        try:
            descriptor = os.open(self.history.path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            return False  # another user's, a read-only disk
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid() or not lock_history(descriptor):
                return False  # the job runs (or a child it forked still holds the file)
            self._read_lines()  # what it wrote before it died
            if self.history.end_status is not None:
                return True
            os.ftruncate(descriptor, self._offset)  # a line cut short by the kill
            steps = self.history.steps
            os.write(descriptor, event_line("end", step=steps[-1] if steps else 0, status="killed"))
        finally:
            os.close(descriptor)  # the lock goes with it
        self._read_lines()
        return True

    def fail(self, number: int, problem: str) -> NoReturn:
        raise TraceError(
            f"{self.history.path}:{number}",
            problem,
            "it is not a history tuiprof wrote (or it was edited); remove the line or the file",
        )

    def _take(self, raw: bytes) -> None:
        number = self.lines_read
        if len(raw) > MAX_LINE:
            self.fail(number, "the line is too long")
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.fail(number, "the line is not JSON")
        if not isinstance(record, dict):
            self.fail(number, "the line is not a JSON object")
        if number == 1:
            self._header(record)
        elif "s" in record:
            self._step(record, number)
        elif "g" in record:
            self.history.device_s[_int(record, "g", self, number)] = _seconds(record, "w", self, number)
        elif "e" in record:
            self._event(record, number)
        else:
            self.fail(number, "the line is neither a step nor an event")

    def _header(self, record: dict) -> None:
        if record.get("format") != FORMAT:
            self.fail(1, "its first line is not a watch history header")
        version = record.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            self.fail(1, "the header has no valid version")
        if version > VERSION:
            raise TraceError(
                str(self.history.path),
                f"history format version {version}; this tuiprof reads up to {VERSION}",
                "upgrade tuiprof",
            )
        history = self.history
        history.version = version
        history.pid = _int(record, "pid", self, 1)
        history.started = _seconds(record, "started", self, 1)
        history.what = _text(record, "what", self, 1)
        settings = record.get("settings")
        history.settings = self._settings(settings) if isinstance(settings, dict) else {}
        self._flock = record.get("flock") is True

    def _settings(self, settings: dict) -> dict[str, Any]:
        """The known settings, each checked (they reach the terminal: a text there could hold escapes)."""
        checked: dict[str, Any] = {}
        for key in WHOLE_SETTINGS:
            if key in settings:
                checked[key] = _int(settings, key, self, 1)
        for key in NUMBER_SETTINGS:
            if key in settings:
                checked[key] = _number(settings, key, self, 1)
        if "ratio" in checked and not checked["ratio"] > 1:
            self.fail(1, "'ratio' is not a number over 1")
        for key in FLAG_SETTINGS:
            if key in settings:
                if not isinstance(settings[key], bool):
                    self.fail(1, f"{key!r} is not true or false")
                checked[key] = settings[key]
        return checked

    def _step(self, record: dict, number: int) -> None:
        history = self.history
        step = _int(record, "s", self, number)
        if history.steps and step <= history.steps[-1]:
            self.fail(number, f"step {step} comes after step {history.steps[-1]}")
        history.steps.append(step)
        history.ended_s.append(_seconds(record, "t", self, number))
        history.wall_s.append(_seconds(record, "w", self, number))
        history.data_s.append(_seconds(record, "d", self, number) if "d" in record else None)
        history.wait_s.append(_seconds(record, "q", self, number) if "q" in record else None)
        history.profiled.append(bool(record.get("p")))

    def _event(self, record: dict, number: int) -> None:
        history = self.history
        kind = record["e"]
        if kind == "trigger":
            trigger = _choice(record, "trigger", TRIGGERS, self, number)
            first_slow = _int(record, "first_slow", self, number) if "first_slow" in record else None
            history.triggers.append(
                Trigger(_int(record, "step", self, number), trigger, _text(record, "why", self, number), first_slow)
            )
        elif kind == "capture":
            path = _text(record, "path", self, number)
            if Path(path).is_absolute() or ".." in Path(path).parts or not path:
                self.fail(number, f"the capture path {path!r} is not a file name inside the folder")
            first, last = _int(record, "first_step", self, number), _int(record, "last_step", self, number)
            if last < first:
                self.fail(number, f"the capture's last step {last} is before its first {first}")
            trigger = _choice(record, "trigger", TRIGGERS, self, number)
            history.captures.append(Capture(trigger, first, last, path, _int(record, "bytes", self, number)))
        elif kind == "dropped":
            path, why = _text(record, "path", self, number), _text(record, "why", self, number)
            history.captures = [
                Capture(c.trigger, c.first_step, c.last_step, c.path, c.bytes, why) if c.path == path else c
                for c in history.captures
            ]
        elif kind == "failure":
            history.failures.append(Failure(_int(record, "step", self, number), _text(record, "what", self, number)))
        elif kind == "end":
            history.end_status = _choice(record, "status", END_STATUSES, self, number)
        else:
            self.fail(number, f"unknown event {str(kind)[:40]!r}")


def read_history(directory: str | os.PathLike[str]) -> History:
    """The history of the watch folder ``directory``, as far as it is written."""
    reader = HistoryReader(directory)
    reader.read_new()
    if reader.lines_read == 0:
        raise TraceError(
            str(reader.history.path), "is empty: the watched job has not started yet", "try again in a moment"
        )
    return reader.history


def _int(record: dict, key: str, reader: HistoryReader, number: int) -> int:
    value = record.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        reader.fail(number, f"{key!r} is not a whole number >= 0")
    return value


def _seconds(record: dict, key: str, reader: HistoryReader, number: int) -> float:
    return _number(record, key, reader, number, "a time")


def _number(record: dict, key: str, reader: HistoryReader, number: int, kind: str = "a number") -> float:
    value = record.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0 or value == float("inf"):
        reader.fail(number, f"{key!r} is not {kind} >= 0")
    return float(value)


def _text(record: dict, key: str, reader: HistoryReader, number: int) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        reader.fail(number, f"{key!r} is not text")
    return value


def _choice(record: dict, key: str, choices: tuple[str, ...], reader: HistoryReader, number: int) -> str:
    value = record.get(key)
    if value not in choices:
        reader.fail(number, f"{key!r} is not one of {', '.join(choices)}")
    return value

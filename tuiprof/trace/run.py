"""A run directory as one distributed run: which file is which rank, and what is wrong.

``tensorboard_trace_handler`` writes one file per rank and per profiling
window into one directory, and directories collect files of several runs.
Grouping is decided from each file's head (``distributedInfo``: rank, world
size, backend; 256 KB read, no decoding) or from its sidecar:

- the run's world size is the one most files record; files with another one
  are another run;
- a rank's files are ordered by when they were written (the time stamp
  ``tensorboard_trace_handler`` puts in the name, else the mtime); the k-th
  file of every rank forms window k, and the window with the most ranks (the
  earliest on a tie) is the run shown;
- every file left out, every missing rank and every unreadable file gets one
  line in :attr:`RunDirectory.problems`: nothing is mixed in silently, and the
  rest still opens.

The sidecar (``<trace>.tuiprof-summary``) caches what analysing a file found,
so re-opening a run reads each file's head and the sidecars, not the traces
(where they are written, how they are trusted, and how to turn them off: the
sidecars section below).  This module owns the envelope;
:mod:`tuiprof.analysis.ranks` owns the summary inside and checks it against
the file's head.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from stat import S_ISREG

import msgspec

from tuiprof.errors import TraceError
from tuiprof.trace.cache import cache_root
from tuiprof.trace.source import TraceFile, read_head, read_regular_file, trace_entries

SIDECAR_SUFFIX = ".tuiprof-summary"
SIDECAR_FORMAT = 2  # 2: signed, keyed by a content hash; the head's rank and world size not cached
HEAD_BYTES = 1 << 18
_DIST = re.compile(rb'"distributedInfo"\s*:\s*\{')
_MEMBER = {
    key: re.compile(rb'"' + key.encode() + rb'"\s*:\s*"?([A-Za-z0-9_]+)') for key in ("rank", "world_size", "backend")
}
_WRITTEN = re.compile(r"\.(\d{10,})\.pt\.trace\.json(\.gz)?$")  # ms or ns epoch from tensorboard_trace_handler


@dataclass(frozen=True)
class RankFile:
    """One trace file of a run, with what its head (or sidecar) says."""

    trace: TraceFile
    rank: int
    world_size: int | None
    backend: str | None
    mtime_ns: int
    recorded_rank: int | None  # None: the file has no distributedInfo.rank (numbered by name)

    @property
    def path(self) -> Path:
        return self.trace.path

    @property
    def name(self) -> str:
        return self.trace.name


@dataclass(frozen=True)
class RunDirectory:
    """The files of one run, by rank, and one line per problem found."""

    path: Path
    ranks: tuple[RankFile, ...]  # ordered by rank
    world_size: int
    problems: tuple[str, ...]

    def file_of(self, rank: int) -> RankFile | None:
        return next((f for f in self.ranks if f.rank == rank), None)


@dataclass(frozen=True)
class _Identity:
    trace: TraceFile
    rank: int | None
    world_size: int | None
    backend: str | None
    mtime_ns: int
    written: float


def open_run(path: str | os.PathLike[str]) -> RunDirectory:
    """Group the trace files at ``path`` (a run directory, or one file) into one run."""
    target = Path(path)
    if not target.exists():
        raise TraceError(str(target), "no such file or directory", "check the path")
    problems: list[str] = []  # one line for each entry skipped or left out
    if target.is_file():
        files = [target]
    elif target.is_dir():
        entries, problems = trace_entries(target)
        files = [path for path, _ in entries]
    else:
        raise TraceError(str(target), "is not a file or a directory", "pass a run directory")
    if not files:
        skipped = f" ({len(problems)} skipped: {problems[0]})" if problems else ""
        raise TraceError(
            str(target), f"no trace files (*.json, *.json.gz) in this directory{skipped}", "pass a run directory"
        )
    found: list[_Identity] = []
    for file in files:
        identity = _identify(file, problems)
        if identity is not None:
            found.append(identity)
    if not found:
        first = problems[0] if problems else "none could be read"
        more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
        raise TraceError(
            str(target), f"no readable trace file ({first}{more})", "pass traces written by torch.profiler"
        )
    ranked = [f for f in found if f.rank is not None]
    if not ranked:  # a single process, or files without distributedInfo: numbered by name
        if len(found) > 1:
            problems.append(f"{target}: no file records distributedInfo.rank; ranks are numbered in file name order")
        numbered = [_as_rank(f, index, len(found)) for index, f in enumerate(found)]
        return RunDirectory(target, tuple(numbered), len(found), tuple(problems))
    for f in found:
        if f.rank is None:
            problems.append(f"{f.trace.path}: no distributedInfo.rank, not part of the distributed run; open it alone")
    world_size = _run_world_size(ranked)
    members: dict[int, list[_Identity]] = {}
    for f in ranked:
        if f.world_size is not None and f.world_size != world_size:
            problems.append(
                f"{f.trace.path}: world size {f.world_size}, the run has {world_size}; another run, not mixed in"
            )
        elif not 0 <= f.rank < world_size:  # type: ignore[operator]
            problems.append(f"{f.trace.path}: rank {f.rank} outside world size {world_size}; not mixed in")
        else:
            members.setdefault(f.rank, []).append(f)  # type: ignore[arg-type]
    window = _chosen_window(members)
    chosen: list[RankFile] = []
    for rank, group in sorted(members.items()):
        group.sort(key=lambda f: (f.written, f.trace.name))
        for index, f in enumerate(group):
            if index == window:
                chosen.append(_as_rank(f, rank, world_size))
            else:
                when = "an earlier" if index < window else "a later"
                problems.append(
                    f"{f.trace.path}: rank {rank} again ({when} profiling window or another run); not mixed in, open it with --trace"
                )
        if window >= len(group):
            problems.append(f"{target}: rank {rank} has no file in the profiling window shown (window {window + 1})")
    missing = sorted(set(range(world_size)) - set(members))
    if missing:
        problems.append(
            f"{target}: {_ranks_text(missing)} of world size {world_size} have no trace file; shown without them"
        )
    return RunDirectory(target, tuple(chosen), world_size, tuple(problems))


def _identify(file: Path, problems: list[str]) -> _Identity | None:
    try:
        stat = file.stat()
    except OSError as exc:
        problems.append(f"{file}: cannot be read ({exc.strerror}); check its permissions")
        return None
    written = _written_time(file.name, stat.st_mtime)
    if stat.st_size == 0:
        problems.append(f"{file}: the file is empty; re-export the trace (rank skipped)")
        return None
    try:
        head = read_head(file, HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(f"{file}: cannot be read ({exc}); copy the file again (rank skipped)")
        return None
    if head.lstrip()[:1] not in (b"{", b"["):
        problems.append(f"{file}: not a JSON trace; pass traces written by torch.profiler (rank skipped)")
        return None
    rank, world_size, backend = _distributed_info(head)
    return _Identity(TraceFile(file, stat.st_size, rank), rank, world_size, backend, stat.st_mtime_ns, written)


def _distributed_info(head: bytes) -> tuple[int | None, int | None, str | None]:
    """rank, world_size and backend from the ``distributedInfo`` member in a file's head."""
    match = _DIST.search(head)
    if match is None:
        return None, None, None
    info = head[match.end() : match.end() + 4096]
    info = info[: info.find(b"[")] if b"[" in info else info  # stop before pg_config's nested members
    values = {}
    for key, pattern in _MEMBER.items():
        found = pattern.search(info)
        values[key] = found.group(1).decode() if found else None
    rank, world = values["rank"], values["world_size"]
    return (
        int(rank) if rank and rank.isdigit() else None,
        int(world) if world and world.isdigit() else None,
        values["backend"],
    )


def _written_time(name: str, mtime: float) -> float:
    """When a file was written: the handler's time stamp in its name (seconds), else its mtime."""
    match = _WRITTEN.search(name)
    if match is None:
        return mtime
    stamp = int(match.group(1))
    return stamp / 10 ** (len(match.group(1)) - 10)  # 13 digits: ms, 19 digits: ns


def _run_world_size(ranked: list[_Identity]) -> int:
    """The world size most files record (the larger on a tie); else one more than the highest rank."""
    sizes = Counter(f.world_size for f in ranked if f.world_size)
    if sizes:
        return max(sizes, key=lambda size: (sizes[size], size))
    return max(f.rank for f in ranked) + 1  # type: ignore[type-var,operator]


def _chosen_window(members: dict[int, list[_Identity]]) -> int:
    """The profiling window (k-th file of each rank) with the most ranks, the earliest on a tie."""
    depth = max((len(group) for group in members.values()), default=1)
    counts = [sum(1 for group in members.values() if len(group) > k) for k in range(depth)]
    return max(range(depth), key=lambda k: (counts[k], -k))


def _as_rank(f: _Identity, rank: int, world_size: int) -> RankFile:
    return RankFile(
        TraceFile(f.trace.path, f.trace.size_bytes, rank),
        rank,
        f.world_size or world_size,
        f.backend,
        f.mtime_ns,
        f.rank,
    )


def _ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


# ------------------------------------------------------------------ sidecars
#
# Where a sidecar goes: next to its trace when the folder is the user's own and
# writable (a run directory the user made); otherwise -- a shared or read-only
# folder, someone else's -- under the user's cache, ``$XDG_CACHE_HOME/tuiprof/sidecars``
# (default ``~/.cache/tuiprof/sidecars``), named by a hash of the trace's
# absolute path, which the sidecar also records.  ``--no-sidecars`` or
# ``TUIPROF_NO_SIDECARS=1`` turns them off: none read, none written.
#
# A sidecar is untrusted input: anyone who can write the run directory can
# plant one (step times, a straggler).  So it is believed only when
#
# - its first line is an HMAC-SHA256, under the user's own key
#   (``$XDG_CACHE_HOME/tuiprof/sidecar.key``, 32 random bytes, mode 0600, made
#   on first use), of the JSON after it: only this user's tuiprof wrote it, so
#   a sidecar planted by someone else, or edited, is not believed (another
#   user's sidecars are never reused: each user keeps their own);
# - the JSON is the envelope's schema (:class:`SidecarEnvelope`, strict types);
# - it names this trace (absolute path), its size and mtime, and a hash of its
#   content: SHA-256 of the size and the first and last 64 KiB.  Head and tail
#   are enough: the size and mtime catch a rewrite, head and tail a copy of
#   another trace given the same size and mtime (a trace's first bytes hold
#   its distributedInfo and start time, its last its end);
#
# and :mod:`tuiprof.analysis.ranks` checks the summary inside against the
# file's head (rank, world size, name, size).  Anything off: the sidecar is
# ignored and the file analysed again, and its sidecar rewritten.  Without a
# usable key (a cache that cannot be written, a key of another owner or
# readable by others) sidecars are neither read nor written.

NO_SIDECARS_ENV = "TUIPROF_NO_SIDECARS"
KEY_BYTES = 32
CONTENT_BYTES = 1 << 16  # hashed at each end of the file
SIDECAR_MAX_BYTES = 64 << 20  # a summary is KBs (300 KB with many collectives): a bigger file is not one


class SidecarEnvelope(msgspec.Struct, forbid_unknown_fields=True):
    """What a sidecar says about the trace it describes; ``summary`` is checked by analysis/ranks.py."""

    format: int
    path: str
    size: int
    mtime_ns: int
    content: str  # content_hash of the trace
    summary: dict


def sidecars_enabled() -> bool:
    return os.environ.get(NO_SIDECARS_ENV, "") in ("", "0")


def set_sidecars(enabled: bool) -> None:
    """Turn sidecars on or off for this process and the workers it starts."""
    os.environ[NO_SIDECARS_ENV] = "0" if enabled else "1"


def sidecar_path(trace: Path) -> Path:
    """The sidecar next to ``trace``."""
    return trace.with_name(trace.name + SIDECAR_SUFFIX)


def cached_sidecar_path(trace: Path) -> Path:
    """The sidecar of ``trace`` in the user's cache (for folders tuiprof must not write into)."""
    key = hashlib.sha256(str(trace.resolve()).encode(errors="surrogateescape")).hexdigest()[:32]
    return cache_root() / "sidecars" / f"{key}{SIDECAR_SUFFIX}"


def sidecar_key() -> bytes | None:
    """The user's key that signs sidecars, made on first use; None when there is no usable one."""
    return _key_at(cache_root() / "sidecar.key")


@cache
def _key_at(path: Path) -> bytes | None:
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tuiprof-key-", dir=path.parent)  # mode 0600
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(os.urandom(KEY_BYTES))
            os.link(temporary, path)  # whole or absent: another process may make it at the same time
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
        return _read_key(path)
    except OSError:
        return None


def _read_key(path: Path) -> bytes | None:
    """The key at ``path`` if it is this user's, private, and whole."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        key = handle.read(KEY_BYTES + 1) if S_ISREG(status.st_mode) else b""
    if status.st_uid != os.geteuid() or status.st_mode & 0o077 or len(key) != KEY_BYTES:
        return None
    return key


def content_hash(trace: Path, size: int) -> str | None:
    """SHA-256 of ``size`` and the first and last :data:`CONTENT_BYTES` of the file (None if unreadable)."""
    digest = hashlib.sha256(str(size).encode())
    try:
        with open(trace, "rb") as handle:
            digest.update(handle.read(CONTENT_BYTES))
            if size > CONTENT_BYTES:
                handle.seek(max(CONTENT_BYTES, size - CONTENT_BYTES))
                digest.update(handle.read(CONTENT_BYTES))
    except OSError:
        return None
    return digest.hexdigest()


def _signature(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).hexdigest().encode()


def read_sidecar(trace: Path, size: int, mtime_ns: int) -> dict | None:
    """The summary a sidecar (next to the trace, else in the cache) holds, if this user's
    tuiprof wrote it for ``trace`` as it is now (the sidecars section above); else None."""
    if not sidecars_enabled():
        return None
    key = sidecar_key()
    if key is None:
        return None
    where = str(trace.resolve())
    content: str | None = None
    for path in (sidecar_path(trace), cached_sidecar_path(trace)):
        try:
            signature, _, body = read_regular_file(path, SIDECAR_MAX_BYTES).partition(b"\n")
            if not hmac.compare_digest(signature, _signature(key, body)):
                continue  # planted, edited, another user's, or of another format
            envelope = msgspec.json.decode(body, type=SidecarEnvelope)
        except (OSError, msgspec.MsgspecError):
            continue
        if (envelope.format, envelope.path, envelope.size, envelope.mtime_ns) != (
            SIDECAR_FORMAT,
            where,
            size,
            mtime_ns,
        ):
            continue  # the trace changed since, or this is another trace's
        content = content or content_hash(trace, size)
        # As bytes: compare_digest refuses a str with non-ASCII characters (TypeError).
        if content is not None and hmac.compare_digest(envelope.content.encode(), content.encode()):
            return envelope.summary
    return None  # none, or not one to believe: analyse the file again


def write_sidecar(rank_file: RankFile, summary: dict) -> bool:
    """Cache ``summary`` (signed, atomically) next to the trace, or in the user's cache where the
    trace's folder is not the user's or not writable; False when sidecars are off or it cannot be written."""
    if not sidecars_enabled():
        return False
    key = sidecar_key()
    trace = rank_file.path
    content = content_hash(trace, rank_file.trace.size_bytes)
    if key is None or content is None:
        return False
    target = sidecar_path(trace)
    if not _own_writable_folder(trace.parent):
        target = cached_sidecar_path(trace)
        try:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return False
    envelope = SidecarEnvelope(
        SIDECAR_FORMAT, str(trace.resolve()), rank_file.trace.size_bytes, rank_file.mtime_ns, content, summary
    )
    body = msgspec.json.encode(envelope)
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tuiprof-", dir=target.parent)
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(_signature(key, body) + b"\n" + body)
        os.chmod(temporary, 0o644)  # readable like the trace beside it (mkstemp makes 0600)
        os.replace(temporary, target)
        return True
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return False


def _own_writable_folder(folder: Path) -> bool:
    """Whether ``folder`` belongs to this user and its owner may write (checked on the mode bits:
    root may write anywhere, and must still leave a read-only folder untouched)."""
    try:
        status = folder.stat()
    except OSError:
        return False
    return status.st_uid == os.geteuid() and bool(status.st_mode & 0o200) and os.access(folder, os.W_OK)

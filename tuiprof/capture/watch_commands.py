"""``tuiprof run --watch DIR SCRIPT`` and ``tuiprof capture DIR``.

``run --watch`` checks DIR before the script starts (one line and exit 2 when
it cannot be used), then runs the script in this process (``runpy``, its own
``sys.argv``) with a :class:`~tuiprof.capture.watch.Watcher` on the optimizer
step, to its end: the script's exit code is tuiprof's, a crash leaves its
traceback and a history that ends ``crashed``.

``capture DIR`` asks the watched job for a capture now: it creates
``DIR/capture.request`` (only in a folder of this user's), which the job
takes at its next step boundary, and waits until the capture is written.
``capture PID`` finds DIR first in the user's registry of watched processes
(:mod:`tuiprof.capture.watch_registry`).
Imports nothing heavy at module level.
"""

from __future__ import annotations

import os
import runpy
import stat
import sys
import time
import traceback
from argparse import Namespace
from pathlib import Path

from tuiprof.cleanup import Terminated, die_of, terminations_raise
from tuiprof.errors import EXIT_INTERRUPTED, TraceError

EXIT_NO_CAPTURE = 1  # capture DIR: the job did not write the capture in time


def watch_settings_from_args(args: Namespace):
    from tuiprof.analysis.watch import parse_slow_rule
    from tuiprof.capture.watch import WatchSettings

    for flag, value, least in (
        ("--every", args.every, 0),
        ("--watch-keep", args.watch_keep, 1),
        ("--active", args.active, 1),
        ("--warmup", args.warmup, 0),
        ("--watch-cooldown", args.watch_cooldown, 0),
    ):
        if value < least:
            raise TraceError(f"{flag} {value}", f"must be at least {least}", f"pass a number >= {least}")
    if not args.watch_disk_mb > 0:
        raise TraceError(f"--watch-disk-mb {args.watch_disk_mb}", "must be above 0", "pass a size in MiB")
    rule = parse_slow_rule(args.watch_threshold, args.watch_warmup)
    return WatchSettings(
        rule,
        args.every,
        args.warmup,
        args.active,
        args.watch_keep,
        args.watch_disk_mb,
        args.watch_cooldown,
        catch=args.catch,
    )


def refuse_with_watch(args: Namespace) -> None:
    """Options of a one-off capture that mean nothing with ``--watch`` (silently ignoring them would mislead)."""
    for flag, given in (
        ("--save", args.save),
        ("--continue", args.keep_running),
        ("--repeat", args.repeat != 1),
        ("--wait", args.wait != 1),
    ):
        if given:
            raise TraceError(
                f"run --watch {flag}",
                "not used when watching (captures go to the watch folder, the script always runs to its end)",
                f"drop {flag}",
            )


def run_watched(args: Namespace) -> int:
    from tuiprof.capture.distributed import torchrun_launch
    from tuiprof.capture.options import config_from_args
    from tuiprof.capture.watch import prepare_directory
    from tuiprof.report.render import print_notice

    script = Path(args.script)
    directory = Path(args.watch)
    launch = torchrun_launch()
    refuse_with_watch(args)
    settings = watch_settings_from_args(args)
    prepare_directory(directory, launch.rank if launch else 0)  # before the script starts: exit 2, not an unwatched job
    config = config_from_args(str(script), args)
    from tuiprof.capture.watch import Watcher

    watcher = Watcher(directory, settings, config, script.name)
    saved_argv = sys.argv
    sys.argv = [str(script), *args.script_args]
    sys.path.insert(0, str(script.resolve().parent))
    rule = settings.rule
    what = (
        f"--catch: every step profiled; kept: a step over {rule.ratio:g}x the median of the last {rule.window}"
        if settings.catch
        else f"{rule.describe()} -> capture"
    )
    print_notice(f"tuiprof: watching {script.name} into {directory}/ ({what})")
    watcher.start()
    status, code = "finished", 0
    with terminations_raise() as terminations:  # SIGTERM/SIGHUP: the history still gets its end line
        try:
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                status = "finished" if code == 0 else "crashed"
            except KeyboardInterrupt:
                status, code = "interrupted", EXIT_INTERRUPTED
            except Terminated:
                status = "terminated"
            except Exception:  # the script's own error: its traceback, as python would show it
                traceback.print_exc()
                status, code = "crashed", 1
        except Terminated:  # while the script's own error was printed
            status = "terminated"
        finally:
            terminations.raising = False
            watcher.close(status)
            sys.argv = saved_argv
    kept = len(watcher.kept)
    print_notice(
        f"tuiprof: {watcher.step_number} steps watched ({status}); {kept} capture{'' if kept == 1 else 's'} "
        f"in {directory}/ (look: tuiprof open {directory})"
    )
    if terminations.received:  # as the signal would have ended it: exit status 128+N
        die_of(terminations.received[0])
    return code


def request_capture(args: Namespace) -> int:
    """``tuiprof capture DIR|PID``: ask the watched job for a capture, wait until it is written."""
    from tuiprof.report.render import print_notice
    from tuiprof.trace.watch import HistoryReader

    text = args.directory
    directory = Path(text)
    try:
        if text.isascii() and text.isdigit() and not directory.exists():  # a PID: its DIR from the registry
            from tuiprof.capture.watch_registry import pid_from, watched_directory

            directory = watched_directory(pid_from(text))
        reader = HistoryReader(directory)
        owner = directory.stat().st_uid
    except OSError as exc:  # a name too long, a folder that went away
        raise TraceError(text, f"cannot be used ({exc.strerror})", "pass your watch folder or its job's pid") from None
    if owner != os.getuid():
        raise TraceError(str(directory), "belongs to another user", "ask for captures only in your own watch folders")
    reader.read_new()
    history = reader.history
    if history.end_status is not None:
        raise TraceError(
            str(directory),
            f"its job has ended ({history.end_status}, step {history.steps[-1] if history.steps else 0})",
            "capture while the job runs",
        )
    asked_at = history.steps[-1] if history.steps else 0
    captures_before = len(history.captures)
    demands_before = sum(t.trigger == "demand" for t in history.triggers)
    _ask(directory)
    print_notice(f"tuiprof: capture requested (the job was at step {asked_at}); waiting for it")
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        reader.read_new()
        if sum(t.trigger == "demand" for t in history.triggers) > demands_before:
            for capture in history.captures[captures_before:]:
                if capture.trigger == "demand":
                    print_notice(
                        f"tuiprof: steps {capture.first_step}-{capture.last_step} captured: {directory / capture.path}"
                    )
                    return 0
            if history.failures and history.failures[-1].step >= asked_at:
                print_notice(f"tuiprof: the job could not capture: {history.failures[-1].what}")
                return EXIT_NO_CAPTURE
        if history.end_status is not None:
            break
    print_notice(
        f"tuiprof: no capture written within {args.timeout:g} s (the job is between steps, or has ended); "
        f"the request stays in {directory}/ and is taken at its next step"
    )
    return EXIT_NO_CAPTURE


def _ask(directory: Path) -> None:
    """Create ``DIR/capture.request``: never through a symbolic link (a planted one made its target
    outside the folder: issue 42), never over a file that is not this user's.  A request of ours
    already there, not taken yet, is the one this call waits for."""
    from tuiprof.trace.watch import REQUEST_NAME

    request = directory / REQUEST_NAME
    try:
        os.close(os.open(request, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        return
    except FileExistsError:
        status = os.lstat(request)
    except OSError as exc:
        raise TraceError(str(directory), f"cannot ask for a capture ({exc.strerror})", "check the folder") from None
    if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
        raise TraceError(
            str(request),
            "is not a request of yours (a link, or another user's file); not followed",
            "remove it, then ask again",
        )


def add_watch_arguments(parser) -> None:
    """``run``'s watch options (argparse only: ``--help`` stays cheap)."""
    group = parser.add_argument_group(
        "watching a long job (--watch)",
        "Record every step's time with the profiler off and capture the next steps (profiler warmup --warmup, "
        "then --active recorded) when they turn slow, on demand (tuiprof capture DIR) or every N steps; "
        "a healthy window is captured once, right after the warm-up.",
    )
    group.add_argument(
        "--watch",
        metavar="DIR",
        help="watch the script into DIR (created; yours; without a watch history yet); the script runs to its end",
    )
    group.add_argument(
        "--watch-threshold",
        metavar="RATIO[:N[:K]]",
        default="1.2:50:3",
        help="the slow rule: after the warm-up, K steps in a row over RATIO x the median of the last N "
        "normal (unprofiled, not slow) steps, confirmed by 2 more, trigger a capture (default 1.2:50:3)",
    )
    group.add_argument(
        "--watch-warmup", type=int, default=10, metavar="W", help="first steps never judged slow (default 10)"
    )
    group.add_argument("--every", type=int, default=0, metavar="N", help="also capture every N steps (default: never)")
    group.add_argument(
        "--watch-keep",
        type=int,
        default=10,
        metavar="C",
        help="captures kept at most; the oldest slow ones are deleted first, the healthy one never (default 10)",
    )
    group.add_argument(
        "--watch-disk-mb",
        type=float,
        default=1024.0,
        metavar="MIB",
        help="captures' total size at most, in MiB (2**20 bytes; default 1024)",
    )
    group.add_argument(
        "--catch",
        action="store_true",
        help="profile every step and keep the trace of each step over RATIO x the median (one step "
        "each; also the healthy, demand and every-N steps), dropping the others at once: catches "
        "one-off slow steps, at the profiler's cost on every step (measured: docs/watch.md); "
        "under torchrun every rank keeps the steps rank 0 keeps",
    )
    group.add_argument(
        "--watch-cooldown",
        type=int,
        default=100,
        metavar="STEPS",
        help="steps after a capture before a slow or every-N trigger (default 100)",
    )


def add_capture_command(commands) -> None:
    capture = commands.add_parser("capture", help="ask a job watched into DIR (run --watch DIR) for a capture now")
    capture.add_argument(
        "directory",
        metavar="DIR|PID",
        help="the job's watch folder (yours), or its process id "
        "(rank 0's under torchrun; found in your registry of watched jobs, docs/watch.md)",
    )
    capture.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="wait at most S seconds for the capture (default 60)"
    )
    capture.set_defaults(handler=request_capture)

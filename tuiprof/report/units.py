"""Human formatting of times, bytes and counts (the same in every view).

The spacing rule: a time is glued to its unit, as torch's tables write it (``18.347ms``,
``24.1s``): tables, panes, the capture's progress and exit lines alike.  Bytes and counts
keep a space (``43.23 MiB``, ``296.09 M``); a pane that wraps at spaces glues them
(report/details.py).  Every time and every size on screen comes from a function here.

Sizes: one convention, binary.  A size is counted in powers of 1024 and named so: ``KiB``,
``MiB``, ``GiB`` (IEC), as torch's ``memory_summary`` and memory_viz write them (``52.00 MiB``
is 54,525,952 bytes; a ``MB`` would be 10^6).  The size options read the same powers
(``--cache-size 500M`` is 500 MiB, ``--watch-disk-mb`` counts MiB).  Rates keep the decimal
``GB/s`` (10^9 bytes a second) that GPU specifications give bandwidth in.  docs/columns.md says
so to the user."""

from __future__ import annotations

import math

DATA_DECIMALS = 3  # microseconds to the nanosecond; percentages, ratios and GB/s to a thousandth


def format_us(value: float) -> str:
    """Microseconds as torch's tables show them: ``945.536us``, ``18.347ms``, ``1.204s``."""
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.3f}s"
    if magnitude >= 1e3:
        return f"{value / 1e3:.3f}ms"
    return f"{value:.3f}us"


def format_us_or_dash(value: float) -> str:
    """``--`` for exactly nothing (no data loading, no memcpy), else :func:`format_us`."""
    return format_us(value) if value else "--"


MIB = 1 << 20
# Binary byte units, largest first, named as torch's memory_summary names them (IEC).
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10))


SIZE_CHARS = len("1023.99 MiB")  # the widest unsigned format_bytes: a column or axis this wide never shifts


def format_bytes(value: int) -> str:
    """Bytes in binary units with sign, like torch: ``43.23 MiB``, ``-224.00 KiB``, ``0 B``."""
    magnitude = abs(value)
    for unit, size in BYTE_UNITS:
        if magnitude >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value} B"


def format_count(value: float) -> str:
    """Large counts with SI suffixes: ``296.09 M``, ``1.18 T``."""
    magnitude = abs(value)
    for unit, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if magnitude >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:g}"


def format_pct(value: float) -> str:
    return f"{value:.2f}%"


def format_us_short(value: float) -> str:
    """Three significant digits for tight spots: ``457ms``, ``2.46s``, ``16.5ms``, ``608us``."""
    for unit, size in (("s", 1e6), ("ms", 1e3), ("us", 1.0)):
        if abs(value) >= size or unit == "us":
            scaled = value / size
            digits = 0 if abs(scaled) >= 100 else 1 if abs(scaled) >= 10 else 2
            return f"{scaled:.{digits}f}{unit}"
    return f"{value:.0f}us"


def format_clock(seconds: float) -> str:
    """``4.2s``: a running clock (progress lines, the loading panel), in seconds to a tenth
    so that it reads steadily as it ticks; glued like every time."""
    return f"{seconds:.1f}s"


def format_bytes_short(value: int) -> str:
    """``153MiB``, ``2.6GiB``: bytes for headers."""
    magnitude = abs(value)
    for unit, size in BYTE_UNITS:
        if magnitude >= size:
            scaled = value / size
            return f"{scaled:.1f}{unit}" if abs(scaled) < 10 else f"{scaled:.0f}{unit}"
    return f"{value}B"


def format_mib_progress(done: int, total: int) -> str:
    """``120 / 954 MiB``: how far a read is, in whole MiB (a progress line ticks in place)."""
    return f"{done / MIB:,.0f} / {total / MIB:,.0f} MiB"


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 step``, ``3 steps``, ``12,345 calls``: a count with the word that agrees."""
    return f"{count:,} {word if count == 1 else (words or word + 's')}"


def data_value(kind: str, value: object) -> object:
    """``value`` as CSV and JSON write it, with no float noise (``2454793.5950000007``).

    Times are whole nanoseconds inside, so microseconds to three decimals are exact
    (``2454793.595``); means (``cpu_avg_us``) are rounded to the nanosecond.  Percentages,
    ratios and bandwidths keep three decimals, rates (FLOP/s) whole units; counts, bytes and
    text are written as they are, and an unknown value stays None."""
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    if kind == "count":
        return round(value)
    if kind in ("us", "pct", "ratio", "gbps"):
        return round(value, DATA_DECIMALS) + 0.0  # + 0.0: no "-0.0"
    return value

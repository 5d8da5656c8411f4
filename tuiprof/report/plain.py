"""Text from a trace or a path, made safe to show: no control character reaches a terminal.

Names, annotations, kernel names, file names and error messages come from
files someone else wrote.  A raw ``ESC`` in one can set the window title
(OSC 0), write the clipboard (OSC 52) or clear the screen, so every such
text goes through :func:`plain` before it is printed or shown: control
characters become visible escapes (``\\x1b``), and a display limit cuts
absurdly long names (a 60 MB event name) with an ellipsis.  Markup is a
separate matter: show the result as plain text (``rich.text.Text``), never
as markup.

Lines on stderr go through :func:`tuiprof.report.render.print_notice`, which makes the whole
line plain: a path, an exception's message or a text read from a watch history in it cannot
escape the filter however the line was put together (``tests/test_hostile_messages.py`` prints
every such message with an escape-laden path).
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, the Unicode line/paragraph separators and bidirectional
# overrides that can reorder or hide what the terminal shows, and lone surrogates: a path's
# byte that is no UTF-8 (``\x9b``, CSI to some terminals) is decoded to one (surrogateescape)
# and written back as that raw byte.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
ELLIPSIS = "…"
DISPLAY_CHARS = 500  # the most of one name a table cell or a pane shows; data formats keep it whole


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # the byte a surrogateescape decode stood in for
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(text: str, limit: int | None = None) -> str:
    """``text`` with every control character escaped (``\\x1b``), at most ``limit`` characters.

    Only the first ``limit`` characters are looked at when a limit is given,
    so a name of any size costs the same to show.
    """
    if limit is not None and len(text) > limit:
        keep = max(0, limit - 1)
        return _UNSAFE.sub(_escape, text[:keep])[:keep] + ELLIPSIS
    return _UNSAFE.sub(_escape, text)

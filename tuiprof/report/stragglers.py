"""A straggler in words, in the terms of the ranks table's columns.

A straggler does not have a longer Step: every rank's step ends at the same
collectives, so the others wait for it, in their Exposed comm.  What it has is
more *work* per step, Step - Exposed comm.  So the words never say "+N ms per
step" (the Step column can say the opposite: rank 1 of the gloo sample has the
shorter step); they say how much more work, which column it went to, and how
often the rank arrived last.  The column gets the short cause; the detail pane,
the Overview's finding and ``summary --view ranks`` the whole sentence.
"""

from __future__ import annotations

from tuiprof.analysis.ranks import Straggler
from tuiprof.report.views import RANK_COLUMNS

_HEADERS = {column.key: column.header for column in RANK_COLUMNS}
WORK = f"{_HEADERS['step_us']} - {_HEADERS['exposed_communication_us']}"  # "Step - Exposed comm"


def straggler_cause(straggler: Straggler) -> str:
    """What the Straggler column shows: the column the excess went to, e.g. ``Data load +21.3 ms``."""
    if straggler.cause is not None:
        return f"{_HEADERS[straggler.cause]} +{ms(straggler.cause_excess_us)}"
    if straggler.excess_us > 0:
        return f"work +{ms(straggler.excess_us)}"
    return f"last at {straggler.last_arrivals} of {straggler.collectives}"


def straggler_sentence(straggler: Straggler) -> str:
    """The whole reason, e.g. ``rank 1: 23.5 ms more work per step than the other ranks (Step -
    Exposed comm: 37.2 ms; their median 13.6 ms), Data load 21.3 ms above theirs, last to arrive at
    3 of 3 collectives; the others wait for it, in Exposed comm``."""
    work = f"({WORK}: {ms(straggler.working_us)}; their median {ms(straggler.others_working_us)})"
    last = f"last to arrive at {straggler.last_arrivals} of {straggler.collectives} collectives"
    if straggler.excess_us > 0:
        parts = [f"{ms(straggler.excess_us)} more work per step than the other ranks {work}"]
    else:  # a straggler only because it arrives last
        parts = [f"{last}, although it does no more work per step than the other ranks {work}"]
    if straggler.cause is not None:
        parts.append(f"{_HEADERS[straggler.cause]} {ms(straggler.cause_excess_us)} above theirs")
    if straggler.last_arrivals and straggler.excess_us > 0:
        parts.append(last)
    return (
        f"rank {straggler.rank}: "
        + ", ".join(parts)
        + f"; the others wait for it, in {_HEADERS['exposed_communication_us']}"
    )


def ms(us: float) -> str:
    """Milliseconds to 0.1 ms, whatever the size: the sentence's numbers add up (37.2 - 13.6 = 23.5)."""
    return f"{us / 1000:.1f} ms"

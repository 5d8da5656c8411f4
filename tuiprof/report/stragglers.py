"""A straggler in words, in the terms of the ranks table's columns.

A straggler does not have a longer Step: every rank's step ends at the same
collectives, so the others wait for it, in their Exposed comm.  What it has is
more *work* per step, Step - Exposed comm.  So the words never say "+N ms per
step" (the Step column can say the opposite: rank 1 of the gloo sample has the
shorter step); they say how much more work, which column it went to, and how
often the rank arrived last.  The column gets the short cause; the detail pane,
the Overview's finding and ``summary --view ranks`` the whole sentence.  The finding that names
one straggler first (report/findings.py: ``straggler``) adds where its extra time went
(:func:`straggler_chain`), what to change (:func:`straggler_remedy`) and, when the evidence
holds, what fixing it saves (:func:`saving_doubt`, docs/ranks.md).
"""

from __future__ import annotations

from tuiprof.analysis.gap_activity import is_sync
from tuiprof.analysis.rank_work import BETWEEN_OPERATORS, KERNEL, MODULE, OPERATOR, PYTHON
from tuiprof.analysis.ranks import Straggler, WorkExcess
from tuiprof.analysis.steps import DATA_LOADING_PREFIX
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


# Shown of a straggler's extra time (the rest stays in ``Straggler.items``): enough to act on.
SHOWN_ITEMS = 3
# A predicted saving is claimed only when two standard errors over the steps stay within 10 % of
# it (the advice rule: a saving tuiprof cannot predict within 10 % is not claimed), over at least
# MIN_STEPS steps whose holdups are known.
MIN_STEPS = 3
SAVING_TOLERANCE = 0.10


def straggler_items(straggler: Straggler) -> str:
    """Where its extra time went, like with like against the other ranks' median, e.g.
    ``module 1 (Extra) +50.4 ms, aten::mm +47.3 ms`` (a module by its path where the capture knew no name);
    '' when no item holds 10 % of it."""
    return ", ".join(f"{_item_name(item)} +{ms(item.excess_us)}" for item in straggler.items[:SHOWN_ITEMS])


def _item_name(item: WorkExcess) -> str:
    if item.kind == MODULE:
        return f"module {item.name or item.label}"
    if item.kind == KERNEL:
        return f"kernel {item.label.split('(', 1)[0]}"  # the name without its argument list
    if item.kind == PYTHON:
        return item.label if item.label == BETWEEN_OPERATORS else f"{item.label} (Python outside operators)"
    return item.label


def straggler_chain(straggler: Straggler) -> str:
    """The sentence and what its extra time was, for the finding that names it first."""
    parts = [straggler_sentence(straggler)]
    items = straggler_items(straggler)
    if items:
        parts.append(f"Where its extra time went (against the other ranks' median): {items}")
    elif straggler.excess_us > 0:
        parts.append(
            "No operator, kernel, module or Python frame of its takes 10 % of its extra time more than on the others"
        )
    if straggler.holdup_us > 0:
        parts.append(
            f"It held the others up {ms(straggler.holdup_us)} a step (its lead at the collectives it arrived last at)"
        )
    return ". ".join(parts)


def straggler_remedy(straggler: Straggler) -> str:
    """One line: what to look at or change on that rank, from its largest extra item (else its column)."""
    rank = f"rank {straggler.rank}"
    item = straggler.items[0] if straggler.items else None
    if (item is not None and item.label.startswith(DATA_LOADING_PREFIX)) or (
        item is None and straggler.cause == "data_loading_us"
    ):
        return f"{rank}'s input pipeline: DataLoader(num_workers=4, pin_memory=True, persistent_workers=True), or a faster Dataset.__getitem__ there"
    if item is None:
        what = f"{_HEADERS[straggler.cause]} time" if straggler.cause else "work"
        return f"{rank}'s host: more {what} than the others with no operator to blame; compare its CPU load, frequency and neighbours with theirs"
    if item.kind == OPERATOR and is_sync(item.label):
        return f"{rank}: the host-device sync {item.label} in its step (.item(), .cpu(), a synchronize); remove it or do it on every rank alike"
    if item.kind == PYTHON:
        where = "between operators" if item.label == BETWEEN_OPERATORS else f"outside any operator, in {item.label}"
        return f"{rank}: its Python {where}, {ms(item.excess_us)} a step more than on the others"
    if item.kind == KERNEL:
        return f"{rank}'s device: {_item_name(item)} takes {ms(item.excess_us)} a step more than on the others (a slower or throttled GPU?)"
    return f"{rank}: {_item_name(item)} takes {ms(item.excess_us)} a step more than on the others; give that rank the same work (inputs, branches)"


def saving_doubt(straggler: Straggler) -> str:
    """Why its predicted saving is not claimed, or '' when it is."""
    if not straggler.collectives:
        return "no collective matched across the ranks, so how long the others wait for it is unknown"
    if straggler.steps < MIN_STEPS:
        return (
            f"{straggler.steps} whole profiled step{'s' * (straggler.steps != 1)} with collectives to compare (a step "
            f"with the trace's first collective is not whole), too few to tell the saving from step-to-step noise; "
            f"profile {MIN_STEPS + 1} or more"
        )
    if straggler.saving_us <= 0:
        return f"it held the others up at no collective of the {straggler.steps} whole steps"
    error = straggler.saving_error_us
    if error is not None and 2 * error > SAVING_TOLERANCE * straggler.saving_us:
        return (
            f"the steps disagree: {ms(straggler.saving_us)} +- {ms(2 * error)} (two standard errors over "
            f"{straggler.steps} steps), more than 10 % of it"
        )
    return ""

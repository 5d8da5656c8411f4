"""The models of a distributed run's ranks that the explorer has shown: ``[``
and ``]`` load the neighbouring rank on demand; the last few stay in memory
(a full model is the size of its trace's events, so not every rank is kept)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from textual.notifications import Notification, Notify

from tuiprof.analysis import load_model
from tuiprof.analysis.model import TraceModel
from tuiprof.trace.run import open_run
from tuiprof.tui.textual_internals import withdraw_notification

KEPT_MODELS = 3  # the rank shown and its neighbours: enough to flip back and forth
LOADING_TOAST_S = 600  # the loading toast's timeout: it is withdrawn when the load ends


class RankModels:
    def __init__(self) -> None:
        self._models: OrderedDict[Path, TraceModel] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, model: TraceModel) -> None:
        with self._lock:
            key = Path(model.info.source)
            self._models[key] = model
            self._models.move_to_end(key)
            while len(self._models) > KEPT_MODELS:
                self._models.popitem(last=False)

    @staticmethod
    def neighbour(model: TraceModel, step: int) -> tuple[int, Path] | None:
        """(rank, file) ``step`` ranks away in the run of ``model``'s directory (wrapping); None
        for a trace that is not one rank of several."""
        if (model.info.world_size or 0) < 2 or model.info.rank is None:
            return None
        run = open_run(Path(model.info.source).parent)
        ranks = [f.rank for f in run.ranks]
        if len(ranks) < 2:
            return None
        here = ranks.index(model.info.rank) if model.info.rank in ranks else 0
        chosen = run.ranks[(here + step) % len(ranks)]
        return chosen.rank, chosen.path

    def load(self, path: Path) -> TraceModel:
        with self._lock:
            model = self._models.get(path)
        if model is None:
            model = load_model(path)
        self.remember(model)
        return model

    def switch(self, app, current: TraceModel, step: int) -> None:
        """In the app's worker: load the rank ``step`` away from ``current`` and give it to
        every view (``app.model``); problems are notifications."""
        target = app.load_or_notify(lambda: self.neighbour(current, step))
        if target is None:
            app.call_from_thread(
                app.notify, "Not a distributed run: [ and ] switch between the ranks of a run directory.", markup=False
            )  # as markup, "[ and ]" was a tag and vanished
            return
        rank, path = target
        with self._lock:
            cached = path in self._models
        # A toast only while a load takes time, gone when the rank is shown (a timed one stayed
        # ~5 s after it, and one for a kept model came after the rank was already on screen);
        # short, so that it never wraps inside the file's name (the header names the file).
        toast = (
            None if cached else Notification(f"loading rank {rank}…", "", "information", LOADING_TOAST_S, markup=False)
        )
        if toast is not None:
            app.call_from_thread(app.post_message, Notify(toast))
        model = app.load_or_notify(lambda: self.load(path))
        app.call_from_thread(_shown, app, model, toast)


def _shown(app, model: TraceModel | None, toast: Notification | None) -> None:
    """On the UI thread: the loaded rank to every view, and its loading toast away."""
    if model is not None:
        app.model = model
    if toast is not None:
        withdraw_notification(app, toast)

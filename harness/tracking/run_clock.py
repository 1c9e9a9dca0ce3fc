"""Where a run's time goes, as metrics of the run:

- ``time_total_s``: from the start of the process (``python -m downstream``: interpreter start-up
  and imports included) — or, for a cell that a long-lived benchmark worker runs in process, from
  the start of that cell (:func:`cell_clock`) — to the end of the run, after its last output;
- ``time_fit_s``: Lightning's fit loop, from ``on_fit_start`` to ``on_train_end`` (every training
  and validation epoch, the sanity check and the checkpoints written on the way);
- ``time_eval_s``: from there to the end of the run: the best checkpoint evaluated on dev and
  test, the predictions files, tables and figures.
- ``time_cpu_s``: the CPU seconds (user and system, every thread) the process spent over the same
  span as ``time_total_s``: on a machine shared with other work a run's wall time stretches with
  the load, its CPU time far less, so a cost model is checked against it.

``time_total_s − time_fit_s`` is the run's overhead: start-up, encoder and data loading, the
feature store, the run's creation, evaluation and outputs.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import psutil
import pytorch_lightning as pl

_PROCESS_START = time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())
_cell_start: float | None = None
_cell_cpu_start = 0.0  # time.process_time() at the cell's start (0: the process's)


def run_started() -> float:
    """``time.monotonic()`` at the start of the process, or of the cell running now."""
    return _PROCESS_START if _cell_start is None else _cell_start


@contextmanager
def cell_clock():
    """Runs started inside the block count their ``time_total_s`` from the block's start."""
    global _cell_start, _cell_cpu_start
    previous = _cell_start, _cell_cpu_start
    _cell_start, _cell_cpu_start = time.monotonic(), time.process_time()
    try:
        yield
    finally:
        _cell_start, _cell_cpu_start = previous


class RunTimes(pl.Callback):
    """Logs ``time_fit_s``, ``time_eval_s``, ``time_total_s`` and ``time_cpu_s`` (rank 0) at the end of fit. Put it
    after every callback whose work it should count as evaluation (their ``on_fit_end`` runs first)."""

    def __init__(self):
        self.fit_started: float | None = None
        self.fit_ended: float | None = None
        self.times: dict[str, float] = {}

    def on_fit_start(self, trainer, pl_module):
        self.fit_started = time.monotonic()

    def on_train_end(self, trainer, pl_module):
        self.fit_ended = time.monotonic()

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero or self.fit_started is None:
            return
        now = time.monotonic()
        fit_ended = self.fit_ended or now
        self.times = {
            "time_fit_s": fit_ended - self.fit_started,
            "time_eval_s": now - fit_ended,
            "time_total_s": now - run_started(),
            "time_cpu_s": time.process_time() - _cell_cpu_start,
        }
        if trainer.logger is not None:
            trainer.logger.log_metrics(self.times, step=trainer.global_step + 1)

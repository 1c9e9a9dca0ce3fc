"""The study's progress on the console: a line per finished cell numbered by how many are done,
and now and then one line for the whole study — stages and cells done, running, and an ETA. The
ETA prices each cell still to run by the mean time of the finished cells of its kind (a probe
takes seconds, a head minutes), or by the scale-out cost table while none of its kind has
finished."""

from __future__ import annotations

import time
from collections.abc import Callable
from statistics import fmean


class Progress:
    """Counts of a study's stages and cells; ``cells_total`` grows as encoders are planned.
    ``estimate``: a cell's expected seconds before any of its kind has run (None: the mean of all
    finished cells stands in)."""

    def __init__(self, stages_total: int, encoders_total: int, estimate: Callable | None = None):
        self.stages_total, self.stages_done = stages_total, 0
        self.encoders_total, self.encoders_planned = encoders_total, 0
        self.cells_total, self.cells_done = 0, 0
        self.estimate = estimate
        self.pending: dict[tuple[str, int], tuple[str, float | None]] = {}  # (method, seed) → (kind, estimate)
        self.seconds: dict[str, list[float]] = {}  # kind → seconds of the cells run here, not reused
        self.started = time.perf_counter()
        self.last_shown = 0

    def planned(self, cells: list, encoder: bool = True) -> None:
        self.cells_total += len(cells)
        self.encoders_planned += int(encoder)
        for cell in cells:
            self.pending[(cell.method, cell.seed)] = (cost_kind(cell), self.estimate(cell) if self.estimate else None)

    def finished(self, cell, seconds: float | None) -> None:
        """``cell`` ended; ``seconds``: its run time (None when it was reused)."""
        kind, _ = self.pending.pop((cell.method, cell.seed), (cost_kind(cell), None))
        if seconds is not None:
            self.seconds.setdefault(kind, []).append(seconds)

    def total_text(self) -> str:
        """``14``, or ``14+`` while encoders still pretrain (their cells are not planned yet)."""
        return f"{self.cells_total}{'+' if self.encoders_planned < self.encoders_total else ''}"

    def cell_line(self, method: str, seed: int, scores: dict[str, float], status: str) -> str:
        """A finished cell's line; ``scores``: its task's main metric on dev and test (``dev_acc``,
        ``test_acc`` or ``dev_pearson``, ``test_pearson``), shown as ``dev acc 0.700``."""
        self.cells_done += 1
        width = len(str(self.cells_total))
        shown = "  ".join(f"{name.replace('_', ' ')} {value:.3f}" for name, value in scores.items())
        counted = f"[{self.cells_done:>{max(3, width)}}/{self.total_text()}]"
        return f"  {counted} {method:<34} seed {seed}  {shown}  ({status})"

    def eta_minutes(self, slots: int) -> float | None:
        """Minutes for the planned cells still to run, ``slots`` at a time; None before a cell ran."""
        if not self.seconds:
            return None
        means = {kind: fmean(seconds) for kind, seconds in self.seconds.items()}
        overall = fmean(second for seconds in self.seconds.values() for second in seconds)
        remaining = sum(
            means.get(kind, overall if estimate is None else estimate) for kind, estimate in self.pending.values()
        )
        return remaining / max(1, slots) / 60

    def study_line(self, running: int, slots: int) -> str:
        eta = self.eta_minutes(slots)
        eta_text = f"ETA {eta:.0f} min for the planned cells" if eta is not None else "ETA after the first cell"
        elapsed = (time.perf_counter() - self.started) / 60
        return (
            f"  study: stages {self.stages_done}/{self.stages_total} · cells {self.cells_done}/{self.total_text()}"
            f" · {running} running · {elapsed:.0f} min so far · {eta_text}"
        )

    def due(self) -> bool:
        """After every tenth of the planned cells, at most every fifth cell (and after each stage:
        the caller asks then)."""
        step = max(5, self.cells_total // 10)
        if self.cells_done - self.last_shown >= step:
            self.last_shown = self.cells_done
            return True
        return False


def cost_kind(cell) -> str:
    """Cells that cost alike: a baseline, a probe, or a head's family, transfer, head and fraction."""
    if cell.kind in ("baseline", "probe"):
        return cell.kind
    return f"{cell.family}/{cell.transfer}/{cell.head}@{cell.train_fraction:g}"


def time_split(metrics: dict) -> str:
    """``; fit 12, eval 2, total 16 s`` from a finetune run's time metrics; "" for runs without them."""
    if "time_total_s" not in metrics:
        return ""
    return (
        f"; fit {metrics['time_fit_s']:.0f}, eval {metrics['time_eval_s']:.0f}, total {metrics['time_total_s']:.0f} s"
    )

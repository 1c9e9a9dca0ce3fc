"""Levers on a training step that keep its numbers, timed beside the step as run in the same
interleaved rounds: ``compile`` (``torch.compile`` of the model, inductor's CPU backend: fused
element-wise kernels, fewer dispatches) and ``foreach`` (AdamW's multi-tensor step in place of the
fused one the harness uses, to show what fusing the optimiser buys).

A compiled step pays only after its compile time; :func:`amortised` spreads that time over the
steps of one study cell, priced by ``benchmarks/scaleout-costs.json`` (one core a cell), and says
whether the cell ends sooner. No lever is on in a real run; each is a measurement.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from benchmarks.plan.cost_model import Costs

LEVERS = ("compile", "foreach")
COSTS_FILE = Path(__file__).resolve().parents[1] / "scaleout-costs.json"


def compiled(model: nn.Module) -> nn.Module:
    """``model`` under ``torch.compile`` (inductor); attributes read through to the model. Random
    operations (dropout) fall back to torch's own generator, so a compiled step draws the masks an
    eager one draws: the lever changes kernels, not the draws. Inductor caches in a fresh folder of
    this process, so the compile time measured is a cold one, as a study cell's would be."""
    import torch._inductor.config as inductor_config

    inductor_config.fallback_random = True
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="speed-inductor-")
    return torch.compile(model, backend="inductor")


def lever_error(levers: list[str]) -> str | None:
    """Why ``levers`` cannot be timed here, or None: a compiled kernel's OpenMP threads spin between
    steps unless ``OMP_WAIT_POLICY=PASSIVE`` (``make`` sets it), and slow the eager steps they are
    interleaved with."""
    if "compile" in levers and os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        return (
            "--levers compile: set OMP_WAIT_POLICY=PASSIVE (make does); "
            "else compiled kernels' spinning threads slow the eager steps"
        )
    return None


def first_pass_seconds(run: Callable[[], float]) -> float:
    """Wall seconds of ``run``'s first call, its compilation included: made before the rounds, so
    every shape the rounds meet is compiled by then."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def cell_minutes(family: str, transfer: str, head: str, costs_file: Path = COSTS_FILE) -> tuple[float, str]:
    """(minutes of one core, the costs entry that priced it) of a 100% study cell of this kind; a
    kind the file lacks is priced at its default."""
    costs = Costs.read(costs_file)
    key = f"{family}/{transfer}/{head}"
    if key in costs.cells and "1" in costs.cells[key]:
        return float(costs.cells[key]["1"]), key
    return float(costs.default["1"]), "default"


def amortised(
    compile_wall_seconds: float, step_seconds: float, lever_step_seconds: float, cell_minutes_: float
) -> dict:
    """A compiled step's account over one cell: the cell's steps at the eager ``step_seconds``
    (all of its minutes taken as steps: an upper bound on what compiling can save), the compile
    time per step, and the seconds a cell saves net of compiling (negative: it does not pay)."""
    cell_seconds = 60 * cell_minutes_
    steps = cell_seconds / step_seconds
    saved = steps * (step_seconds - lever_step_seconds) - compile_wall_seconds
    return {
        "cell_minutes": cell_minutes_,
        "cell_steps": steps,
        "compile_seconds": compile_wall_seconds,
        "compile_seconds_per_step": compile_wall_seconds / steps,
        "saved_seconds_per_cell": saved,
        "pays": saved > 0,
    }

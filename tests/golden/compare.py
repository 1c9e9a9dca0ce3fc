"""Comparing golden cells with their pinned numbers, with tolerances that survive another CPU and
another summation order (vector width, thread count) yet catch a changed default.

- predicted probabilities: each item within the probability tolerance (absolute);
- ``best_val_ppl``: within the perplexity tolerance (relative);
- accuracy and F1: equal, except for what the items whose pinned probability lies within the
  probability tolerance of the 0.5 threshold can move by flipping (``FLIP_ALLOWANCE`` / items each).

Two sets of goldens, each with its tolerance: float32 (``goldens.json``, :data:`FLOAT32`) and
bf16-mixed (``goldens-bf16.json``, :data:`BF16`). bf16 rounds every matmul input to 8 significant
bits, and which kernel runs (AMX tiles, AVX512-BF16, another thread count) changes how those
roundings add up over a run's steps, so its tolerance is wider — but it stays well below what a
changed learning rate moves (``tests/golden/test_golden_cells.py`` shows a 1.2× rate failing it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.protocol import protocol_version


@dataclass(frozen=True)
class Tolerance:
    """How far a recomputed golden may sit from its pinned numbers."""

    probability: float  # absolute, per predicted probability
    perplexity: float  # relative, of best_val_ppl


GOLDEN_FILE = Path(__file__).with_name("goldens.json")
BF16_GOLDEN_FILE = Path(__file__).with_name("goldens-bf16.json")
FLOAT32 = Tolerance(probability=1e-4, perplexity=1e-4)
# bf16: measured on an AMX CPU against the same cells with oneDNN held to AVX512-BF16 (no tiles) and
# torch's kernels to AVX2, the largest moves were 6.5e-5 in a probability and 1.2e-7 in perplexity;
# a learning rate 1.2× the config's moved a probability by 7.5e-3 to 3.3e-2. 1e-3 sits between.
BF16 = Tolerance(probability=1e-3, perplexity=1e-3)
GOLDENS = {"32-true": (GOLDEN_FILE, FLOAT32), "bf16-mixed": (BF16_GOLDEN_FILE, BF16)}  # precision → file, tolerance
PROBABILITY_TOLERANCE = FLOAT32.probability
PERPLEXITY_TOLERANCE = FLOAT32.perplexity
METRIC_TOLERANCE = 1e-9
FLIP_ALLOWANCE = 4.0  # one flipped item moves accuracy by 1/n and F1 by at most ~3/n (2/3 positive)
METRICS = ("dev_acc", "dev_f1", "test_acc", "test_f1")
HINT = "a change moved a number — bump its concern in harness/protocol.py and run `make goldens`, or find the bug"


def moved(name: str, what: str) -> str:
    """The one-line failure of a golden cell whose numbers moved."""
    return f"golden {name} moved ({what}): {HINT}"


def probability_deviation(pinned: list[float], computed: list[float]) -> tuple[float, int]:
    """The largest |Δp| over the items and the item where it is."""
    deviations = [abs(a - b) for a, b in zip(pinned, computed)]
    index = max(range(len(deviations)), key=deviations.__getitem__)
    return deviations[index], index


def problems(name: str, pinned: dict, computed: dict, tolerance: Tolerance = FLOAT32) -> list[str]:
    """One line per way the cell ``name``'s computed numbers left its pinned ones ([] if none)."""
    found = []
    if set(pinned) != set(computed):
        return [moved(name, f"it records {sorted(computed)}, the goldens {sorted(pinned)}")]
    if "best_val_ppl" in pinned:
        was, now = pinned["best_val_ppl"], computed["best_val_ppl"]
        relative = abs(now - was) / was
        if not relative <= tolerance.perplexity:
            found.append(
                moved(name, f"best_val_ppl {was:.6g} → {now:.6g}, relative Δ {relative:.2g} > {tolerance.perplexity:g}")
            )
    flips = {}
    for split in ("dev", "test"):
        key = f"{split}_prob"
        if key not in pinned:
            continue
        if len(pinned[key]) != len(computed[key]):
            found.append(moved(name, f"{len(computed[key])} {split} predictions, pinned {len(pinned[key])}"))
            continue
        deviation, index = probability_deviation(pinned[key], computed[key])
        if not deviation <= tolerance.probability:
            found.append(moved(name, f"max |Δp| {deviation:.2g} > {tolerance.probability:g} at {split} item {index}"))
        near = sum(abs(p - 0.5) <= tolerance.probability for p in pinned[key])
        flips[split] = FLIP_ALLOWANCE * near / len(pinned[key])
    for metric in METRICS:
        if metric not in pinned:
            continue
        was, now = pinned[metric], computed[metric]
        allowed = METRIC_TOLERANCE + flips.get(metric.split("_")[0], 0.0)
        if not abs(now - was) <= allowed:
            found.append(moved(name, f"{metric} {was:.4f} → {now:.4f}, |Δ| {abs(now - was):.2g} > {allowed:.2g}"))
    return found


def largest_deviations(pinned: dict, computed: dict) -> dict[str, float]:
    """What moved and by how much (max |Δp| per split, relative Δ of best_val_ppl, |Δ| per metric)."""
    found = {}
    for key, was in pinned.items():
        now = computed.get(key)
        if now is None:
            continue
        if key.endswith("_prob") and len(was) == len(now):
            found[key] = probability_deviation(was, now)[0]
        elif key == "best_val_ppl":
            found[key] = abs(now - was) / was
        elif not key.endswith("_prob"):
            found[key] = abs(now - was)
    return found


def read_goldens(path: Path = GOLDEN_FILE) -> dict:
    """The pinned goldens: ``{"protocol_version": ..., "torch": ..., "transformers": ..., "cells":
    {name: numbers}}`` (the library versions are a record: an upgrade that moves a number fails too)."""
    return json.loads(Path(path).read_text())


def version_problem(goldens: dict, path: Path = GOLDEN_FILE) -> str | None:
    """A one-line request to regenerate when the goldens were made under another protocol version."""
    made, current = goldens.get("protocol_version"), protocol_version()
    if made != current:
        return (
            f"{Path(path).name} was made under protocol {made}, this code is {current}: regenerate "
            f"the goldens (`make goldens`) and commit them with the version bump"
        )
    return None


def write_goldens(cells: dict, path: Path = GOLDEN_FILE, **about) -> None:
    """Write the goldens (one line per number list, so a diff shows which cell moved), atomically."""
    import torch
    import transformers

    header = {
        "protocol_version": protocol_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        **about,
    }
    lines = ["{"] + [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in header.items()] + ['  "cells": {']
    names = list(cells)
    for position, name in enumerate(names):
        entries = list(cells[name].items())
        lines.append(f"    {json.dumps(name)}: {{")
        lines += [
            f"      {json.dumps(key)}: {json.dumps(value)}" + ("," if i < len(entries) - 1 else "")
            for i, (key, value) in enumerate(entries)
        ]
        lines.append("    }" + ("," if position < len(names) - 1 else ""))
    lines += ["  }", "}"]
    text = "\n".join(lines) + "\n"
    partial = Path(path).with_suffix(".json.partial")
    partial.write_text(text)
    os.replace(partial, path)

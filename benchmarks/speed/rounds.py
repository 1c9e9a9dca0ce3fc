"""Speed figures that hold under load: the variants of a row measured in interleaved rounds (A B C,
A B C, …) on the same batches, each figure and each ratio taken per round and summarised by its
median and spread over the rounds, beside the load average and the machine they ran on.

A ratio is formed inside each round (its two figures measured seconds apart, under the same load)
and only then summarised; a share of the matmul peak divides a round's FLOP/s by the peak measured
in that same round. Load moves every figure of a round together, so the per-round ratio is the
figure that holds, and its spread says how much it still moves.
"""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Callable, Sequence

import torch

from harness.cli.precision import cpu_bf16_supported

PEAK_TARGET = 0.5  # the target: a training step at half its precision's matmul peak or more


def interleaved(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call every variant once per round, in the dict's order every round (A B C A B C …); returns
    each variant's value of every round."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    values: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, measure in variants.items():
            values[name].append(float(measure()))
    return values


def spread(values: Sequence[float]) -> dict:
    """Median, quartiles and range of one figure over rounds, with the rounds' values themselves."""
    if not values:
        raise ValueError("no rounds to summarise")
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "median": statistics.median(ordered),
        "q1": quartiles[0],
        "q3": quartiles[2],
        "min": ordered[0],
        "max": ordered[-1],
        "rounds": list(values),
    }


def per_round(function: Callable[..., float], *series: Sequence[float]) -> list[float]:
    """``function`` of each round's values of ``series`` (rounds aligned by position)."""
    if len({len(values) for values in series}) != 1:
        raise ValueError(f"series of unequal rounds: {[len(values) for values in series]}")
    return [function(*values) for values in zip(*series)]


def peak_fraction(flops: float, seconds: float, peak_gflops: float) -> float:
    """Share of the matmul peak: ``flops`` done in ``seconds`` over ``peak_gflops`` (GFLOP/s)."""
    return flops / seconds / (peak_gflops * 1e9)


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages now."""
    return [round(value, 2) for value in os.getloadavg()]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else ``platform.processor()``)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the figures ran on: CPU model, cores, torch's threads, whether bf16 is native."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "native_bf16": cpu_bf16_supported(),
        "torch": torch.__version__,
    }


def summarise(per_round_figures: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, dict]]:
    """(each figure's median, each figure's spread) of figures given per round."""
    spreads = {name: spread(values) for name, values in per_round_figures.items()}
    return {name: value["median"] for name, value in spreads.items()}, spreads


def range_text(figure: dict, scale: float = 1.0, spec: str = ".0f") -> str:
    """``median [min–max]`` of a spread, each value × ``scale``."""
    return f"{figure['median'] * scale:{spec}} [{figure['min'] * scale:{spec}}–{figure['max'] * scale:{spec}}]"


def machine_line(machine_info: dict, load_before: list[float], load_after: list[float], rounds: int) -> str:
    """One line naming the machine and the load around a run."""
    return (
        f"machine: {machine_info['cpu']}, {machine_info['cores']} cores, torch threads "
        f"{machine_info['torch_threads']}, native bf16 {'yes' if machine_info['native_bf16'] else 'no'}; "
        f"{rounds} interleaved rounds, median [min–max] over rounds; load average (1/5/15 min) before "
        f"{'/'.join(f'{v:.1f}' for v in load_before)}, after {'/'.join(f'{v:.1f}' for v in load_after)}"
    )


def target_summary(rows: list[dict], name_of: Callable[[dict], str], key: str = "peak_fraction") -> str:
    """Which rows meet the ≥ 50%-of-peak target (their median share of their precision's peak)."""
    meeting = [name_of(row) for row in rows if row[key] >= PEAK_TARGET]
    missing = [f"{name_of(row)} {100 * row[key]:.0f}%" for row in rows if row[key] < PEAK_TARGET]
    return (
        f"target ≥ {100 * PEAK_TARGET:.0f}% of the precision's matmul peak: met by {len(meeting)} of {len(rows)} rows"
        + (f" ({', '.join(meeting)})" if meeting else "")
        + (f"; below: {', '.join(missing)}" if missing else "")
    )

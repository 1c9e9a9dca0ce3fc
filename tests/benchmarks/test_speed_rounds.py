"""``benchmarks.speed.rounds`` and ``benchmarks.speed.levers``: variants run interleaved (A B C A B C),
figures and ratios are formed inside a round and summarised by median and spread, a share of the
peak divides a round's FLOP/s by that round's peak, the load and the machine are recorded, and a
compiled step's account over a cell adds up."""

import copy
import json

import numpy as np
import pytest
import torch

from benchmarks.speed import levers, rounds


class FakeTimer:
    """Each variant records its call and returns its next scripted value."""

    def __init__(self, scripts: dict[str, list[float]]):
        self.calls: list[str] = []
        self.scripts = {name: iter(values) for name, values in scripts.items()}

    def variant(self, name: str):
        def measure():
            self.calls.append(name)
            return next(self.scripts[name])

        return measure


def test_variants_run_interleaved_round_after_round():
    timer = FakeTimer({"A": [1, 2, 3], "B": [4, 5, 6], "C": [7, 8, 9]})
    values = rounds.interleaved({name: timer.variant(name) for name in "ABC"}, 3)
    assert "".join(timer.calls) == "ABCABCABC"
    assert values == {"A": [1, 2, 3], "B": [4, 5, 6], "C": [7, 8, 9]}


def test_no_rounds_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        rounds.interleaved({"A": lambda: 1.0}, 0)


@pytest.mark.parametrize("values", [[3.0, 1.0, 2.0, 10.0, 4.0], [5.0, 1.0], [2.5], [1.0, 9.0, 3.0, 4.0]])
def test_spread_is_numpys_median_quartiles_and_range(values):
    figure = rounds.spread(values)
    assert figure["median"] == pytest.approx(np.median(values))
    assert figure["q1"] == pytest.approx(np.percentile(values, 25))
    assert figure["q3"] == pytest.approx(np.percentile(values, 75))
    assert (figure["min"], figure["max"]) == (min(values), max(values))
    assert figure["rounds"] == values  # in round order, not sorted


def test_a_ratio_is_formed_inside_each_round_then_summarised():
    # load doubles both figures in round 2: the per-round ratio holds at 2, the ratio of medians would not
    fast, slow = [1.0, 2.0, 1.1], [2.0, 4.0, 2.2]
    ratios = rounds.per_round(lambda a, b: b / a, fast, slow)
    assert ratios == pytest.approx([2.0, 2.0, 2.0])
    medians, spreads = rounds.summarise({"ratio": ratios, "fast": fast})
    assert medians == {"ratio": pytest.approx(2.0), "fast": 1.1}
    assert spreads["ratio"]["max"] - spreads["ratio"]["min"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="unequal"):
        rounds.per_round(lambda a, b: a / b, [1.0], [1.0, 2.0])


def test_peak_fraction_divides_a_rounds_flops_per_second_by_that_rounds_peak():
    # 6e9 FLOPs in 2 s = 3 GFLOP/s against a 12 GFLOP/s peak
    assert rounds.peak_fraction(6e9, 2.0, 12.0) == pytest.approx(0.25)
    seconds, peaks = [2.0, 4.0], [12.0, 6.0]  # a loaded round: half the speed, half the peak
    shares = rounds.per_round(lambda s, p: rounds.peak_fraction(6e9, s, p), seconds, peaks)
    assert shares == pytest.approx([0.25, 0.25])


def test_the_target_summary_names_the_rows_below_half_the_peak():
    rows = [{"name": "a", "peak_fraction": 0.55}, {"name": "b", "peak_fraction": 0.2}]
    line = rounds.target_summary(rows, lambda row: row["name"])
    assert "met by 1 of 2 rows (a)" in line and "below: b 20%" in line


def test_load_average_and_machine_are_recorded(monkeypatch):
    monkeypatch.setattr(rounds.os, "getloadavg", lambda: (6.123, 5.0, 4.0))
    assert rounds.load_average() == [6.12, 5.0, 4.0]
    info = rounds.machine()
    assert info["cores"] >= 1 and info["torch_threads"] >= 1 and isinstance(info["native_bf16"], bool)
    assert info["cpu"]
    json.dumps(info)  # goes into the JSON rows as is
    line = rounds.machine_line(info, [6.1, 5.0, 4.0], [7.0, 5.5, 4.1], 5)
    assert "before 6.1/5.0/4.0" in line and "after 7.0/5.5/4.1" in line and "5 interleaved rounds" in line


def test_a_compiled_step_pays_when_its_saving_over_a_cell_exceeds_the_compile_time():
    # a 10-minute cell of 1 s steps: 600 steps; 0.8 s compiled saves 120 s, less 100 s of compiling
    account = levers.amortised(100.0, 1.0, 0.8, 10.0)
    assert account["cell_steps"] == pytest.approx(600)
    assert account["saved_seconds_per_cell"] == pytest.approx(20.0)
    assert account["compile_seconds_per_step"] == pytest.approx(100 / 600)
    assert account["pays"]
    assert not levers.amortised(130.0, 1.0, 0.8, 10.0)["pays"]


def test_a_cell_is_priced_by_the_costs_file_else_its_default(tmp_path):
    costs = {"stages": {}, "default": {"1": 13.5}, "cells": {"gpt/full/cls": {"1": 5.6}}}
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(costs))
    assert levers.cell_minutes("gpt", "full", "cls", path) == (5.6, "gpt/full/cls")
    assert levers.cell_minutes("elmo", "full", "pool-mlp", path) == (13.5, "default")
    assert levers.cell_minutes("gpt", "full", "cls")[0] > 0  # the committed file prices it


@pytest.mark.slow
def test_a_compiled_step_draws_the_same_dropout_and_computes_the_same_gradients():
    """Inductor's kernels, torch's generator: loss and gradients match the eager step's."""
    torch.manual_seed(0)
    eager = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(approximate="tanh"), torch.nn.Dropout(0.3), torch.nn.Linear(16, 2)
    )
    twin = copy.deepcopy(eager)
    fast = levers.compiled(twin)
    inputs = torch.randn(4, 5, 8)
    losses, gradients = [], []
    for model, parameters in ((eager, eager), (fast, twin)):
        torch.manual_seed(1)
        loss = model(inputs).square().mean()
        loss.backward()
        losses.append(loss.detach())
        gradients.append([p.grad for p in parameters.parameters()])
    torch.testing.assert_close(losses[0], losses[1])
    for eager_gradient, compiled_gradient in zip(*gradients):
        torch.testing.assert_close(eager_gradient, compiled_gradient)


def test_the_compile_lever_asks_for_passive_openmp_threads(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert "OMP_WAIT_POLICY=PASSIVE" in levers.lever_error(["compile"])
    assert levers.lever_error(["foreach"]) is None
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    assert levers.lever_error(["compile", "foreach"]) is None

"""The scale-out simulation schedules a plan as the executor does (stages first, an encoder's
cells once its last stage is done) and finds the critical path; worked out by hand on a tiny plan.
Its cost model prices probes and equal-steps fractions as they run, and its file holds the
figures measured on this machine, a pretraining stage by its passes where it is priced per pass;
the calibration folder's cells, measured with the machine they ran on, hold its estimates, and
the study's folders that pretrained all their runs its wall times."""

import pytest

from benchmarks.cell.definition import Cell
from benchmarks.plan.cost_model import Costs, critical_path, simulate, study_plan
from benchmarks.plan.matrix import load_config, parse_matrix
from benchmarks.results_files.folder import read_folder
from benchmarks.results_files.recipe_folders import with_known_picks
from benchmarks.scaleout import main
from harness.tracking.runs import REPO_ROOT

CONFIG = parse_matrix(
    {
        "encoders": [{"name": "elmo-a", "run": "latest"}, {"name": "gpt-b", "run": "latest"}],
        "transfers": {"elmo": [{"name": "frozen", "heads": ["pool-mlp"]}], "gpt": [{"name": "full", "heads": ["cls"]}]},
        "fractions": [1.0],
        "seeds": 1,
        "random_control": True,
        "baselines": [],
    }
)
COSTS = Costs(
    stages={"elmo-a": [10.0], "gpt-b": [5.0, 5.0]},
    stage_cpus=1,
    cells={"gpt/full/cls": {"1": 3.0}},
    default={"1": 2.0},
    baseline=0.0,
)


def test_the_critical_path_is_the_longest_chain_of_stages_and_its_longest_cell():
    cells = study_plan(CONFIG)
    assert [cell.family for cell in cells] == ["elmo", "elmo", "gpt", "gpt"]
    assert critical_path(COSTS, cells) == pytest.approx(13.0)  # gpt-b: 5 + 5, then a 3-minute cell


@pytest.mark.parametrize("cpus, minutes", [(1, 30.0), (2, 15.0), (4, 13.0)])
def test_the_simulated_wall_time_follows_the_executors_policy(cpus, minutes):
    # 1 CPU: the stages first (10 + 5 + 5), then the cells (2 + 2 + 3 + 3). 2 CPUs: elmo-a 0-10
    # beside gpt-b's stages 0-5-10; elmo's two cells 10-12, gpt's 12-15. 4 CPUs: all four cells
    # start at 10, so the critical path (gpt-b's 10 minutes of stages + its 3-minute cell) decides.
    assert simulate(COSTS, study_plan(CONFIG), cpus) == pytest.approx(minutes)


def cell(kind: str = "pretrained", fraction: float = 1.0, args: tuple[str, ...] = (), head: str = "attn") -> Cell:
    return Cell(
        "m", kind, 0, "minilm", "minilm", "scalar", head, fraction, args=list(args), transfer="frozen", family="hf"
    )


FRACTIONS = Costs(
    stages={},
    stage_cpus=2,
    cells={"hf/frozen/attn": {"0.05": 0.5, "0.1": 1.1, "1": 5.3}},
    default={"0.05": 1.0, "0.1": 1.8, "1": 13.5},
    baseline=0.3,
    probe=0.8,
)


def test_a_probe_costs_its_measured_minutes_not_the_default_cell():
    assert FRACTIONS.cell(cell("probe")) == pytest.approx(0.8)
    assert FRACTIONS.cell(cell("baseline")) == pytest.approx(0.3)


@pytest.mark.parametrize(
    "fraction, args, minutes",
    [
        (0.1, [], 1.1),  # a tenth of the steps: the fraction's own figure
        (0.1, ["--data.equal_steps=true"], 5.3),  # the full set's steps: the full cell's figure
        (1.0, ["--data.equal_steps=true"], 5.3),
        (0.05, ["--data.equal_steps=true"], 2.65),  # 10 passes over 5% make half a full epoch
        (0.05, ["--data.equal_steps=true", "--data.max_repeats=20"], 5.3),
        (0.1, ["--data.equal_steps=true", "--data.equal_steps=false"], 1.1),  # the last flag wins
    ],
)
def test_equal_steps_cost_a_full_cell_at_any_fraction_the_repeats_reach(fraction, args, minutes):
    assert FRACTIONS.cell(cell(fraction=fraction, args=args)) == pytest.approx(minutes)


def test_the_study_plan_carries_the_suites_finetune_args():
    config = {
        **CONFIG.source,
        "finetune": {"config": "configs/downstream/mrpc.yaml", "args": ["--data.equal_steps=true"]},
    }
    assert all("--data.equal_steps=true" in cell.args for cell in study_plan(parse_matrix(config)))


def test_a_chunk_is_planned_at_the_heads_its_selection_picked(tmp_path):
    """GPT's frozen selection picked `attn` for the pretrained arm at 10% and `linear` for its twin;
    a chunk whose selection folder is missing is planned at the dearest head it may pick."""
    config = load_config(REPO_ROOT / "configs/benchmarks/families-v3/gpt-frozen-runs0-2.yaml")
    source = {
        **config.source,
        "transfers": {"gpt": [{**t, "recipe_from": str(tmp_path / "none")} for t in config.source["transfers"]["gpt"]]},
    }

    def heads(matrix):
        planned = study_plan(with_known_picks(matrix, "chunk"))
        return {(c.kind, c.train_fraction): c.head for c in planned if c.kind in ("pretrained", "random")}

    assert heads(config) == {
        ("pretrained", 1.0): "attn",
        ("random", 1.0): "attn",
        ("pretrained", 0.1): "attn",
        ("random", 0.1): "linear",
    }
    assert set(heads(parse_matrix(source)).values()) == {"attn"}


def test_a_selection_folder_of_another_recipe_is_one_line(tmp_path, capsys):
    chunk = (REPO_ROOT / "configs/benchmarks/families-v3/gpt-frozen-runs3-4.yaml").read_text()
    config = tmp_path / "chunk.yaml"
    config.write_text(chunk.replace("families-v3-selection/gpt-frozen", "families-v3-selection/gpt-finetuned"))
    assert main(["--config", str(config), "--cpus", "2"]) == 2
    assert "is no selection of this recipe" in capsys.readouterr().out


def test_the_costs_file_holds_the_measured_figures():
    """The figures against cells and epochs measured on this machine (two cells at a time on 2
    cores): a frozen attn cell of the positive control 5.1-5.4 min at 100%, and as much at 10% under
    equal steps; a linear probe on cached features 0.3-1.3 min; a frozen decomp epoch 2.0-2.2x the
    pool-mlp epoch on the same features (hidden 256), so a decomp cell sits between the two."""
    costs = Costs.read(REPO_ROOT / "benchmarks" / "scaleout-costs.json")
    assert 5.1 <= costs.cell(cell()) <= 5.4
    assert 5.1 <= costs.cell(cell(fraction=0.1, args=["--data.equal_steps=true"])) <= 5.4
    assert 0.3 <= costs.cell(cell("probe")) <= 1.3
    for family in ("elmo", "ulmfit", "gpt", "hf"):
        pool_mlp, decomp = costs.cells[f"{family}/frozen/pool-mlp"]["1"], costs.cells[f"{family}/frozen/decomp"]["1"]
        assert 2.0 * pool_mlp <= decomp <= 2.2 * pool_mlp < costs.cells[f"{family}/frozen/attn"]["1"], family


def test_the_first_cell_to_read_an_arms_frozen_features_pays_for_them():
    """Each arm's features once (a twin's per seed), by the first frozen cell or probe to read
    them; a fine-tuned cell reads none."""
    costs = Costs(
        stages={},
        stage_cpus=1,
        cells={},
        default={"1": 1.0, "0.1": 1.0},
        baseline=0.0,
        probe=0.5,
        features={"minilm": 2.0},
    )
    frozen = [cell(kind, fraction) for kind in ("pretrained", "random") for fraction in (1.0, 0.1)]
    tuned = cell(args=("--model.finetune=full",))
    probe = cell("probe")
    planned = costs.planned([tuned, probe, *frozen])
    assert [planned[id(c)] for c in (tuned, probe, *frozen)] == [1.0, 2.5, 1.0, 1.0, 3.0, 1.0]


@pytest.mark.parametrize(
    "args, minutes",
    [
        ([], 30.0),  # the config's 3 passes (45 minutes) stop at its max_time
        (["--trainer.max_epochs=1"], 15.0),
        (["--trainer.max_epochs=3", "--trainer.max_time=null"], 45.0),  # no cap
        (["--trainer.max_time=00:00:40:30"], 40.5),
    ],
)
def test_a_stage_priced_per_pass_costs_its_passes_capped_by_its_max_time(tmp_path, args, minutes):
    config = tmp_path / "lm.yaml"
    config.write_text('trainer:\n  max_epochs: 3\n  max_time: "00:00:30:00"\n')
    costs = Costs(
        stages={"gpt-b": [{"per_pass": 15.0}], "elmo-a": [10.0]},
        stage_cpus=2,
        cells={},
        default={"1": 2.0},
        baseline=0.0,
    )
    encoders = [{"name": "gpt-b", "pretrain": {"config": str(config), "args": args}}, {"name": "elmo-a", "run": "x"}]
    assert costs.only(encoders).stages == {"gpt-b": [pytest.approx(minutes)], "elmo-a": [10.0]}


def test_the_budgets_one_pass_of_gpt_costs_its_measured_stage_not_the_full_studys():
    """GPT on MRPC + Reuters: one pass took 20.1 minutes on one thread (bf16; families-v3/gpt-frozen-runs0-2,
    two stages side by side); the full study's config runs up to 3 passes, stopped at 58 minutes."""
    costs = Costs.read(REPO_ROOT / "benchmarks" / "scaleout-costs.json")
    gpt = {"name": "gpt-reuters", "pretrain": {"config": "configs/pretrain/gpt.yaml"}}
    budget = {**gpt, "pretrain": {**gpt["pretrain"], "args": ["--trainer.max_epochs=1", "--trainer.max_time=null"]}}
    assert costs.only([budget]).stages["gpt-reuters"] == [pytest.approx(20.1)]
    assert costs.only([gpt]).stages["gpt-reuters"] == [pytest.approx(58.0)]  # 3 passes: 60.3, capped


def test_a_baseline_is_scheduled_once():
    costs = Costs(stages=COSTS.stages, stage_cpus=1, cells=COSTS.cells, default=COSTS.default, baseline=1.0)
    assert simulate(costs, study_plan(parse_matrix({**CONFIG.source, "baselines": ["majority"]})), 1) == pytest.approx(
        31.0
    )


def test_only_the_configs_encoders_are_pretrained(tmp_path, capsys):
    """The costs file holds every study's stages; a study pays for its own encoders' alone."""
    config = tmp_path / "study.yaml"
    config.write_text(
        "encoders: [{name: minilm, run: 'reference:all-minilm-l6-v2'}]\n"
        "transfers: {hf: [{name: frozen, heads: [pool-mlp]}]}\nfractions: [1.0]\nseeds: 1\n"
        "baselines: []\n"
    )
    costs = tmp_path / "costs.json"
    costs.write_text(
        '{"stages": {"minilm": [], "elmo-a": [60.0]}, "cells": {"hf/frozen/pool-mlp": {"1": 3.0}}, '
        '"default": {"1": 13.5}}'
    )
    assert main(["--config", str(config), "--costs", str(costs), "--cpus", "1"]) == 0
    output = capsys.readouterr().out
    assert "2 cells, 1 encoders, 0.1 CPU-hours" in output and "| 1 | 0.10 h |" in output


CALIBRATION = REPO_ROOT / "results" / "calibration"
STUDY_CELLS = REPO_ROOT / "results" / "study-cells"
ELMO_FINETUNED = REPO_ROOT / "results" / "families-v3-selection" / "elmo-finetuned"
ULMFIT_FINETUNED = REPO_ROOT / "results" / "families-v3-selection" / "ulmfit-finetuned"
TIMED = [CALIBRATION, STUDY_CELLS, ELMO_FINETUNED, ULMFIT_FINETUNED]  # the folders the costs file is calibrated on


@pytest.mark.parametrize("folder", TIMED, ids=lambda folder: folder.name)
def test_a_timed_folder_records_what_its_times_were_measured_on(folder):
    """A calibration folder says what ran it, and its cells had a core each (one thread, no more cells
    at a time than CPUs), as the costs file's one-core minutes assume."""
    benchmark, cells = read_folder(folder)
    machine = benchmark["machine"]
    assert machine["cpu_model"] and machine["finetune_threads"] == 1 and machine["jobs"] <= machine["cpus"]
    assert machine["precision"] in ("bf16-mixed", "32-true") and benchmark["wall_seconds"] > 0
    assert cells and all(cell.record["precision"] == machine["precision"] for cell in cells)


@pytest.mark.parametrize("folder", TIMED, ids=lambda folder: folder.name)
def test_the_cost_model_holds_every_timed_cell_within_a_quarter_of_its_recorded_time(folder):
    """The costs file's figures against the cells each folder ran (one at a time, after bf16 by
    default and one validation schedule): the calibration's tiny GPT (its `gpt-calibration/…`
    figures), the study's own GPT cells (`gpt/full/cls`, `gpt/frozen/attn`) and ELMo's and ULMFiT's
    fine-tuned recipe selections (`elmo/gradual/attn`, `ulmfit/gradual/concat-pool`). Each cell's
    recorded CPU minutes (``time_cpu_s``: a single-threaded cell's minutes of one core, which the
    load of a shared machine stretches far less than its wall time) within ±25% of the model's
    estimate — the 10% cells with equal steps priced at the 100% figure, the random-init twins at
    their pretrained arm's, the first frozen cell of each arm with its features."""
    costs = Costs.read(REPO_ROOT / "benchmarks" / "scaleout-costs.json")
    _, cells = read_folder(folder)
    fractions = {cell.record["cell"]["train_fraction"] for cell in cells}
    assert fractions == {1.0, 0.1} and {cell.record["cell"]["kind"] for cell in cells} == {"pretrained", "random"}
    planned = [Cell(**result.record["cell"]) for result in cells]  # plan order: who computes the features
    estimates = costs.planned(planned, "configs/downstream/mrpc.yaml")
    for cell, result in zip(planned, cells):
        recorded = result.record["metrics"]["time_cpu_s"] / 60
        estimate = estimates[id(cell)]
        assert abs(estimate - recorded) <= 0.25 * recorded, (cell.method, estimate, recorded)


# Study folders that pretrained every run they hold (none found a stage in its store), run as a
# session runs a chunk: two tasks at a time on the 2 cores, light work beside them.
WHOLE = [REPO_ROOT / "results" / "families-v3-selection" / name for name in ("gpt-frozen", "elmo-frozen")] + [
    REPO_ROOT / "results" / "families-v3" / "elmo-frozen-runs2-3"
]


@pytest.mark.parametrize("folder", WHOLE, ids=lambda folder: folder.name)
def test_the_cost_model_holds_a_whole_studys_wall_time_within_a_quarter(folder):
    """What a session plans with: the simulated wall time of the settings a folder ran, pretraining
    included, on its machine's CPUs and at its selections' picks (as the CLI plans it), within ±25%
    of the suite's recorded ``wall_seconds``."""
    benchmark, _ = read_folder(folder)
    config = parse_matrix(benchmark["settings"], f"{folder}/benchmark.json")
    costs = Costs.read(REPO_ROOT / "benchmarks" / "scaleout-costs.json").only(config.encoders)
    cells = study_plan(with_known_picks(config, str(folder)))
    estimate = simulate(costs, cells, benchmark["machine"]["cpus"], config.finetune_config)
    recorded = benchmark["wall_seconds"] / 60
    assert abs(estimate - recorded) <= 0.25 * recorded, (estimate, recorded)

"""The cells of a benchmark matrix, each pretrained cell followed by its random-init twin.

Two shapes of matrix:

- **mixes × heads** (``mixes``, ``heads``, ``learning_curve``): frozen features of each encoder
  under every mix and head, plus a learning curve — the ELMo setting;
- **transfers** (``transfers``, ``fractions``): for each encoder, the ways its *family* transfers
  — e.g. frozen features under a mix, or fine-tuned as its authors did — each with its heads and
  its own finetune config, at every labelled fraction. The family comes from the encoder's
  pretrain run (tag ``family``).

An encoder entry with ``pretraining_runs`` stands for one encoder per run (``<name>+run<r>``): run
r's cells take the seeds ``r S .. r S + S - 1`` of the setting's S seeds (distinct across runs), all
runs' cells form one method named after the entry (their ``encoder``; ``encoder_run`` tells the runs
apart, as the report's pretraining-runs statistics read them), and the twin has no run level: its cell at seed
k, one method over all runs, pairs with the pretrained cell of seed k (and copies run r's architecture).

Either way, a twin differs from its pretrained cell only in the encoder's weights: same config,
mix, head, fraction and seed; and each cell is identified by everything that defines its result.
"""

from __future__ import annotations

from benchmarks.cell.definition import Cell
from benchmarks.cell.method_names import PROBE_SUFFIX, fraction_suffix, grid_point, twin_name
from benchmarks.plan.matrix import LAYERS, Matrix
from benchmarks.plan.pretraining_runs import RUN_INDEX, method_encoder
from downstream.model.settings import Mix
from harness.errors import UserError


def expand_mixes(mixes: list[str], num_layers: int) -> list[str]:
    """``layers`` stands for each single layer below the top (``top`` is layer L-1)."""
    expanded = []
    for mix in mixes:
        expanded += [f"layer:{k}" for k in range(num_layers - 1)] if mix == LAYERS else [mix]
    return list(dict.fromkeys(expanded))


def mix_head_settings(matrix: Matrix, encoder: dict) -> list[dict]:
    """The mixes × heads matrix and its learning curve, as per-cell settings of one encoder."""
    grid = list(matrix.lr_grid)
    settings = [
        {
            "transfer": "",
            "mix": mix,
            "head": head,
            "fraction": 1.0,
            "seeds": list(matrix.seeds),
            "config": "",
            "args": [],
            "lr_grid": grid,
        }
        for mix in expand_mixes(list(matrix.mixes), encoder["num_layers"])
        for head in matrix.heads
    ]
    curve = matrix.learning_curve
    if curve:
        settings += [
            {
                "transfer": "",
                "mix": curve.mix,
                "head": curve.head,
                "fraction": fraction,
                "seeds": list(curve.seeds),
                "config": "",
                "args": [],
                "lr_grid": grid,
            }
            for fraction in curve.fractions
            if fraction < 1.0
        ]
    return settings


def run_seeds(entry: dict, seeds) -> list[int]:
    """The seeds of one encoder's cells: ``seeds``, or for pretraining run r with S seeds a run,
    ``r S + seed`` for each (run r of ``pretraining_runs`` uses seeds 2r and 2r+1 when S = 2)."""
    if RUN_INDEX not in entry:
        return list(seeds)
    return [entry[RUN_INDEX] * len(seeds) + seed for seed in seeds]


def matrix_entry(matrix: Matrix, encoder: dict) -> dict:
    """The matrix's entry of a described encoder (found by name; the encoder itself if none)."""
    return next((entry for entry in matrix.encoders if entry["name"] == encoder["name"]), encoder)


def transfer_settings(matrix: Matrix, encoder: dict) -> list[dict]:
    """The transfers of the encoder's family × their heads × the labelled fractions (a transfer may
    name its own ``fractions`` and ``seeds``, e.g. fewer for a costly fine-tuning, and ``encoders``: only
    those of its family, e.g. a text axis that adds corpora to one transfer only)."""
    settings = []
    for transfer in matrix.transfers.get(encoder["family"], ()):
        if transfer.encoders is not None and encoder["name"] not in transfer.encoders:
            continue
        settings += [
            {
                "transfer": transfer.name,
                "mix": transfer.mix,
                "head": head,
                "fraction": fraction,
                "seeds": list(transfer.seeds),
                "config": transfer.config,
                "args": list(transfer.args),
                "lr_grid": list(transfer.lr_grid),
                "recipe_from": transfer.recipe_from,
                "picks": transfer.picks,
            }
            for head in transfer.heads
            for fraction in transfer.fractions
        ]
    return settings


def method_name(encoder: str, setting: dict) -> str:
    """``<encoder>-<transfer>-<head>@<fraction>`` (transfers) or ``<encoder>-<mix>-<head>@<fraction>``."""
    middle = setting["transfer"] or setting["mix"]
    return f"{encoder}-{middle}-{setting['head']}{fraction_suffix(setting['fraction'])}"


def check_layers(settings: list[dict], encoder: dict) -> None:
    """Every ``layer:K`` of the matrix exists in the encoder (its L is known once it is pretrained)."""
    for mix in dict.fromkeys(setting["mix"] for setting in settings):
        try:
            Mix.parse(mix).layer_index(encoder["num_layers"])
        except ValueError as error:
            raise UserError(f"encoder '{encoder['name']}': {error}") from None


def probe_fractions(matrix: Matrix) -> list[float]:
    """The labelled fractions the matrix trains on (its ``fractions``, or its learning curve's):
    each gets probes fitted on the same subsets, whole train split first."""
    fractions = (
        matrix.fractions
        if matrix.transfers
        else [1.0, *(matrix.learning_curve.fractions if matrix.learning_curve else ())]
    )
    return sorted({float(fraction) for fraction in fractions or [1.0]} | {1.0}, reverse=True)


def baseline_cells(matrix: Matrix) -> list[Cell]:
    """The matrix's baselines: each once on the whole train split (deterministic: seed 0), and at each
    smaller labelled fraction once per seed, fitted on the very subset that seed's cells train on
    (``<baseline>@<fraction>``), so that a 10% arm is compared with TF-IDF + LR at 10% of the labels."""
    return [Cell(name, "baseline", 0) for name in matrix.baselines] + [
        Cell(f"{name}{fraction_suffix(fraction)}", "baseline", seed, train_fraction=fraction)
        for fraction in probe_fractions(matrix)
        if fraction < 1
        for seed in fraction_seeds(matrix, fraction)
        for name in matrix.baselines
    ]


def fraction_seeds(matrix: Matrix, fraction: float) -> list[int]:
    """The seeds of the cells trained on ``fraction`` of the labels (a transfer or the learning curve
    may name their own), in order."""
    if matrix.transfers:
        groups = [
            transfer.seeds
            for transfers in matrix.transfers.values()
            for transfer in transfers
            if fraction in transfer.fractions
        ]
    else:
        groups = [matrix.learning_curve.seeds] if matrix.learning_curve else []
    entries = matrix.encoders or ({},)  # each pretraining run takes seeds of its own
    return list(dict.fromkeys(seed for seeds in groups for entry in entries for seed in run_seeds(entry, seeds)))


def probe_cells(matrix: Matrix, encoder: dict, random_name: str, encoder_name: str = "") -> list[Cell]:
    """The linear probes of an encoder's frozen features and, with ``random_control``, of its twin's
    at each seed (``benchmarks.tasks.linear_probe``), at each labelled fraction: checks, not methods (no
    twin, no gap); ``encoder_name``: the method's encoder (a pretraining run's entry)."""
    arms = [("pretrained", encoder_name or encoder["name"])] + (
        [("random", random_name)] if matrix.random_control else []
    )
    return [
        Cell(
            f"{name}-{PROBE_SUFFIX}{fraction_suffix(fraction)}",
            "probe",
            seed,
            arms[0][1],
            encoder["run_id"],
            train_fraction=fraction,
            family=encoder.get("family", ""),
            encoder_identity=encoder.get("identity", ""),
            probe_of=probe_of,
        )
        for fraction in probe_fractions(matrix)
        for seed in run_seeds(matrix_entry(matrix, encoder), matrix.seeds)
        for probe_of, name in arms
    ]


def arm_recipe(setting: dict, kind: str, encoder: str, rate: float | None) -> tuple[str, float | None]:
    """An arm's head and learning rate: the setting's head at a grid point's ``rate``, or the arm's
    pick from its ``recipe_from`` folder once read (``benchmarks.plan.recipe_picks``; unread, as
    for an estimate, the setting's head and no rate)."""
    picks = setting.get("picks")
    if rate is not None or not setting.get("recipe_from") or picks is None:
        return setting["head"], rate
    pick = picks.get((kind, encoder, setting["fraction"], setting["head"]))
    if pick is None:
        raise UserError(
            f"recipe_from {setting['recipe_from']}: no pick for the {kind} arm of encoder '{encoder}' "
            f"(transfer {setting['transfer']}, head {setting['head']}, fraction {setting['fraction']:g})"
        )
    return pick.head, pick.learning_rate


def plan(matrix: Matrix, encoders: list[dict], finetune_args: list[str]) -> list[Cell]:
    """Every cell of the matrix, controls right after what they control, each encoder's linear
    probes (``linear_probe: true``: seconds each, so they come first) before its cells, then the
    baselines."""
    cells: list[Cell] = []
    entries = [matrix_entry(matrix, encoder) for encoder in encoders]
    several = len({method_encoder(entry) for entry in entries}) > 1
    for encoder, entry in zip(encoders, entries):
        name = method_encoder(entry)
        random_name = twin_name(name if several else None)
        settings = (
            transfer_settings(matrix, {**encoder, "name": name})
            if matrix.transfers
            else mix_head_settings(matrix, encoder)
        )
        check_layers(settings, encoder)
        if matrix.linear_probe:
            cells += probe_cells(matrix, encoder, random_name, name)
        for setting in settings:
            arms = [("pretrained", method_name(name, setting))]
            if matrix.random_control:
                arms.append(("random", method_name(random_name, setting)))
            for rate in setting.get("lr_grid") or [None]:  # each grid point: cells of their own, per arm
                kinds = [(kind, method if rate is None else grid_point(method, rate)) for kind, method in arms]
                for seed in run_seeds(entry, setting["seeds"]):
                    for kind, method in kinds:
                        head, chosen = arm_recipe(setting, kind, name, rate)
                        rate_args = [] if chosen is None else [f"--model.learning_rate={chosen:g}"]
                        cells.append(
                            Cell(
                                method,
                                kind,
                                seed,
                                name,
                                encoder["run_id"],
                                setting["mix"],
                                head,
                                setting["fraction"],
                                kinds[-1][1] if kind == "pretrained" and len(kinds) > 1 else "",
                                [*finetune_args, *setting["args"], *rate_args],
                                config=setting["config"],
                                transfer=setting["transfer"],
                                family=encoder.get("family", ""),
                                encoder_identity=encoder.get("identity", ""),
                                grid_of="" if rate is None else dict(arms)[kind],
                                learning_rate=chosen,
                                recipe_from=setting.get("recipe_from", "") if rate is None else "",
                            )
                        )
    cells += baseline_cells(matrix)  # checks: no twin, no gap
    return cells

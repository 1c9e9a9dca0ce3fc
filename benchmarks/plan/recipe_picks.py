"""Each arm's recipe chosen on dev in a selection of its own (``recipe_from:`` on a transfer):
a study in chunks cannot choose at report time (a chunk of pretraining runs 2–3 never sees run 0)
and a grid at every seed costs the grid's size over again. So a **selection** — a suite config
with an ``lr_grid:`` (and, where a transfer's heads say ``picked``, several heads), pretraining
run 0 only, one seed of its own — runs first and is exported to a results folder; a chunk whose
transfer names that folder plans each arm (pretrained and twin apart) at the arm's pick: the grid
point with the best mean dev score of the task's main metric (test never decides; a tie goes to the smaller rate, then
to the head named first). A pick comes only from the same recipe: the folder's encoder entry,
finetune settings and transfer (config, args, mix) must be the chunk's own."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from benchmarks.cell.method_names import twin_name
from benchmarks.cell.run_table import text_column, train_fractions
from benchmarks.plan.cells import method_name
from benchmarks.plan.lr_selection import dev_mean
from benchmarks.plan.matrix import PICKED_HEAD, Matrix, Transfer, parse_matrix
from benchmarks.plan.pretraining_runs import RUN_INDEX, method_encoder
from harness.datasets.task import CLASSES, Task
from harness.unique_keys import load_yaml

TRANSFER_RECIPE = ("config", "args", "mix")  # what a selection's transfer shares with the chunk's


@dataclass(frozen=True)
class Pick:
    """An arm's recipe: its head and learning rate."""

    head: str
    learning_rate: float | None  # None: an estimate's stand-in, before the selection has run


@dataclass(frozen=True)
class Arm:
    """One arm a transfer with ``recipe_from`` plans: its method name and what finds its grid."""

    method: str
    kind: str  # pretrained | random
    encoder: str  # the encoder entry's name (a pretraining run's entry: ``<name>``)
    transfer: str
    fraction: float
    head: str  # as declared: a head, or ``picked``

    @property
    def key(self) -> tuple:
        """How ``benchmarks.plan.cells`` finds the arm's pick."""
        return self.kind, self.encoder, self.fraction, self.head


def recipe_arms(matrix: Matrix, family: str, transfer: Transfer) -> list[Arm]:
    """The arms of ``transfer`` (with ``recipe_from``): each encoder it applies to (its ``encoders``,
    else every one of the config: name them where a config holds several families) × head ×
    fraction, pretrained and, with ``random_control``, its twin."""
    names = list(dict.fromkeys(method_encoder(entry) for entry in matrix.encoders))
    twin = twin_name if len(names) > 1 else (lambda name: twin_name())
    arms = []
    for name in transfer.encoders or names:
        for head in transfer.heads:
            for fraction in transfer.fractions:
                setting = {"transfer": transfer.name, "mix": transfer.mix, "head": head, "fraction": fraction}
                kinds = [("pretrained", name)] + ([("random", twin(name))] if matrix.random_control else [])
                arms += [
                    Arm(method_name(arm_encoder, setting), kind, name, transfer.name, fraction, head)
                    for kind, arm_encoder in kinds
                ]
    return arms


def grid_points(runs: pd.DataFrame, task: Task = CLASSES) -> pd.DataFrame:
    """A selection's grid points: per kind, encoder, transfer, fraction, head and rate, the seeds and
    the mean of the task's main dev metric, in the plan's order.

    Returns:
        DataFrame ``kind, encoder, transfer, fraction, head, learning_rate, n_seeds, <dev metric>_mean``
        (``dev_acc_mean`` for a task of classes).
    """
    keys = ["kind", "encoder", "transfer", "fraction", "head", "learning_rate"]
    mean = dev_mean(task)
    if "grid_of" not in runs:
        return pd.DataFrame(columns=[*keys, "n_seeds", mean])
    grid = runs[text_column(runs, "grid_of") != ""]
    grid = grid.assign(
        fraction=train_fractions(grid),
        learning_rate=pd.to_numeric(grid["learning_rate"]),
        **{task.monitor: pd.to_numeric(grid[task.monitor])},
    )
    return (
        grid.groupby(keys, sort=False)[task.monitor]
        .agg(["size", "mean"])
        .reset_index()
        .rename(columns={"size": "n_seeds", "mean": mean})
    )


def arm_points(points: pd.DataFrame, arm: Arm, task: Task = CLASSES) -> pd.DataFrame:
    """The grid points that decide ``arm`` (every head of its transfer and fraction where it says
    ``picked``), with ``chosen`` marking its pick: best mean of the task's main dev metric, then the
    smaller rate, then the head first in the plan."""
    mine = points[
        (points["kind"] == arm.kind)
        & (points["encoder"] == arm.encoder)
        & (points["transfer"] == arm.transfer)
        & (points["fraction"] == arm.fraction)
    ]
    if arm.head != PICKED_HEAD:
        mine = mine[mine["head"] == arm.head]
    if not len(mine):
        return mine.assign(chosen=pd.Series(dtype=bool))
    head_order = {head: index for index, head in enumerate(dict.fromkeys(mine["head"]))}
    ranked = mine.assign(_head=mine["head"].map(head_order)).sort_values(
        [dev_mean(task), "learning_rate", "_head"], ascending=[False, True, True]
    )
    return mine.assign(chosen=mine.index == ranked.index[0])


def declared_points(selection: Matrix, family: str, arm: Arm) -> dict[tuple[str, float], int]:
    """The grid points the selection's settings declare for ``arm`` (head, rate), each with its
    number of seeds: what a finished selection holds."""
    return {
        (head, rate): len(transfer.seeds)
        for transfer in selection.transfers.get(family, ())
        if transfer.name == arm.transfer and arm.fraction in transfer.fractions
        for head in transfer.heads
        if arm.head in (PICKED_HEAD, head)
        for rate in transfer.lr_grid
    }


def grid_mismatch(decided: pd.DataFrame, declared: dict[tuple[str, float], int]) -> str:
    """How an arm's grid points in the folder differ from the declared ones ("" if they do not)."""
    found = {
        (head, rate): seeds for head, rate, seeds in zip(decided["head"], decided["learning_rate"], decided["n_seeds"])
    }
    if found == declared:
        return ""
    missing = sorted(f"{head} {rate:g}" for head, rate in set(declared) - set(found))
    extra = sorted(f"{head} {rate:g}" for head, rate in set(found) - set(declared))
    short = sorted(
        f"{head} {rate:g}"
        for point, seeds in found.items()
        if point in declared and seeds != declared[point]
        for head, rate in [point]
    )
    parts = ([f"lacks {', '.join(missing)}"] if missing else []) + (
        [f"has undeclared {', '.join(extra)}"] if extra else []
    )
    return "; ".join(parts + ([f"another number of seeds at {', '.join(short)}"] if short else []))


def recipe_mismatch(matrix: Matrix, family: str, transfer: Transfer, selection: Matrix) -> str:
    """What differs between the chunk's recipe of ``transfer`` and its selection's ("" if nothing):
    the encoders' pretraining (the selection's is pretraining run 0), the finetune settings, the
    transfer's config, args and mix."""
    selected = {method_encoder(entry): entry for entry in selection.encoders if entry.get(RUN_INDEX, 0) == 0}
    for entry in matrix.encoders:
        name = method_encoder(entry)
        if transfer.encoders is not None and name not in transfer.encoders:
            continue
        if name not in selected:
            return f"its encoder '{name}' is not there (as pretraining run 0)"
        if pretraining(entry) != pretraining(selected[name]):
            return f"encoder '{name}' is pretrained otherwise there"
    if (selection.finetune_config, selection.finetune_args) != (matrix.finetune_config, matrix.finetune_args):
        return "its `finetune` settings differ"
    theirs = [other for other in selection.transfers.get(family, ()) if other.name == transfer.name]
    if not theirs:
        return f"it has no transfer '{transfer.name}' of {family}"
    for key in TRANSFER_RECIPE:
        if any(getattr(other, key) != getattr(transfer, key) for other in theirs):
            return f"its transfer '{transfer.name}' has another `{key}`"
    return ""


def pretraining(entry: dict):
    """An encoder entry's pretraining stages less the ``--seed_everything`` each pretraining run
    adds (its own run), or the run it names."""
    if "pretrain" not in entry:
        return entry.get("run")
    stages = entry["pretrain"] if isinstance(entry["pretrain"], list) else [entry["pretrain"]]
    return [
        {**stage, "args": [arg for arg in stage.get("args", []) if not arg.startswith("--seed_everything=")]}
        for stage in stages
    ]


def selection_settings(benchmarks: list[dict], configs: list[Path]) -> list[Matrix]:
    """The matrices of a report's folders (their recorded settings) and of its registered configs
    that name a selection (``recipe_from``): the ones whose picks the report lists."""
    sources = [
        (benchmark["settings"], f"{benchmark.get('folder', 'benchmark')}/benchmark.json")
        for benchmark in benchmarks
        if benchmark.get("settings")
    ]
    sources += [(load_yaml(Path(path)), str(path)) for path in configs]
    return [
        parse_matrix(source, where)
        for source, where in sources
        if any(
            isinstance(setting, dict) and setting.get("recipe_from")
            for settings in (source.get("transfers") or {}).values()
            for setting in (settings if isinstance(settings, list) else [settings])
        )
    ]


ESTIMATE_HEAD = "attn"  # a picked head before its selection has run: the dearest head a selection declares


def with_estimated_picks(matrix: Matrix) -> Matrix:
    """For an estimate of the cost: ``matrix`` with each ``recipe_from`` arm whose pick is not read
    yet at its declared head (``picked``: the dearest, ``attn``) and no rate."""
    transfers = {
        family: tuple(
            replace(
                transfer,
                picks={
                    arm.key: Pick(ESTIMATE_HEAD if arm.head == PICKED_HEAD else arm.head, None)
                    for arm in recipe_arms(matrix, family, transfer)
                },
            )
            if transfer.recipe_from and transfer.picks is None
            else transfer
            for transfer in settings
        )
        for family, settings in matrix.transfers.items()
    }
    return replace(matrix, transfers=transfers)

"""Reading each arm's pick from a committed selection folder (``recipe_from:`` on a transfer;
``benchmarks.plan.recipe_picks`` says how a pick is made): the chunk's matrix with every arm's
pick, checked against the selection's recipe and grid before anything runs (or, for a cost
estimate, once the folders exist), and the report's table of every arm's grid points and pick."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from benchmarks.cell.method_names import twin_by_encoder
from benchmarks.plan.cells import run_seeds
from benchmarks.plan.lr_selection import dev_mean
from benchmarks.plan.matrix import Matrix, parse_matrix, repo_path
from benchmarks.plan.recipe_picks import (
    Pick,
    arm_points,
    declared_points,
    grid_mismatch,
    grid_points,
    recipe_arms,
    recipe_mismatch,
)
from benchmarks.results_files.folder import ResultSet
from harness.datasets.task import CLASSES, Task
from harness.errors import UserError


def selection_folders(matrix: Matrix) -> list[str]:
    """Every ``recipe_from`` folder ``matrix`` names, once each, in the order of its transfers."""
    named = (transfer.recipe_from for settings in matrix.transfers.values() for transfer in settings)
    return [folder for folder in dict.fromkeys(named) if folder]


def is_exported(folder: str) -> bool:
    """Whether ``folder`` holds a results folder (its ``benchmark.json``)."""
    return (repo_path(folder) / "benchmark.json").is_file()


def selection_path(folder: str, where: str) -> Path:
    """The results folder ``recipe_from: folder`` names; one line when there is none there yet."""
    if not is_exported(folder):
        raise UserError(
            f"{where}: recipe_from {folder}: no results folder there (run the selection config and "
            f"export it with `python -m benchmarks export --out {folder}` first)"
        )
    return repo_path(folder)


def check_selections_exist(matrix: Matrix, where: str) -> None:
    """One line for the first ``recipe_from`` folder not there yet: checked before the data set is
    read, which may mean a download."""
    for folder in selection_folders(matrix):
        selection_path(folder, where)


def read_selection(
    folder: str, where: str, data_digest: str | None = None
) -> tuple[dict, pd.DataFrame, set[int], Task]:
    """A selection folder's settings, grid points, seeds and task; a missing or unreadable folder is one line."""
    results = ResultSet([selection_path(folder, where)], data_digest)
    runs, _ = results.runs_and_predictions()
    seeds = set(runs["seed"].astype(int)) if "seed" in runs else set()
    return results.benchmarks[0].get("settings") or {}, grid_points(runs, results.task), seeds, results.task


def with_picks(matrix: Matrix, where: str, data_digest: str | None = None) -> Matrix:
    """``matrix`` with every ``recipe_from`` transfer's picks read from its folder (``Transfer.picks``),
    before anything runs: a missing folder, a folder of another recipe or data set, or an arm without
    grid points there is one line naming the config, the folder and the arm."""
    transfers, read = {}, {}
    for family, settings in matrix.transfers.items():
        resolved = []
        for transfer in settings:
            if not transfer.recipe_from:
                resolved.append(transfer)
                continue
            folder = transfer.recipe_from
            if folder not in read:
                source, points, seeds, task = read_selection(folder, where, data_digest)
                read[folder] = (parse_matrix(source, f"{folder}/benchmark.json"), points, seeds, task)
            selection, points, seeds, task = read[folder]
            key = f"{where}: transfers.{family}.{transfer.name}: recipe_from {folder}"
            mismatch = recipe_mismatch(matrix, family, transfer, selection)
            if mismatch:
                raise UserError(f"{key} is no selection of this recipe: {mismatch}")
            shared = seeds & {seed for entry in matrix.encoders for seed in run_seeds(entry, transfer.seeds)}
            if shared:
                raise UserError(
                    f"{key}: its seeds {sorted(shared)} are this chunk's too; a selection takes a seed of "
                    f"its own, so that the cells it chose on are not the ones reported"
                )
            picks = {}
            for arm in recipe_arms(matrix, family, transfer):
                decided = arm_points(points, arm, task)
                if not len(decided):
                    raise UserError(
                        f"{key} holds no grid points of arm `{arm.method}` ({arm.kind}, head {arm.head}, "
                        f"fraction {arm.fraction:g})"
                    )
                unfinished = grid_mismatch(decided, declared_points(selection, family, arm))
                if unfinished:
                    raise UserError(
                        f"{key}: the grid of arm `{arm.method}` is not the one its settings declare: {unfinished}"
                    )
                best = decided[decided["chosen"]].iloc[0]
                picks[arm.key] = Pick(str(best["head"]), float(best["learning_rate"]))
            resolved.append(replace(transfer, picks=picks))
        transfers[family] = tuple(resolved)
    return replace(matrix, transfers=transfers)


def with_known_picks(matrix: Matrix, where: str) -> Matrix:
    """For an estimate of the cost: ``matrix`` with its picks read (:func:`with_picks`) once every
    ``recipe_from`` folder it names exists; else as it is (the estimate takes each arm's dearest head)."""
    folders = selection_folders(matrix)
    if folders and all(is_exported(folder) for folder in folders):
        return with_picks(matrix, where)
    return matrix


def recipe_table(matrices: list[Matrix], twins_by_encoder: bool = False, task: Task = CLASSES) -> pd.DataFrame:
    """For a report: every ``recipe_from`` arm of ``matrices`` with its grid points and pick, from
    the folders that exist (a selection not run yet is left out). ``twins_by_encoder``: a twin's arm
    is named ``random(<encoder>)-…``, as a report over several encoders names its twins' methods.

    Returns:
        DataFrame ``method, folder, head, learning_rate, n_seeds, <dev metric>_mean, chosen``
        (``dev_acc_mean`` for a task of classes).
    """
    columns = ["method", "folder", "head", "learning_rate", "n_seeds", dev_mean(task), "chosen"]
    frames, read, seen = [], {}, set()
    for matrix in matrices:
        for family, settings in matrix.transfers.items():
            for transfer in settings:
                folder = transfer.recipe_from
                if not folder or not (repo_path(folder) / "benchmark.json").is_file():
                    continue
                if folder not in read:
                    read[folder] = read_selection(folder, folder)[1]  # the grid points (of the report's task)
                for arm in recipe_arms(matrix, family, transfer):
                    by_encoder = twins_by_encoder and arm.kind == "random"
                    method = twin_by_encoder(arm.method, arm.encoder) if by_encoder else arm.method
                    if (method, folder) not in seen:
                        seen.add((method, folder))
                        frames.append(arm_points(read[folder], arm, task).assign(method=method, folder=folder))
    frames = [frame for frame in frames if len(frame)]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)

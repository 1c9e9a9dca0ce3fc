"""Folders checked against the study's registered plan (``report --registered <config>...``): each
config's cells (seeds × pretraining runs × arms, ``benchmarks.plan.cost_model.study_plan``) are
what its folder must hold, so a dropped seed, a whole dropped chunk or an added folder is seen,
never read as a study with fewer or more pairs.

A folder no registered config names, or a cell its config does not plan, is a one-line refusal. A
planned cell that is missing (from a folder, or a chunk whose folder is absent while its methods'
other cells are in) is a one-line refusal too, unless the report is told the study lost it
(``--incomplete``): then each comparison it touches is marked incomplete in the report and in
``results.csv``. Baselines are exempt: deterministic, and fitted by the report where a folder
lacks them (``benchmarks.report.fraction_baselines``). A chunk none of whose methods has a cell
yet is a chunk not run: its registered comparisons count with p = 1
(``benchmarks.stats.preregistration``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmarks.cell.method_names import twin_by_encoder, twin_name
from benchmarks.plan.cost_model import study_plan
from benchmarks.plan.matrix import load_config
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN
from harness.errors import UserError

INCOMPLETE_COLUMN = "planned_cells_missing"  # results.csv, only where a comparison lost cells
EXEMPT_KINDS = ("baseline",)


def plan_slot(fields: dict) -> tuple:
    """What a folder's cell (its record's ``cell``) or a planned cell is, to compare the two."""
    return fields["method"], fields["kind"], int(fields["seed"]), float(fields["train_fraction"])


def shown_method(cell, twins_by_encoder: bool) -> str:
    """A planned cell's method as the report names it (``random(<encoder>)-…`` for a twin where
    the report holds several encoders, as ``ResultSet.name_twins_by_encoder`` does)."""
    is_twin = "random" in (cell.kind, cell.probe_of) and cell.method.startswith(f"{twin_name()}-")
    return twin_by_encoder(cell.method, cell.encoder) if twins_by_encoder and is_twin else cell.method


def describe(slot: tuple) -> str:
    method, kind, seed, fraction = slot
    return f"{method[:80]!r} ({kind}) seed {seed} at fraction {fraction:g}"


def check_plan(
    benchmarks: list[dict], folder_cells: dict[str, list[dict]], configs: list[Path], twins_by_encoder: bool, lost: bool
) -> dict[str, list[str]]:
    """Refuse folders and cells the registered ``configs`` do not plan, and planned cells that are
    missing unless ``lost`` (the study lost them); returns, per method as the report names it, the
    planned cells it lacks (empty when the folders hold the plan)."""
    if not configs:
        return {}
    plans = {}
    for path in configs:
        matrix = load_config(Path(path))
        plans[matrix.name] = (path, study_plan(matrix))
    present = {benchmark["benchmark"]: benchmark["folder"] for benchmark in benchmarks}
    for name, folder in present.items():
        if name not in plans:
            raise UserError(
                f"{folder}: benchmark {name[:80]!r} is not one the study registered (--registered "
                f"{', '.join(str(path) for path, _ in plans.values())[:200]}): a folder outside its plan"
            )
    folder_slots = {folder: [plan_slot(fields) for fields in cells] for folder, cells in folder_cells.items()}
    reported = {(fields["method"], fields["encoder"]) for cells in folder_cells.values() for fields in cells}
    missing: dict[str, list[str]] = {}
    for name, (path, cells) in plans.items():
        planned = {plan_slot(vars(cell)): cell for cell in cells}
        folder = present.get(name)
        found = set(folder_slots.get(folder, ())) if folder else set()
        extra = sorted(found - set(planned))
        if extra:
            raise UserError(
                f"{folder}: a cell {path} does not plan, {describe(extra[0])} ({len(extra)} such "
                f"cell(s)): added by hand?"
            )
        absent = [slot for slot, cell in planned.items() if slot not in found and cell.kind not in EXEMPT_KINDS]
        if folder is None and not {(planned[slot].method, planned[slot].encoder) for slot in absent} & reported:
            continue  # a chunk not run yet: none of its methods (of its encoders: twins share names) is in
        for slot in absent:
            if not lost:
                raise UserError(
                    f"{folder or name}: {describe(slot)} is planned by {path} but not in the folders "
                    f"({len(absent)} such cell(s)); restore it, or report with --incomplete to mark its "
                    f"comparison incomplete"
                )
            method = shown_method(planned[slot], twins_by_encoder)
            missing.setdefault(method, []).append(f"seed {slot[2]} ({folder or f'no folder for {name}'})")
    return missing


def mark_incomplete(results: pd.DataFrame, runs: pd.DataFrame, missing: dict[str, list[str]]) -> pd.DataFrame:
    """``results`` with ``planned_cells_missing`` (the cells each row's comparison lacks: its own and
    its control's) where some comparison lost cells; unchanged otherwise."""
    if not missing:
        return results
    control_of = dict(zip(runs["method"], runs["control"].fillna(""))) if "control" in runs else {}
    counts = [
        len(missing.get(method, [])) + (len(missing.get(control_of[method], [])) if control_of.get(method) else 0)
        for method in results["method"]
    ]
    table = results.copy()
    place = table.columns.get_loc(PREREGISTERED_COLUMN) if PREREGISTERED_COLUMN in table else len(table.columns)
    table.insert(place, INCOMPLETE_COLUMN, counts)  # in the declared order (``benchmarks.stats.results_columns``)
    return table


def incomplete_notes(missing: dict[str, list[str]]) -> list[str]:
    """The report's remark on each method that lacks planned cells."""
    return [
        f"**incomplete**: `{method}` lacks {len(lost)} planned cell(s) ({', '.join(lost[:4])}"
        f"{', …' if len(lost) > 4 else ''}): its comparisons are over fewer pairs than registered"
        for method, lost in missing.items()
    ]

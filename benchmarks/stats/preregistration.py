"""The pre-registered family of comparisons: a matrix's ``comparisons:`` (methods whose gap to the
random twin answers the study's question), written down before the cells run. Holm's adjustment
goes over exactly those, so adding an exploratory row, a positive control or another chunk's
extra methods never moves a registered claim; every other twin gap is exploratory (its CI and
raw p, no adjustment).

A study run in chunks registers the union of its chunks' lists (each results folder keeps its
matrix in ``benchmark.json``). A registered comparison without a result yet (a chunk not run) enters
Holm with p = 1: the adjustment of the ones present is then already the final study's, never
smaller, and the report names what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.stats.gaps import PROBE_ADJUSTED_COLUMN, PROBE_GAP_COLUMNS, PVALUE_COLUMN, TFIDF_REGISTERED_COLUMN
from benchmarks.stats.multiplicity import holm
from benchmarks.stats.paired_seeds import SEEDS_T_ADJUSTED_COLUMN, SEEDS_T_COLUMNS
from benchmarks.stats.pretraining_runs import (
    CHECKPOINTS_ADJUSTED_COLUMN,
    CHECKPOINTS_COLUMNS,
    REGISTERED_ADJUSTED_COLUMN,
    REGISTERED_COLUMNS,
)

PREREGISTERED_COLUMN = "preregistered"  # results.csv: the row is one of the registered comparisons
ADJUSTED_COLUMN = "p_adjusted"


@dataclass(frozen=True)
class Family:
    """The registered comparisons and which of them have no gap to adjust yet."""

    registered: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.registered)


def registered_comparisons(settings: list[dict | None]) -> tuple[str, ...]:
    """The union of the ``comparisons:`` of several matrices (their ``source``/``settings``), in order."""
    names: dict[str, None] = {}
    for matrix in settings:
        for name in (matrix or {}).get("comparisons") or []:
            names[str(name)] = None
    return tuple(names)


def adjust_registered(results: pd.DataFrame, registered: tuple[str, ...]) -> tuple[pd.DataFrame, Family | None]:
    """``results`` with ``p_adjusted`` = Holm over exactly the ``registered`` methods (NaN on every
    other row), and the same, each beside its p where the table has it, for the "these checkpoints"
    reading's ``checkpoints_p``, study v3's registered test's ``registered_p``, the sensitivity
    reading's ``seeds_t_p``, the twin's probe's ``p_vs_twin_probe`` and TF-IDF's ``p_vs_tfidf``
    (``checkpoints_p_adjusted``, ``registered_p_adjusted``, ``seeds_t_p_adjusted``,
    ``p_vs_twin_probe_adjusted`` and ``p_vs_tfidf_registered_adjusted``), and a ``preregistered``
    column; unchanged, with no family, when nothing is registered.

    A registered method without a row or a p (not run, or one seed pair) counts as p = 1.
    """
    if not registered:
        return results, None
    table = results.copy()
    table[ADJUSTED_COLUMN], missing = registered_holm(table, PVALUE_COLUMN, registered)
    for p_column, adjusted_column, after in (
        (CHECKPOINTS_COLUMNS[2], CHECKPOINTS_ADJUSTED_COLUMN, CHECKPOINTS_COLUMNS[2]),
        (REGISTERED_COLUMNS[2], REGISTERED_ADJUSTED_COLUMN, REGISTERED_COLUMNS[2]),
        (SEEDS_T_COLUMNS[-1], SEEDS_T_ADJUSTED_COLUMN, SEEDS_T_COLUMNS[-1]),
        (PROBE_GAP_COLUMNS[3], PROBE_ADJUSTED_COLUMN, PROBE_GAP_COLUMNS[3]),
        ("p_vs_tfidf", TFIDF_REGISTERED_COLUMN, "p_vs_tfidf_adjusted"),
    ):
        if p_column in table and after in table:
            adjusted, _ = registered_holm(table, p_column, registered)
            table.insert(table.columns.get_loc(after) + 1, adjusted_column, adjusted)
    table[PREREGISTERED_COLUMN] = table["method"].isin(registered)
    return table, Family(tuple(registered), missing)


def registered_holm(table: pd.DataFrame, column: str, registered: tuple[str, ...]) -> tuple[list, tuple[str, ...]]:
    """Holm over the ``registered`` methods' p-values in ``column`` (a missing one counts as 1): the
    adjusted value of each row (NaN off the family and where the row has no p), and the missing names."""
    p_values = dict(zip(table["method"], pd.to_numeric(table[column], errors="coerce")))
    present = [name for name in registered if pd.notna(p_values.get(name, np.nan))]
    missing = tuple(name for name in registered if name not in present)
    adjusted = dict(zip(registered, holm([p_values[name] if name in present else 1.0 for name in registered])))
    return [adjusted[method] if method in present else np.nan for method in table["method"]], missing


def family_text(family: Family | None, comparisons: int | None = None) -> str:
    """How the report's ``p_adjusted`` was made, for its headers and remarks."""
    if family is None:
        return f"Holm over the report's{'' if comparisons is None else f' {comparisons}'} twin comparisons"
    return f"Holm over the {family.size} pre-registered comparisons"


def missing_note(family: Family | None) -> list[str]:
    """A remark naming the registered comparisons that have no gap yet, or nothing."""
    if family is None or not family.missing:
        return []
    verb = "has" if len(family.missing) == 1 else "have"
    return [
        f"{len(family.missing)} of the {family.size} pre-registered comparisons {verb} no tested gap yet "
        f"({', '.join(f'`{name}`' for name in family.missing)}): Holm counts each with p = 1, so the adjusted "
        f"p-values shown are those of the finished study or larger."
    ]

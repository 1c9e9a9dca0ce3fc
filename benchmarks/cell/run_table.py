"""Readers of a benchmark's per-run table (``runs.csv``: a row per finished cell with its
``method, seed, encoder, kind, transfer, mix, head, train_fraction, control, encoder_layers``,
metrics and mix weights), shared by the results table, the remarks, the report and the figures.

Everything about a run is read from its columns, never from its method's name.
"""

from __future__ import annotations

import re

import pandas as pd

from downstream.model.settings import Mix

SETTING = ["encoder", "kind", "transfer", "mix", "head"]  # a cell's setting, without fraction and seed
WEIGHT_COLUMN = re.compile(r"mix_weight_\d+")
PREDICTION_KEY = "cell_hash"  # a results folder's rows: their predictions' key (run ids may repeat across folders)


def prediction_keys(runs: pd.DataFrame) -> pd.Series:
    """The key of each row's test predictions: its cell hash where the row came from a results
    folder, else its run id (a tracking store's, or a baseline the report fitted)."""
    if PREDICTION_KEY not in runs:
        return runs["run_id"]
    return runs[PREDICTION_KEY].where(runs[PREDICTION_KEY].notna() & (runs[PREDICTION_KEY] != ""), runs["run_id"])


def text_column(runs: pd.DataFrame, column: str) -> pd.Series:
    """A column as strings, "" where missing (an all-"" column when absent)."""
    return runs[column].fillna("").astype(str) if column in runs else pd.Series("", index=runs.index)


def train_fractions(runs: pd.DataFrame) -> pd.Series:
    """The ``train_fraction`` column as numbers, 1.0 where missing or absent."""
    values = runs["train_fraction"] if "train_fraction" in runs else pd.Series(1.0, index=runs.index)
    return pd.to_numeric(values, errors="coerce").fillna(1.0)


def controls(runs: pd.DataFrame) -> dict[str, str]:
    """``{method: control method}`` from the first non-empty ``control`` among a method's runs."""
    table = pd.DataFrame({"method": runs["method"], "control": text_column(runs, "control")})
    table = table[table["control"] != ""]
    return dict(table.groupby("method", sort=False)["control"].first())


def curve_methods(runs: pd.DataFrame) -> set[str]:
    """The methods trained on a fraction of the training set (learning-curve points)."""
    return set(runs.loc[train_fractions(runs) < 1, "method"])


def settings(runs: pd.DataFrame) -> pd.DataFrame:
    """The ``SETTING`` columns as text, with ``fraction`` and ``method``."""
    table = pd.DataFrame({key: text_column(runs, key) for key in SETTING})
    return table.assign(fraction=train_fractions(runs), method=runs["method"])


def full_fraction_method(runs: pd.DataFrame, setting: tuple) -> str | None:
    """The method of ``setting`` (values of ``SETTING``) on the whole training set, if it ran."""
    table = settings(runs)
    same = (table[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1) & (table["fraction"] == 1.0)
    return table.loc[same, "method"].iloc[0] if same.any() else None


def setting_label(setting: tuple) -> str:
    """A legend entry for a cell's setting (values of ``run_table.SETTING``): ``elmo · scalar ·
    pool-mlp``, the twin ``random(elmo) · scalar · pool-mlp``."""
    values = dict(zip(SETTING, setting))
    encoder = values["encoder"] if values["kind"] != "random" else f"random({values['encoder']})"
    return " · ".join(part for part in (encoder, values["transfer"] or values["mix"], values["head"]) if part)


def weight_columns(runs: pd.DataFrame) -> list[str]:
    """``mix_weight_<k>`` columns, by k."""
    columns = [column for column in runs.columns if WEIGHT_COLUMN.fullmatch(str(column))]
    return sorted(columns, key=lambda column: int(column.rsplit("_", 1)[1]))


def encoder_layers(runs: pd.DataFrame) -> pd.Series:
    """L of each run's encoder: its ``encoder_layers`` param, else the most mix weights a run of
    the same encoder logged; 0 where neither says."""
    weights = weight_columns(runs)
    counted = runs[weights].notna().sum(axis=1) if weights else pd.Series(0, index=runs.index)
    per_encoder = counted.groupby(text_column(runs, "encoder")).transform("max")
    logged = pd.to_numeric(runs["encoder_layers"], errors="coerce") if "encoder_layers" in runs else None
    return (per_encoder if logged is None else logged.fillna(per_encoder)).astype(int)


def single_layer(mix: str, num_layers: int) -> int | None:
    """The layer a ``top`` or ``layer:K`` mix reads (None for a mix of all layers, or when L is unknown)."""
    try:
        parsed = Mix.parse(mix)
    except ValueError:
        return None
    if not parsed.single_layer or (parsed.kind == "top" and num_layers < 1):
        return None
    return parsed.layer if parsed.kind == "layer" else num_layers - 1

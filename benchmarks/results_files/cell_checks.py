"""One cell of a results folder, checked before it is used: a cell is evidence, not an assertion.

Every field that decides or labels a number is derived or checked: the hash from the settings
(``spec``) under the cell's protocol; the labels a report reads (method, kind, seed, fraction,
mix, head, control, encoder) from the same settings; the task's dev and test metrics (accuracy and
F1, or Pearson and Spearman) recomputed from the predictions, which must be the file beside the
cell that its record and the folder's manifest name; the rest (the encoder block, other metrics,
params) against the manifest's digests. A mismatch is one line naming the file and the field."""

from __future__ import annotations

import json
import math
import unicodedata
from pathlib import Path

import pandas as pd

from benchmarks.cell.definition import portable_args
from benchmarks.cell.method_names import grid_point, twin_name
from benchmarks.plan.pretraining_runs import is_run_of
from benchmarks.results_files import manifest as folder_manifest
from benchmarks.results_files.predictions_file import SPLITS, predictions_path, read_predictions_file
from benchmarks.results_files.record_shapes import CELL, FORMAT, read_record
from benchmarks.results_files.task_predictions import Predictions, folder_task, predictions_of
from harness.errors import UserError
from harness.protocol import newer_concerns, settings_hash

SPEC_LABELS = ("method", "kind", "seed", "train_fraction", "mix", "head", "config")  # cell field = spec's
NAME_FIELDS = ("method", "control", "encoder", "probe_of", "grid_of", "kind", "mix", "head")  # a report's row labels
TOLERANCE = 1e-9


def check_version(record: dict, path: Path) -> None:
    if record["format"] > FORMAT:
        raise UserError(f"{path}: written by a newer harness (format {record['format']}); update this checkout")
    try:
        newer = newer_concerns(record["protocol"])
    except ValueError:
        raise UserError(f"{path}: protocol {record['protocol'][:40]!r} is not a protocol version") from None
    if newer:
        raise UserError(
            f"{path}: made under protocol {record['protocol']}, newer than this harness's in "
            f"{', '.join(newer)}; update this checkout to use it"
        )
    if (
        settings_hash(record["spec"], record["protocol"]) != record["cell_hash"]
        or path.name != f"{record['cell_hash']}.json"
    ):
        raise UserError(f"{path}: its settings do not give its cell hash {record['cell_hash'][:40]}: edited by hand?")


def twin_controls(cell: dict) -> set[str]:
    """The names a pretrained cell's random twin may have: ``random-…`` or, in a plan of several
    encoders, ``random(<encoder>)-…`` (``benchmarks.plan.cells.plan``)."""
    rest = cell["method"].removeprefix(f"{cell['encoder']}-")
    return {f"{twin_name()}-{rest}", f"{twin_name(cell['encoder'])}-{rest}"}


def check_control(cell: dict, random_control: bool, path: Path) -> None:
    """A pretrained cell's control is its own twin (where the benchmark ran twins); no other cell has one."""
    if cell["kind"] == "pretrained" and not cell["method"].startswith(f"{cell['encoder']}-"):
        raise UserError(
            f"{path}: cell.method {cell['method'][:80]!r} is not a method of its encoder "
            f"{cell['encoder'][:40]!r}: edited by hand?"
        )
    if cell["kind"] == "random" and not any(
        cell["method"].startswith(f"{twin}-") for twin in (twin_name(), twin_name(cell["encoder"]))
    ):
        raise UserError(f"{path}: cell.method {cell['method'][:80]!r} of kind random is not a twin's: edited by hand?")
    expected = twin_controls(cell) if cell["kind"] == "pretrained" and random_control else {""}
    if cell["control"] not in expected:
        raise UserError(
            f"{path}: cell.control {cell['control'][:80]!r} is not {' or '.join(map(repr, sorted(expected)))}"
            f" (a {cell['kind']} cell of method {cell['method'][:80]!r}): edited by hand?"
        )


def check_names(cell: dict, path: Path) -> None:
    """A name a report shows is NFKC-normal and of visible characters: a zero-width space or a
    look-alike letter would give two identical-looking rows."""
    for field in NAME_FIELDS:
        name = cell[field]
        hidden = next((character for character in name if not character.isprintable()), None)
        if hidden is not None or unicodedata.normalize("NFKC", name) != name:
            what = f"an invisible character U+{ord(hidden):04X}" if hidden else "characters that are not NFKC-normal"
            raise UserError(f"{path}: cell.{field} {ascii(name)[:80]} holds {what}: edited by hand?")


def check_labels(record: dict, benchmark: dict, path: Path) -> None:
    """The fields a report reads beside the settings are the settings' own, and visible."""
    spec, cell, encoder = record["spec"], record["cell"], record["encoder"]
    check_names(cell, path)
    if not record["data_digest"] == spec["data"] == benchmark["data_digest"]:
        raise UserError(
            f"{path}: data_digest: a cell of another data set than its settings' or its folder's "
            f"({benchmark['dataset'][:40]})"
        )
    pairs = [(f"cell.{key}", cell[key], spec[key]) for key in SPEC_LABELS]
    pairs += [
        ("cell.args", portable_args(cell["args"]), spec["args"]),  # less where this machine's data lies
        ("cell.probe_of", cell["probe_of"], spec.get("probe_of", "")),
        ("cell.encoder_identity", cell["encoder_identity"], spec["encoder"]),
    ]
    if encoder is not None:
        run = encoder["name"] if is_run_of(encoder["name"], cell["encoder"]) else ""  # one pretraining run of several
        pairs += [
            ("encoder.identity", encoder["identity"], spec["encoder"]),
            ("encoder.name", encoder["name"], run or cell["encoder"]),
        ]
    for field, found, expected in pairs:
        if found != expected:
            raise UserError(
                f"{path}: {field} {json.dumps(found)[:80]} is not {json.dumps(expected)[:80]}, what its "
                f"settings (its hash) say: edited by hand?"
            )
    picked = cell.get("recipe_from", "")
    if (cell["grid_of"] or (cell["learning_rate"] is not None and not picked)) and cell["method"] != grid_point(
        cell["grid_of"], float(cell["learning_rate"] or 0)
    ):
        raise UserError(
            f"{path}: cell.grid_of and cell.learning_rate do not give its method "
            f"{cell['method'][:80]!r}: edited by hand?"
        )
    if picked and (
        cell["grid_of"]
        or cell["learning_rate"] is None
        or f"--model.learning_rate={cell['learning_rate']:g}" not in spec["args"]
    ):
        raise UserError(
            f"{path}: cell.learning_rate {cell['learning_rate']} is not the rate its settings train at "
            f"(picked from {picked[:80]}): edited by hand?"
        )
    random_control = (benchmark.get("settings") or {}).get("random_control", True)
    check_control(cell, random_control, path)


def check_metrics(
    record: dict, predictions: dict[str, pd.DataFrame], expected: Predictions, benchmark: dict, path: Path
) -> None:
    """The task's metrics of each split (accuracy and F1, or Pearson and Spearman), the row counts
    and the data set's params are the predictions' own."""
    for split in SPLITS:
        rows = len(predictions[split])
        if record["predictions"]["rows"][split] != rows:
            raise UserError(
                f"{path}: predictions.rows.{split} {record['predictions']['rows'][split]} is not its "
                f"predictions' {rows}: edited by hand?"
            )
        if record["params"].get(f"{split}_pairs", str(rows)) != str(rows):
            raise UserError(
                f"{path}: params.{split}_pairs {record['params'][f'{split}_pairs'][:20]!r} is not its "
                f"predictions' {rows}: edited by hand?"
            )
        for metric, value in expected.metrics(predictions[split], split).items():
            found = record["metrics"].get(metric)
            if found is None or not (
                math.isclose(found, value, rel_tol=0, abs_tol=TOLERANCE) or math.isnan(found) and math.isnan(value)
            ):
                raise UserError(
                    f"{path}: {metric} {found if found is None else f'{found:.4f}'} is not its "
                    f"predictions' {value:.4f}: edited by hand?"
                )
    positive = record["params"].get("positive_label")
    if positive is not None and benchmark["positive_label"] is not None and positive != benchmark["positive_label"]:
        raise UserError(
            f"{path}: params.positive_label {positive[:20]!r} is not its folder's "
            f"{benchmark['positive_label'][:20]!r}: edited by hand?"
        )


def check_cell(
    folder: Path, path: Path, benchmark: dict, manifest: dict | None
) -> tuple[dict, dict[str, pd.DataFrame]]:
    """One cell file and its predictions, every check made (``manifest`` None: all but the
    manifest's, for sealing a folder written before manifests); returns its record and predictions."""
    record = read_record(path, CELL)
    check_version(record, path)
    check_labels(record, benchmark, path)
    if manifest is not None:
        folder_manifest.check_predictions(manifest, record, path)
    predictions_file = predictions_path(
        folder / folder_manifest.CELLS_DIR, path, record["cell_hash"], record["predictions"]["file"]
    )
    task = folder_task(benchmark, folder / folder_manifest.BENCHMARK_FILE)
    expected = predictions_of(task, benchmark["labels"], benchmark["positive_label"])
    predictions = read_predictions_file(
        predictions_file, record["predictions"]["sha256"], benchmark["data_digest"], expected
    )
    check_metrics(record, predictions, expected, benchmark, path)
    if manifest is not None:
        folder_manifest.check_fields(manifest, record, path)
    return record, predictions

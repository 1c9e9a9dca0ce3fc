"""Results as files: a benchmark's finished cells in a folder that diffs well in git, read back
with every check before anything is used.

A folder::

    benchmark.json                       the benchmark: name, data set and its digest, labels, settings,
                                         the sha256 of each shared corpus its pretraining read
    manifest.json                        binds each cell hash to its predictions' sha256 and to digests
                                         of its other fields, and digests benchmark.json's fields
    cells/<cell_hash>.json               a cell: settings, hash, protocol version, commit, encoder
                                         (identity, corpora over its stages), metrics, params,
                                         steps and times
    cells/<cell_hash>.predictions.csv.gz its dev and test predictions (ids, label, probabilities
                                         to 6 decimals, prediction; no sentence: the data stays out)

A cell is trusted only when every field that decides or labels a number is derived from its
settings and predictions or matches the manifest (``benchmarks.results_files.cell_checks``), and
the folder holds exactly the cells its manifest lists. A folder from a newer harness, a truncated,
edited or mixed-up file, a missing predictions file: one line naming the file and the field, and
nothing is used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.cell.method_names import twin_by_encoder, twin_name
from benchmarks.cell.run_table import PREDICTION_KEY
from benchmarks.plan.pretraining_runs import is_run_of
from benchmarks.report.cells_from_store import cell_row
from benchmarks.results_files.cell_checks import check_cell
from benchmarks.results_files.data_release import check_same_data
from benchmarks.results_files.gold_labels import GoldLabels
from benchmarks.results_files.manifest import (
    BENCHMARK_FILE,
    CELLS_DIR,
    MANIFEST_FILE,
    check_benchmark,
    check_listed,
    read_manifest,
)
from benchmarks.results_files.predictions_file import PREDICTIONS_SUFFIX, SPLITS, predictions_bytes
from benchmarks.results_files.record_shapes import BENCHMARK, FORMAT, read_record
from benchmarks.results_files.task_predictions import folder_task
from benchmarks.results_files.unique_cells import CellIndex
from harness.datasets.metric_text import main_test_metric, metric_title, points
from harness.datasets.task import CLASSES, Task
from harness.errors import UserError

__all__ = [
    "BENCHMARK_FILE",
    "CELLS_DIR",
    "FORMAT",
    "MANIFEST_FILE",
    "PREDICTIONS_SUFFIX",
    "SPLITS",
    "CellResult",
    "ResultSet",
    "predictions_bytes",
    "read_folder",
    "write_json",
]

TWIN_PREFIX = f"{twin_name()}-"  # a twin's method in a plan of one encoder


def write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")


@dataclass
class CellResult:
    """One checked cell of a results folder."""

    folder: Path
    path: Path
    record: dict
    predictions: dict[str, pd.DataFrame]
    folder_index: int = 0  # the folder's place among those merged (reports keep their order)

    @property
    def place(self) -> tuple:
        return (self.folder_index, *self.record["order"])

    @property
    def cell_hash(self) -> str:
        return self.record["cell_hash"]

    @property
    def encoder(self) -> dict | None:
        return self.record.get("encoder")

    def same_encoder(self, described: dict | None) -> bool:
        """Whether this cell used the encoder ``described`` (the same checkpoint digest), or none."""
        if not self.encoder or not described:
            return not self.encoder and not described
        return self.encoder.get("digest", "") == described.get("digest", "")

    def same_stage(self, other: CellResult) -> bool:
        """Whether both cells used a pretrained encoder of one identity (same settings and data)."""
        return bool(self.encoder and other.encoder) and self.encoder.get("identity") == other.encoder.get("identity")

    def replicates(self, other: CellResult) -> bool:
        """Whether ``other`` is this cell run again from another pretraining of the same stage (another
        checkpoint digest): CPU pretraining is not always bit-reproducible, so its numbers may differ;
        one cell under one checkpoint with other numbers never is."""
        return self.same_stage(other) and not self.same_encoder(other.encoder)

    def reproduces(self, other: CellResult) -> bool:
        """Whether ``other`` is this cell run again from another copy of the same pretraining stage
        with the very same predictions: chunks that each pretrained one recipe share cells such as
        the full-label linear probe, and a checkpoint file's digest also covers the code version it
        was saved under."""
        return self.same_stage(other) and all(
            self.predictions[split].equals(other.predictions[split]) for split in SPLITS
        )

    def row(self, task: Task = CLASSES) -> dict:
        """The cell's row of the per-run table (``benchmarks.report.cells_from_store.cell_row``)."""
        run = self.record["run"]
        return cell_row(
            self.record["cell"],
            run["run_id"],
            run.get("parent_run_id", ""),
            self.record["metrics"],
            self.record["params"],
            task,
        )


def read_benchmark(folder: Path, sealed: bool = True) -> tuple[dict, dict | None]:
    """The folder's benchmark record and its manifest (``sealed`` False: none, for sealing a
    format-1 folder), the record checked against the manifest."""
    if not (folder / BENCHMARK_FILE).is_file():
        raise UserError(
            f"{folder}: not a results folder (no {BENCHMARK_FILE}; write one with `python -m benchmarks export`)"
        )
    benchmark = read_record(folder / BENCHMARK_FILE, BENCHMARK)
    if benchmark["format"] > FORMAT:
        raise UserError(
            f"{folder / BENCHMARK_FILE}: written by a newer harness (format {benchmark['format']}); "
            f"update this checkout"
        )
    if not sealed:
        return benchmark, None
    if benchmark["format"] < FORMAT:
        raise UserError(
            f"{folder / BENCHMARK_FILE}: format {benchmark['format']}, written before folders had a "
            f"{MANIFEST_FILE}; check and seal it with `python -m benchmarks seal {folder}`"
        )
    manifest = read_manifest(folder)
    check_benchmark(folder, benchmark, manifest)
    return benchmark, manifest


def read_folder(folder: Path, sealed: bool = True) -> tuple[dict, list[CellResult]]:
    """A results folder's benchmark record and its cells in plan order, all checked (``sealed``
    False: all but the manifest's checks, to seal a folder written before manifests)."""
    folder = Path(folder)
    benchmark, manifest = read_benchmark(folder, sealed)
    cells_dir = folder / CELLS_DIR
    if cells_dir.is_symlink():
        raise UserError(f"{cells_dir}: a link; a results folder holds its cells itself")
    cells = [
        CellResult(folder, path, *check_cell(folder, path, benchmark, manifest))
        for path in sorted(cells_dir.glob("*.json"))
    ]
    if manifest is not None:
        check_listed(folder, manifest, {cell.cell_hash for cell in cells})
    if benchmark.get("cells", len(cells)) != len(cells):
        raise UserError(
            f"{folder / BENCHMARK_FILE}: cells {benchmark['cells']}, but the folder holds {len(cells)}: truncated?"
        )
    return benchmark, sorted(cells, key=lambda cell: cell.record["order"])


def replication_note(pairs: list[tuple[CellResult, CellResult]], task: Task = CLASSES) -> str:
    """One line for a method's cells that another folder ran from another pretraining of the same
    stage, with their scores on the task's main test metric."""
    pairs = sorted(pairs, key=lambda pair: pair[0].record["cell"]["seed"])
    first, again = pairs[0]
    metric = main_test_metric(task)

    def scores(index: int) -> str:
        """One score where every seed has it, else one per seed, in the order the seeds are named."""
        values = [pair[index].record["metrics"].get(metric, float("nan")) for pair in pairs]
        shown = values[:1] if len(set(values)) == 1 else values
        return ", ".join(points(value, metric) for value in shown)

    seeds = ", ".join(str(pair[0].record["cell"]["seed"]) for pair in pairs)
    return (
        f"{first.record['cell']['method']} (seed {seeds}) ran again in {again.folder.name} from another "
        f"pretraining of the same stage (checkpoint {again.encoder.get('digest', '')[:12]}, not "
        f"{first.encoder.get('digest', '')[:12]}) and scored {scores(1)} {metric_title(metric)}, not {scores(0)}; "
        f"reported once, from {first.folder.name}: the spread of pretraining itself, which no CI here covers"
    )


def pretraining_run(cell: CellResult) -> str:
    """The pretraining run a cell's encoder is, where its method is read over several
    (``pretraining_runs``: the record's encoder ``<entry>+run<r>``, the cell's ``<entry>``); else ""."""
    name = cell.encoder.get("name", "") if cell.encoder else ""
    return name if is_run_of(name, cell.record["cell"].get("encoder", "")) else ""


class ResultSet:
    """Cells of one or more results folders, merged by cell hash: the same hash with other
    numbers under one checkpoint, mixed protocol versions in one comparison, two checkpoints under
    one encoder name, or folders of different data sets are each named in one line, never merged
    silently."""

    def __init__(self, folders: list[Path], data_digest: str | None = None, name_twins_by_encoder: bool = False):
        self.benchmarks: list[dict] = []
        self.notes: list[str] = []
        self.cells: dict[str, CellResult] = {}
        self.ordered: list[CellResult] = []
        self.cell_commits: dict[str, set[str]] = {}  # each folder's cells' commits (its seal is read against them)
        self.folder_cells: dict[str, list[dict]] = {}  # each folder's cells' fields as written (its plan is checked)
        self.twins_by_encoder = False  # whether twins are named ``random(<encoder>)-…`` (name_twins_by_encoder)
        self.task = CLASSES  # the folders' task (``task_predictions.folder_task``)
        reproduced: dict[tuple[str, str], int] = {}
        replicated: dict[tuple[str, str, str], list[tuple[CellResult, CellResult]]] = {}  # method, two folders
        unique, gold = CellIndex(), GoldLabels()  # one run id, one slot a cell hash; one label a pair
        for folder_index, folder in enumerate(folders):
            benchmark, cells = read_folder(Path(folder))
            expected = data_digest or (self.benchmarks[0]["data_digest"] if self.benchmarks else None)
            if expected:
                first = self.benchmarks[0]["dataset"] if self.benchmarks and not data_digest else None
                check_same_data(folder, benchmark, expected, first)
            self.benchmarks.append({**benchmark, "folder": str(folder)})
            self.task = folder_task(benchmark, Path(folder) / BENCHMARK_FILE)  # one data set, so one task
            for cell in cells:
                unique.add(cell)
                gold.add(cell, cell.predictions)
                self.cell_commits.setdefault(str(folder), set()).add(cell.record["commit"])
                self.folder_cells.setdefault(str(folder), []).append(cell.record["cell"])
                known = self.cells.get(cell.cell_hash)
                if known is None:
                    cell.folder_index = folder_index
                    self.cells[cell.cell_hash] = cell
                    self.ordered.append(cell)
                elif known.record["metrics"] != cell.record["metrics"]:
                    if known.replicates(cell):
                        key = (cell.record["cell"]["method"], known.folder.name, cell.folder.name)
                        replicated.setdefault(key, []).append((known, cell))
                        continue
                    raise UserError(
                        f"cell {cell.cell_hash} ({cell.record['cell']['method']} seed "
                        f"{cell.record['cell']['seed']}) has other numbers in {cell.path} than in "
                        f"{known.path}"
                    )
                elif known.same_encoder(cell.encoder):
                    continue
                elif known.reproduces(cell):
                    pair = (known.folder.name, cell.folder.name)
                    reproduced[pair] = reproduced.get(pair, 0) + 1
                else:
                    raise UserError(
                        f"cell {cell.cell_hash} ({cell.record['cell']['method']}) names another "
                        f"checkpoint in {cell.path} than in {known.path}"
                    )
        if name_twins_by_encoder:
            self.name_twins_by_encoder()
        self.check_encoders()
        self.check_protocols()
        self.notes += [
            f"{count} cell(s) of {first} ran again in {again} from its own copy of the same pretraining "
            f"stage (another checkpoint file) with the very same predictions; reported once, from {first}"
            for (first, again), count in reproduced.items()
        ]
        self.notes += [replication_note(pairs, self.task) for pairs in replicated.values()]

    def name_twins_by_encoder(self) -> None:
        """Folders of several encoders (a study's chunks, one family each) each name their twin
        ``random-…``: name each as one plan over all the encoders would
        (``benchmarks.plan.cells.plan``: ``random(<encoder>)-…``), so that the twins of two families
        are never read as one method. Only the report's view changes; the files do not."""
        if len({cell.record["cell"].get("encoder") for cell in self.ordered} - {"", None}) < 2:
            return
        self.twins_by_encoder = True
        for cell in self.ordered:
            fields = cell.record["cell"]
            is_twin = "random" in (fields["kind"], fields.get("probe_of"))
            twin_keys = ["control", *(("method", "grid_of") if is_twin else ())]
            renamed = {
                key: twin_by_encoder(fields[key], fields["encoder"])
                for key in twin_keys
                if str(fields.get(key) or "").startswith(TWIN_PREFIX)
            }
            if renamed:
                cell.record = {**cell.record, "cell": {**fields, **renamed}}

    def check_encoders(self) -> None:
        """A method and its twin compare one checkpoint: two under one method stop the merge. One
        encoder name over several checkpoints in different methods (chunks that each pretrained
        the same recipe) is named in ``notes`` and in the report, never averaged."""
        by_method: dict[tuple[str, str], CellResult] = {}
        by_name: dict[str, dict[str, CellResult]] = {}
        for cell in self.ordered:
            if not cell.encoder:
                continue
            method, control = cell.record["cell"]["method"], cell.record["cell"].get("control") or ""
            run = pretraining_run(cell)
            for key in filter(None, (method, control)):
                first = by_method.setdefault((key, run), cell)  # each pretraining run one checkpoint
                if first.encoder.get("digest") != cell.encoder.get("digest"):
                    name = cell.record["cell"].get("encoder")
                    raise UserError(
                        f"'{key}' (encoder '{name}') is two checkpoints: "
                        f"{first.encoder.get('digest', '')[:12]} in {first.path} and "
                        f"{cell.encoder.get('digest', '')[:12]} in {cell.path}"
                    )
            by_name.setdefault(run or cell.record["cell"].get("encoder", ""), {}).setdefault(
                cell.encoder.get("digest", ""), cell
            )
        self.notes += [
            f"encoder '{name}' is {len(digests)} checkpoints of one recipe (pretrained apart, e.g. by "
            f"chunk): "
            + ", ".join(f"{digest[:12]} ({cell.folder.name})" for digest, cell in digests.items())
            + "; each method compares one of them with its twin"
            for name, digests in by_name.items()
            if len(digests) > 1
        ]

    def check_protocols(self) -> None:
        """A method, its seeds and its twin are compared: they must share one protocol version."""
        by_method: dict[str, CellResult] = {}
        for cell in self.ordered:
            method, control = cell.record["cell"]["method"], cell.record["cell"].get("control") or ""
            for name in filter(None, (method, control)):
                first = by_method.setdefault(name, cell)
                if first.record["protocol"] != cell.record["protocol"]:
                    raise UserError(
                        f"'{name}' mixes protocol versions: {first.record['protocol']} in {first.path}, "
                        f"{cell.record['protocol']} in {cell.path}"
                    )

    def encoder(self, identity: str) -> dict | None:
        """The recorded description of the encoder with ``identity`` (None if no cell used it)."""
        for cell in self.ordered:
            if cell.encoder and cell.encoder.get("identity") == identity:
                return dict(cell.encoder)
        return None

    def runs_and_predictions(self) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        """The per-run table (``benchmarks.report.cells_from_store.run_table``'s columns and each cell's
        hash) and test predictions keyed by cell hash: run ids are another machine's and may repeat."""
        ordered = sorted(self.ordered, key=lambda cell: cell.place)
        rows = [{**cell.row(self.task), PREDICTION_KEY: cell.cell_hash} for cell in ordered]
        return pd.DataFrame(rows), {cell.cell_hash: cell.predictions["test"] for cell in ordered}

    def encoders(self) -> list[dict]:
        """Every encoder the cells used, described once each, in plan order: one per pretraining run
        (``<entry>+run<r>``) where a method is read over several, as the suite's report lists them."""
        seen: dict[str, dict] = {}
        for cell in sorted(self.ordered, key=lambda cell: cell.place):
            if cell.encoder:
                name = pretraining_run(cell) or cell.record["cell"]["encoder"]
                seen.setdefault(name, {**cell.encoder, "name": name})
        return list(seen.values())

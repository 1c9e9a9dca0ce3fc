"""Folders read together as a hostile user adds one: a self-sealed extra folder may not change an
untouched folder's numbers. A cell reusing another's run id, or claiming another's method, kind,
seed and fraction under another hash, stops the report and the import in one line naming both
files; cells sharing a hash (chunks' shared probes, replicates of one stage) still merge, and
predictions are keyed by cell hash."""

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.__main__ import main
from benchmarks.results_files.folder import CELLS_DIR, PREDICTIONS_SUFFIX, ResultSet
from benchmarks.results_files.manifest import write_manifest
from harness.errors import UserError
from harness.protocol import settings_hash
from tests.benchmarks.test_results_files import make_folder
from tests.helpers import all_runs


def cell_path(folder: Path, kind: str, seed: int) -> Path:
    """The folder's cell of ``kind`` at ``seed`` (the tiny folder: one method and its twin)."""
    return next(
        path
        for path in (folder / CELLS_DIR).glob("*.json")
        if (json.loads(path.read_text())["cell"]["kind"], json.loads(path.read_text())["cell"]["seed"]) == (kind, seed)
    )


def forge(path: Path, seed: int | None = None, run_id: str | None = None, args: list[str] | None = None) -> Path:
    """Rewrite the cell at ``path`` as a forger would: another seed, run id or flags, its hash and
    file names made consistent again (and its folder re-sealed by the caller)."""
    record = json.loads(path.read_text())
    if seed is not None:
        record["spec"]["seed"] = record["cell"]["seed"] = seed
    if args is not None:
        record["spec"]["args"] = record["cell"]["args"] = args
    if run_id is not None:
        record["run"]["run_id"] = run_id
    new_hash = settings_hash(record["spec"], record["protocol"])
    predictions = path.parent / record["predictions"]["file"]
    predictions.rename(path.parent / f"{new_hash}{PREDICTIONS_SUFFIX}")
    path.unlink()
    record.update(cell_hash=new_hash, predictions={**record["predictions"], "file": f"{new_hash}{PREDICTIONS_SUFFIX}"})
    new_path = path.parent / f"{new_hash}.json"
    new_path.write_text(json.dumps(record))
    return new_path


def extra_folder(tmp_path: Path, **change) -> Path:
    """A one-seed copy of the study's folder, its pretrained cell forged by ``change``, sealed."""
    extra = make_folder(tmp_path / "extra", seeds=1)
    forge(cell_path(extra, "pretrained", 0), **change)
    write_manifest(extra)
    return extra


def test_a_cell_reusing_another_folders_run_id_under_another_hash_is_refused(tmp_path, capsys):
    study = make_folder(tmp_path / "study")
    run_id = json.loads(cell_path(study, "pretrained", 0).read_text())["run"]["run_id"]
    extra = extra_folder(tmp_path, seed=7, run_id=run_id)
    with pytest.raises(UserError, match=f"one run id {run_id} under two cell hashes") as refusal:
        ResultSet([study, extra])
    assert "study/cells/" in str(refusal.value) and "extra/cells/" in str(refusal.value)
    assert main(["report", str(study), str(extra), "--out", str(tmp_path / "report")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "one run id" in line


def test_the_same_method_and_seed_under_another_hash_is_refused(tmp_path):
    study = make_folder(tmp_path / "study")
    extra = extra_folder(tmp_path, run_id="another-run", args=["--trainer.deterministic=true"])
    with pytest.raises(UserError, match=r"claim 'elmo-scalar-pool-mlp' \(pretrained\) seed 0 at fraction 1"):
        ResultSet([study, extra])


def test_two_cells_of_one_slot_in_one_folder_are_refused(tmp_path):
    study = make_folder(tmp_path / "study")
    record = json.loads(cell_path(study, "pretrained", 1).read_text())
    copied = study / CELLS_DIR / f"copy{PREDICTIONS_SUFFIX}"
    copied.write_bytes((study / CELLS_DIR / record["predictions"]["file"]).read_bytes())
    forged = study / CELLS_DIR / "copy.json"
    forged.write_text(json.dumps({**record, "predictions": {**record["predictions"], "file": copied.name}}))
    forge(forged, run_id="another-run", args=["--trainer.deterministic=true"])
    write_manifest(study)
    with pytest.raises(UserError, match="seed 1 at fraction 1"):
        ResultSet([study])


def test_predictions_are_keyed_by_cell_hash_and_shared_cells_still_merge(tmp_path):
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b", seeds=2)
    merged = ResultSet([first, second])
    runs, predictions = merged.runs_and_predictions()
    assert set(predictions) == set(runs["cell_hash"]) == set(merged.cells) and len(predictions) == 6
    assert main(["report", str(first), str(second), "--out", str(tmp_path / "report")]) == 0
    results = pd.read_csv(tmp_path / "report" / "results.csv").set_index("method")
    assert results.loc["elmo-scalar-pool-mlp", "n_seeds"] == 3


def test_an_import_of_several_folders_refuses_a_forged_cell_before_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("ENCODER_EXPERIMENTS", raising=False)
    study = make_folder(tmp_path / "study")
    extra = extra_folder(tmp_path, run_id="another-run", args=["--trainer.deterministic=true"])
    assert main(["import", str(study), str(extra)]) == 2
    assert "claim 'elmo-scalar-pool-mlp'" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "mlflow.db").exists() or all_runs(tmp_path) == []  # nothing written

"""A method read over several pretraining runs (``pretraining_runs``), its runs in the folders of
several chunks: each run's checkpoint under the one method merges, and the report reads the gap
over the runs; two checkpoints under one run still stop the merge."""

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.__main__ import main
from benchmarks.results_files.folder import BENCHMARK_FILE, CELLS_DIR, FORMAT, ResultSet, write_json
from benchmarks.results_files.manifest import write_manifest
from harness.errors import UserError
from tests.benchmarks.test_results_files import DATA_DIGEST, ENCODER, write_cell

METHOD, TWIN = "elmo-scalar-pool-mlp", "random-scalar-pool-mlp"


def run_encoder(run: int, digest: str) -> dict:
    return {
        **ENCODER,
        "name": f"elmo+run{run}",
        "identity": f"stage-run{run}",
        "digest": digest * 64,
        "run_id": f"pretrain-{run}",
    }


def chunk(folder: Path, runs: dict[int, str], seed_digest: dict[int, str] | None = None) -> Path:
    """A chunk's folder: each run r's cells at seeds 2r and 2r+1, and the twin at the same seeds."""
    (folder / CELLS_DIR).mkdir(parents=True)
    write_json(
        folder / BENCHMARK_FILE,
        {
            "format": FORMAT,
            "benchmark": folder.name,
            "experiment": "mrpc",
            "dataset": "mrpc",
            "data_digest": DATA_DIGEST,
            "labels": ["0", "1"],
            "positive_label": "1",
            "settings": {"seeds": 2},
        },
    )
    for run, digest in runs.items():
        for seed in (2 * run, 2 * run + 1):
            encoder = run_encoder(run, (seed_digest or {}).get(seed, digest))
            paths = [
                write_cell(
                    folder,
                    METHOD,
                    "pretrained",
                    seed,
                    [(i + run) % 10 != seed % 7 for i in range(40)],
                    2 * seed,
                    control=TWIN,
                    encoder=encoder,
                ),
                write_cell(
                    folder, TWIN, "random", seed, [i < 24 + seed for i in range(40)], 2 * seed + 1, encoder=encoder
                ),
            ]
            for path in paths:  # the cell names the run's own pretraining run
                record = json.loads(path.read_text())
                record["cell"]["encoder_run"] = encoder["run_id"]
                write_json(path, record)
    write_manifest(folder)
    return folder


def test_the_runs_of_two_chunks_are_one_method_read_over_its_runs(tmp_path):
    first, second = chunk(tmp_path / "runs0-1", {0: "a", 1: "b"}), chunk(tmp_path / "runs2", {2: "e"})
    merged = ResultSet([first, second], name_twins_by_encoder=True)
    assert not [note for note in merged.notes if "checkpoints" in note]
    assert main(["report", str(first), str(second), "--out", str(tmp_path / "report")]) == 0
    results = pd.read_csv(tmp_path / "report" / "results.csv").set_index("method")
    assert results.loc[METHOD, "n_pretrainings"] == 3 and results.loc[METHOD, "n_seeds"] == 6


def test_the_report_describes_each_pretraining_run_as_the_suites_does(tmp_path):
    first, second = chunk(tmp_path / "runs0-1", {0: "a", 1: "b"}), chunk(tmp_path / "runs2", {2: "e"})
    encoders = ResultSet([first, second], name_twins_by_encoder=True).encoders()
    assert [(encoder["name"], encoder["run_id"]) for encoder in encoders] == [
        ("elmo+run0", "pretrain-0"),
        ("elmo+run1", "pretrain-1"),
        ("elmo+run2", "pretrain-2"),
    ]
    assert main(["report", str(first), str(second), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert all(f"| elmo+run{run} | `pretrain-{run}` |" in report for run in range(3))


def test_two_checkpoints_under_one_run_still_stop_the_merge(tmp_path):
    folder = chunk(tmp_path / "runs0-1", {0: "a", 1: "b"}, seed_digest={1: "f"})  # run 0's seed 1: another
    with pytest.raises(UserError, match="is two checkpoints"):
        ResultSet([folder])

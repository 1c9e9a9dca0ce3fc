"""A benchmark naming a published encoder (``run: hf:<folder>``): its cells pass the source to
``--model.encoder``, its twins ``--model.random_like``, its rows stand apart in the report, and the
planned cells are keyed on its model files' digest, not on where they lie."""

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import parse_matrix
from benchmarks.report.outputs import published_methods
from tests import preloaded

REPO = Path(__file__).resolve().parents[2]


def test_published_cells_carry_the_source_and_are_keyed_on_the_files_digest():
    encoder = {
        "name": "minilm",
        "run_id": "reference:all-minilm-l6-v2",
        "family": "hf",
        "num_layers": 7,
        "identity": "files:" + "f" * 64,
        "published": True,
    }
    config = {"transfers": {"hf": [{"name": "full", "heads": ["cls"]}]}, "seeds": 1, "baselines": []}
    cells = plan(parse_matrix(config), [encoder], [])
    assert [cell.kind for cell in cells] == ["pretrained", "random"]
    assert all(
        cell.encoder_run == "reference:all-minilm-l6-v2" and cell.spec()["encoder"] == "files:" + "f" * 64
        for cell in cells
    )
    moved = plan(parse_matrix(config), [{**encoder, "run_id": "hf:/elsewhere/all-minilm-l6-v2"}], [])
    assert [cell.spec() for cell in moved] == [cell.spec() for cell in cells]  # the folder's place is no setting
    runs = pd.DataFrame({"method": [cell.method for cell in cells] + ["majority"], "encoder": ["minilm", "minilm", ""]})
    assert published_methods(runs, {"encoders": [encoder]}) == {"minilm-full-cls", "random-full-cls"}


@pytest.mark.slow
def test_a_benchmark_of_a_published_encoder_runs_and_reports_it_apart(tiny_bert, mrpc_dir, tmp_path):
    config = {
        "name": "hf-quick",
        "encoders": [{"name": "tinybert", "run": f"hf:{tiny_bert}"}],
        "finetune": {
            "config": "configs/downstream/mrpc.yaml",
            "args": ["--data.max_pairs=60", "--trainer.max_epochs=1", "--model.hidden_size=16"],
        },
        "transfers": {
            "hf": [
                {"name": "frozen", "mix": "scalar", "heads": ["pool-mlp"]},
                {"name": "full", "config": "configs/downstream/hf.yaml", "heads": ["cls"]},
            ]
        },
        "seeds": 1,
        "baselines": ["majority"],
    }
    path = tmp_path / "hf-quick.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "MRPC_DIR": str(mrpc_dir),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        preloaded.command(
            "benchmarks.suite",
            "--config",
            str(path),
            "--results-dir",
            str(tmp_path / "results"),
            "--jobs",
            "1",
            f"--finetune-args=--data.cache_dir={tmp_path / 'cache'}",
            env=env,
        ),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = pd.read_csv(tmp_path / "results" / "results.csv")
    assert {
        "tinybert-frozen-pool-mlp",
        "random-frozen-pool-mlp",
        "tinybert-full-cls",
        "random-full-cls",
        "majority",
    } == set(results["method"])
    assert results.set_index("method").loc["tinybert-full-cls", "paired_items"] == 60  # tested against its twin
    report = (tmp_path / "results" / "report.md").read_text()
    own, published = report.split("## Published and reference encoders (shown apart)")
    assert "`tinybert-full-cls`" in published.split("## Remarks")[0] and "`tinybert-full-cls`" not in own
    assert "(published and reference encoders left out)" in report and f"`hf:{tiny_bert}`" in report

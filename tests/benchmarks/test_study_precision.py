"""A matrix's ``precision:`` pins every stage's and cell's precision on any machine, so that a study's
chunks, run on machines with and without native bf16, never mix precisions: the flag it appends is
the one the machine default appended where the study's cells ran, and a machine that cannot honour
it stops before anything runs."""

import json
from pathlib import Path

import pytest

import benchmarks.plan.precision as precision_module
from benchmarks.plan.matrix import load_config, parse_matrix
from benchmarks.plan.precision import check_study_precision, with_precision
from benchmarks.suite import main
from harness.errors import UserError

REPO = Path(__file__).resolve().parents[2]
V3_CONFIGS = sorted((REPO / "configs" / "benchmarks").glob("families-v3*/*.yaml"))
MATRIX = {"encoders": [{"name": "elmo", "run": "abc"}]}


def test_a_matrix_names_one_of_lightnings_precisions_or_none():
    assert parse_matrix(MATRIX).precision is None
    assert parse_matrix({**MATRIX, "precision": "bf16-mixed"}).precision == "bf16-mixed"
    with pytest.raises(UserError, match="m.yaml: `precision`: 'bf16' is none of 32-true, bf16-mixed"):
        parse_matrix({**MATRIX, "precision": "bf16"}, "m.yaml")


def test_the_pinned_precision_is_appended_as_the_machine_default_was_and_a_named_one_wins():
    args = ["--data.equal_steps=true"]
    assert with_precision("no-such.yaml", args, "bf16-mixed") == [*args, "--trainer.precision=bf16-mixed"]
    named = [*args, "--trainer.precision=32-true"]
    assert with_precision("no-such.yaml", named, "bf16-mixed") == named


def test_a_machine_without_native_bf16_refuses_a_bf16_study_before_anything_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(precision_module, "bf16_supported", lambda device: False)
    with pytest.raises(UserError, match=r"c.yaml: `precision: bf16-mixed`, but this cpu has no native bf16"):
        check_study_precision("bf16-mixed", "c.yaml", "cpu")
    check_study_precision("32-true", "c.yaml", "cpu")
    check_study_precision(None, "c.yaml", "cpu")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    chunk = REPO / "configs" / "benchmarks" / "families-v3" / "ulmfit-frozen-runs0-1.yaml"
    assert main(["--config", str(chunk)]) == 2
    assert "`precision: bf16-mixed`, but this cpu has no native bf16" in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists()  # stopped before the store was touched


@pytest.mark.parametrize("path", V3_CONFIGS, ids=[f"{path.parent.name}/{path.stem}" for path in V3_CONFIGS])
def test_every_v3_chunk_pins_the_precision_its_committed_cells_ran_at(path):
    config = load_config(path)
    assert config.precision == "bf16-mixed"
    folder = REPO / "results" / path.parent.name / path.stem
    for cell_file in sorted(folder.glob("cells/*.json")):
        record = json.loads(cell_file.read_text())
        if record["cell"]["kind"] in ("pretrained", "random"):  # baselines and probes fit no network
            assert record["precision"] == config.precision, cell_file
            assert f"--trainer.precision={config.precision}" in record["spec"]["args"], cell_file

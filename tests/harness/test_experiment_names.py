"""An experiment's name at every entry point (``--experiment_name``, a matrix's ``experiment:``,
a results folder's ``benchmark.json``, ``ensure_experiment``): NFKC-normalised, visible characters
only, 1-256 characters; a look-alike (``pretrain`` + a zero-width space), an empty or an oversized
name is one line, and a full-width ``ｐｒｅｔｒａｉｎ`` is ``pretrain`` (so a folder cannot reach the
encoders' experiment through it)."""

import json

import pytest

from benchmarks.__main__ import main as benchmarks_main
from benchmarks.plan.matrix import load_config
from benchmarks.results_files.manifest import write_manifest
from harness.tracking.experiment_names import experiment_name
from harness.tracking.store import ensure_experiment
from tests.benchmarks.test_results_files import make_folder
from tests.helpers import REPO, all_runs, assert_one_line_error, assert_one_line_exit, run_module

LOOK_ALIKE = "pretrain\u200b"


@pytest.mark.parametrize(
    "given, fragment",
    [
        (LOOK_ALIKE, "invisible U+200B (ZERO WIDTH SPACE)"),
        ("mrpc\u202e", "invisible U+202E"),
        ("mrpc\u00a0", "starts or ends with a space"),  # NFKC: a no-break space is a space
        ("", "is no name"),
        ("   ", "is no name"),
        ("x" * 257, "has 257 characters; an experiment's name has at most 256"),
        ("a\nb", "invisible U+000A"),
    ],
)
def test_a_bad_name_is_one_line(given, fragment):
    assert_one_line_error(lambda: experiment_name(given, "--experiment_name"), "--experiment_name: ", fragment)


def test_names_are_normalised_and_plain_ones_kept():
    assert experiment_name("ｐｒｅｔｒａｉｎ", "x") == "pretrain"
    assert experiment_name("my study · v2", "x") == "my study · v2"
    assert experiment_name("x" * 256, "x") == "x" * 256


def test_a_matrix_naming_a_look_alike_experiment_is_refused(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(f"name: tiny\nexperiment: {json.dumps(LOOK_ALIKE)}\nencoders:\n  - {{name: elmo, run: latest}}\n")
    assert_one_line_error(lambda: load_config(path), f"{path}: `experiment`: ", "U+200B")


def test_the_store_creates_no_look_alike_or_oversized_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for name in (LOOK_ALIKE, "x" * 300, "ｍｒｐｃ"):
        assert_one_line_error(lambda name=name: ensure_experiment(name, uri), "experiment name")
    assert all_runs(uri) == []


@pytest.mark.parametrize(
    "experiment, fragment", [("ｐｒｅｔｒａｉｎ", "targets experiment 'pretrain'"), (LOOK_ALIKE, "U+200B")]
)
def test_a_folder_cannot_target_a_look_alike_experiment(experiment, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("ENCODER_EXPERIMENTS", raising=False)
    folder = make_folder(tmp_path / "a", seeds=1)
    benchmark = folder / "benchmark.json"
    benchmark.write_text(json.dumps({**json.loads(benchmark.read_text()), "experiment": experiment}))
    write_manifest(folder)  # a crafted folder: its manifest rewritten to match
    assert benchmarks_main(["import", str(folder)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: ") and fragment in line, line
    assert all_runs(tmp_path) == []


@pytest.mark.parametrize("name", [LOOK_ALIKE, ""])
def test_the_cli_refuses_a_look_alike_or_empty_experiment_before_any_run(name, tmp_path):
    process = run_module(
        "downstream",
        "fit",
        "--config",
        str(REPO / "configs" / "downstream" / "smoke.yaml"),
        f"--experiment_name={name}",
        uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        cwd=tmp_path,
        PYTHONPATH=str(REPO),  # this checkout's code, whichever the environment has installed
    )
    assert_one_line_exit(process, "--experiment_name=", "U+200B (ZERO WIDTH SPACE)" if name else "is no name")
    assert not (tmp_path / "mlflow.db").exists() or all_runs(tmp_path) == []

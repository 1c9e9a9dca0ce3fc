"""A key given twice in one mapping of any YAML config (``harness.unique_keys``): a benchmark
matrix and a LightningCLI config each stop at one line naming the key and the file, never take the
last value; the shipped configs give every key once."""

import pytest

from benchmarks.plan.matrix import load_config
from harness.unique_keys import duplicate_key, load_yaml
from tests.helpers import REPO, all_runs, assert_one_line_error, assert_one_line_exit, run_module

MATRIX = """name: tiny
encoders:
  - name: elmo
    run: latest
seeds: [0, 1]
mixes: [scalar]
seeds: [0, 1, 2, 3, 4]
"""


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: 1\nb: 2\n", None),
        ("a: 1\nb: 2\na: 3\n", ("a", 3)),
        ("outer:\n  - inner:\n      x: 1\n      x: 2\n", ("x", 4)),
        ("a: &base {x: 1}\nb:\n  <<: *base\n  y: 2\n", None),  # a merge key is no duplicate
        ("1: one\n'1': other\n", None),  # the number 1 and the string '1' are two keys
    ],
)
def test_the_first_key_given_twice_and_its_line(text, expected):
    assert duplicate_key(text) == expected


def test_a_matrix_with_a_key_given_twice_is_one_line_naming_key_and_file(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(MATRIX)
    assert_one_line_error(lambda: load_config(path), f"{path}:7", "'seeds'")


def test_every_shipped_config_gives_each_key_once():
    for path in sorted((REPO / "configs").rglob("*.yaml")):
        assert duplicate_key(path.read_text()) is None, path
        load_yaml(path)


def test_a_lightning_config_with_a_key_given_twice_is_one_line_naming_key_and_file(tmp_path):
    config = tmp_path / "twice.yaml"
    config.write_text("trainer:\n  max_epochs: 1\n  max_epochs: 3\n")
    process = run_module(
        "downstream",
        "fit",
        "--config",
        str(REPO / "configs" / "downstream" / "smoke.yaml"),
        "--config",
        str(config),
        uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        cwd=tmp_path,
    )
    assert_one_line_exit(process, "twice.yaml:3", "'max_epochs'")
    assert not (tmp_path / "mlflow.db").exists() or all_runs(tmp_path) == []  # stopped before any run

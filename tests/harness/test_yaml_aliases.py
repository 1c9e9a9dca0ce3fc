"""A YAML alias bomb (a few hundred bytes of nested aliases that expand to billions of nodes) is
refused at every entry point a config or matrix comes in through, in well under a second, with one
line naming the file and the alias's line; no shipped YAML uses an anchor, so none is refused."""

import subprocess
import sys
import time

import pytest
import yaml

from benchmarks.plan.matrix import load_config
from benchmarks.plan.trainer_settings import trainer_setting
from harness.cli.preflight import duplicate_key_problem
from harness.unique_keys import AliasRefused, check_unique_keys, duplicate_key, install_jsonargparse_loader
from tests.helpers import REPO, assert_one_line_error


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    """``levels`` lists of ``width`` aliases to the one before: width ** levels leaves, ~550 bytes."""
    lines = ['a0: &a0 ["x"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


BOMB = alias_bomb()


@pytest.fixture
def bomb(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text("encoders: [{name: elmo, run: latest}]\n" + BOMB)
    return path


def within_a_second(call):
    start = time.perf_counter()
    result = call()
    assert time.perf_counter() - start < 1.0
    return result


def test_the_bomb_is_small_and_its_key_walk_is_bounded():
    assert len(BOMB.encode()) < 600
    assert within_a_second(lambda: duplicate_key(BOMB)) is None  # each shared node is walked once


def test_a_matrix_with_an_alias_is_one_line_naming_file_and_line(bomb):
    within_a_second(lambda: assert_one_line_error(lambda: load_config(bomb), f"{bomb}:3:", "alias"))


def test_the_key_check_refuses_an_alias_before_walking(bomb):
    with pytest.raises(AliasRefused, match=f"{bomb}:3:"):
        within_a_second(lambda: check_unique_keys(bomb.read_text(), str(bomb)))
    assert within_a_second(lambda: duplicate_key_problem(bomb)).startswith(f"{bomb}:3:")


def test_a_planner_read_of_a_cell_config_refuses_an_alias(bomb):
    within_a_second(lambda: assert_one_line_error(lambda: trainer_setting(str(bomb), [], "max_epochs"), str(bomb)))


def test_the_lightning_config_loader_refuses_an_alias(bomb):
    from jsonargparse import get_loader

    install_jsonargparse_loader()
    with pytest.raises(AliasRefused, match="bomb.yaml:3:"):
        within_a_second(lambda: get_loader("yaml")(bomb.read_text(), str(bomb)))


def test_a_cli_given_the_bomb_as_config_stops_at_one_line(bomb, tmp_path):
    start = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "downstream", "fit", "--config", str(bomb)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    )
    assert time.perf_counter() - start < 30  # the process start included; the walk alone ran minutes
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    assert (
        process.stderr.strip()
        .splitlines()[-1]
        .endswith(
            f"{bomb}:3: YAML aliases (*name) are not read in configs (nested ones expand without bound); "
            "write the value out"
        )
    )


def test_no_shipped_yaml_uses_an_anchor():
    for path in sorted(REPO.rglob("*.y*ml")):
        if ".venv" in path.parts or ".git" in path.parts:
            continue
        events = yaml.parse(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        assert not any(getattr(event, "anchor", None) for event in events), path

"""A benchmark matrix is checked before any work: counts are positive, lists are lists, names are
names (never paths), each mistake one line naming the file and key; the typed matrix keeps every
default in one place."""

from pathlib import Path

import pytest
import yaml

from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import Matrix, load_config, parse_matrix
from harness.server.users import NAME
from tests.helpers import assert_one_line_error

GOOD = {"encoders": [{"name": "elmo", "run": "latest"}]}


def write(tmp_path: Path, content: dict) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


@pytest.mark.parametrize(
    "content, fragment",
    [
        ({**GOOD, "seeds": 0}, "`seeds` must be a count of at least 1"),
        ({**GOOD, "seeds": -3}, "`seeds` must be a count of at least 1"),
        ({**GOOD, "seeds": []}, "`seeds` must be a count"),
        ({**GOOD, "seeds": [1, 1]}, "distinct seeds"),
        ({**GOOD, "learning_curve": {"fractions": [0.5], "seeds": 0}}, "`learning_curve.seeds`"),
        ({**GOOD, "transfers": {"elmo": [{"name": "frozen", "seeds": -1}]}}, "`transfers.elmo.frozen.seeds`"),
        ({"encoders": 5}, "`encoders` must be a list of mappings"),
        ({"encoders": ["elmo"]}, "`encoders` must be a list of mappings"),
        ({**GOOD, "name": "../../../x"}, "`name` must be a name"),
        ({**GOOD, "name": "a/b"}, "`name` must be a name"),
        ({"encoders": [{"name": "../up", "run": "latest"}]}, "`encoders.name` must be a name"),
        ({"encoders": [{"name": "a", "run": "latest"}, {"name": "a", "run": "latest"}]}, "['a'] repeat"),
        ({**GOOD, "transfers": {"elmo": [{"name": "x/y"}]}}, "`transfers.elmo.name` must be a name"),
        ({**GOOD, "mixes": "scalar"}, "`mixes` must be a list"),
        ({**GOOD, "heads": "pool-mlp"}, "`heads` must be a list"),
        ({**GOOD, "fractions": 0.5}, "`fractions` must be a list of fractions in (0, 1]"),
        ({**GOOD, "fractions": [0.0, 1.0]}, "`fractions` must be a list of fractions in (0, 1]"),
        (
            {**GOOD, "transfers": {"elmo": [{"name": "frozen", "heads": "attn"}]}},
            "`transfers.elmo.frozen.heads` must be",
        ),
        ({**GOOD, "transfers": {"elmo": [{"name": "frozen", "args": "--x"}]}}, "`transfers.elmo.frozen.args` must be"),
        ({**GOOD, "random_control": "yes"}, "`random_control` must be true or false"),
        ({**GOOD, "finetune": {"config": "c.yaml", "arg": []}}, "unknown `finetune` key(s) ['arg']"),
        ({**GOOD, "learning_curve": {"fractions": [0.5], "heads": ["attn"]}}, "unknown `learning_curve` key(s)"),
        (
            {**GOOD, "dataset": {"dataset": "stsb"}, "baselines": ["tfidf-ridge", "majority"]},
            "'majority' is no baseline of stsb (a graded task's are overlap-cosine, tfidf-ridge)",
        ),
        ({**GOOD, "baselines": ["overlap-cosine"]}, "'overlap-cosine' is no baseline of mrpc"),
    ],
)
def test_a_bad_matrix_is_one_line_before_any_work(tmp_path, content, fragment):
    path = write(tmp_path, content)
    assert_one_line_error(lambda: load_config(path), str(path), fragment)


def test_the_defaults_live_in_the_matrix_type(tmp_path):
    matrix = load_config(write(tmp_path, GOOD))
    assert matrix.seeds == Matrix().seeds == (0, 1, 2, 3, 4)
    assert (matrix.mixes, matrix.heads, matrix.fractions, matrix.random_control) == (
        ("scalar",),
        ("pool-mlp",),
        (1.0,),
        True,
    )
    transfer = parse_matrix(
        {**GOOD, "seeds": 2, "fractions": [0.5, 1.0], "lr_grid": [1e-3], "transfers": {"elmo": [{"name": "frozen"}]}}
    ).transfers["elmo"][0]
    assert (transfer.seeds, transfer.fractions, transfer.lr_grid, transfer.heads) == (
        (0, 1),
        (0.5, 1.0),
        (1e-3,),
        ("pool-mlp",),
    )
    cells = plan(parse_matrix({**GOOD, "seeds": [3, 7]}), [{"name": "elmo", "run_id": "r", "num_layers": 2}], [])
    assert sorted({cell.seed for cell in cells}) == [3, 7]


def test_the_readmes_user_names_are_valid():
    assert all(NAME.match(name) for name in ("ada", "bob", "cyd"))
    assert not any(NAME.match(name) for name in ("c", "ab", "../x", "-ab", "a b"))

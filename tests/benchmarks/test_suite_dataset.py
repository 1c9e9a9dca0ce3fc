"""The suite's ``dataset:`` key: checked in the config, made into the ``--data.*`` flags every cell
gets, naming the experiment; the shipped example config (fast, no runs)."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchmarks.plan.matrix import data_flags, dataset_spec, load_config
from benchmarks.suite import drop_unpaired_controls
from harness.errors import UserError

REPO = Path(__file__).resolve().parents[2]
ENCODERS = [{"name": "elmo", "run": "latest"}]


def write_config(tmp_path: Path, content: dict) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    return path


def test_dataset_key_names_the_experiment_and_becomes_data_flags(tmp_path):
    config = load_config(
        write_config(
            tmp_path,
            {
                "encoders": ENCODERS,
                "dataset": {
                    "dataset": "tsv",
                    "train": "data/nli/train.tsv",
                    "dev": str(tmp_path / "dev.tsv"),
                    "test": "data/nli/test.tsv",
                    "label_column": 2,
                    "has_header": False,
                },
            },
        )
    )
    assert config.experiment == "nli"  # the train file's folder, as the data set's own default name
    spec = dataset_spec(config)
    assert spec["train"] == str(REPO / "data/nli/train.tsv") and spec["dev"] == str(tmp_path / "dev.tsv")
    assert data_flags(spec) == [
        "--data.dataset=tsv",
        f"--data.train={REPO / 'data/nli/train.tsv'}",
        f"--data.dev={tmp_path / 'dev.tsv'}",
        f"--data.test={REPO / 'data/nli/test.tsv'}",
        "--data.label_column=2",
        "--data.has_header=false",
    ]


def test_default_data_set_is_mrpc_without_flags_and_keeps_the_old_mrpc_dir_key(tmp_path):
    config = load_config(write_config(tmp_path, {"encoders": ENCODERS}))
    assert config.experiment == "mrpc" and data_flags(dataset_spec(config)) == []
    config = load_config(write_config(tmp_path, {"encoders": ENCODERS, "mrpc_dir": "/data/mrpc"}))
    assert data_flags(dataset_spec(config)) == ["--data.mrpc_dir=/data/mrpc"]
    named = load_config(write_config(tmp_path, {"encoders": ENCODERS, "dataset": {"name": "mine"}}))
    assert named.experiment == "mine"


@pytest.mark.parametrize(
    "dataset, fragment",
    [
        ({"dataset": "tsv", "trian": "x.tsv"}, "unknown `dataset` key(s) ['trian']"),
        ("tsv", "`dataset` must be a mapping"),
    ],
    ids=["unknown-key", "not-a-mapping"],
)
def test_bad_dataset_key_is_one_line_naming_the_file(tmp_path, dataset, fragment):
    path = write_config(tmp_path, {"encoders": ENCODERS, "dataset": dataset})
    with pytest.raises(UserError) as raised:
        load_config(path)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message and fragment in message, message


def test_the_shipped_example_points_at_files_the_user_supplies():
    config = load_config(REPO / "configs" / "benchmarks" / "own-data.yaml")
    assert config.dataset["dataset"] == "tsv" and config.experiment == "own"
    assert all(config.dataset[split].startswith("data/") for split in ("train", "dev", "test"))  # git-ignored
    assert (REPO / config.finetune_config).is_file()
    assert all((REPO / encoder["pretrain"]["config"]).is_file() for encoder in config.encoders)


def test_unpaired_controls_are_found_by_the_id_column_a_data_set_has(capsys):
    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "method": ["elmo", "random", "tfidf"],
            "seed": [0, 0, 0],
            "control": ["random", "", "random"],
        }
    )
    frame = pd.DataFrame({"id": ["1", "2"], "label": ["x", "y"], "pred": ["x", "x"]})
    predictions = {"a": frame, "b": frame, "c": frame.iloc[:1]}
    assert drop_unpaired_controls(runs, predictions)["control"].tolist() == ["random", "", ""]
    assert "tfidf was evaluated on other test pairs" in capsys.readouterr().out

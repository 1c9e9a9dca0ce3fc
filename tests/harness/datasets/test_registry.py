"""The data-set registry: a named data set registered from this module alone goes through the
flags, the titles and names of its runs, pretraining and finetuning — nothing else to edit."""

import re
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from downstream.run.cli import FinetuneCLI
from harness.cli.tracked_cli import run_cli
from harness.datasets import registry
from harness.datasets.entry import Anchors, DataSet
from harness.datasets.spec import SPEC_KEYS, PairDataSpec
from harness.datasets.types import Pair, PairData
from harness.errors import UserError
from pretrain.cli import PretrainCLI
from tests.pair_files import LABELS, three_label_rows

REPO = Path(__file__).resolve().parents[3]


def load_toy(spec: PairDataSpec) -> PairData:
    """A three-label data set made in memory (its source: the working folder)."""
    taken = set()  # the splits share no pair

    def pairs(count: int, seed: int, prefix: str) -> list[Pair]:
        return [
            Pair(LABELS.index(label), (identifier,), first, second)
            for identifier, first, second, label in three_label_rows(count, seed, prefix, taken)
        ]

    folder = str(Path.cwd())
    return PairData(
        name="toy3",
        labels=list(LABELS),
        id_columns=("id",),
        train=pairs(180, 1, "tr"),
        dev=pairs(45, 2, "dv"),
        test=pairs(45, 3, "te"),
        content_hash="toy3-v1",
        kind="toy3",
        source=folder,
        train_file=folder,
    )


TOY = DataSet(
    name="toy3",
    load=load_toy,
    default_name=lambda spec: "toy3",
    split_titles={"dev": "toy3 held-out", "test": "toy3 final"},
    class_titles=("contra", "entail", "neutral"),
    anchors=Anchors(split="toy3 final", rows=(("always entail", 33.3, 16.7, "label counts"),)),
    hash_param="toy3_hash",
)


@pytest.fixture
def toy():
    registry.register(TOY)
    yield TOY
    del registry.DATASETS[TOY.name]


def test_a_registered_data_set_is_read_titled_and_named_through_the_registry(toy):
    data = registry.load_pair_data(dataset="toy3")
    assert (data.kind, data.name, data.num_classes, len(data.train)) == ("toy3", "toy3", 3, 180)
    assert registry.split_title(data, "dev") == "toy3 held-out"
    assert registry.class_titles(data) == ["contra", "entail", "neutral"]
    assert registry.run_name_prefix(data) == "toy3-"
    assert registry.anchors_of(data).rows[0][0] == "always entail"
    assert registry.published_anchors("TOY3") is toy.anchors
    assert registry.dataset_params(data) == {
        "dataset": "toy3",
        "dataset_hash": "toy3-v1",
        "toy3_hash": "toy3-v1",
        "overlap_train_dev": 0,
        "overlap_train_test": 0,
        "overlap_dev_test": 0,
    }
    assert registry.dataset_name({"dataset": "toy3"}) == "toy3"
    renamed = registry.load_pair_data(dataset="toy3", name="mine")
    assert (renamed.name, registry.split_title(renamed, "test")) == ("mine", "toy3 final")


def test_mrpc_and_tsv_are_entries_and_unknown_names_are_one_line(tmp_path):
    assert {"mrpc", "tsv"} <= set(registry.DATASETS)
    with pytest.raises(UserError, match=r"^--data.dataset=csv: expected mrpc, sick-e, sick-r, stsb or tsv$"):
        registry.dataset_entry("csv")
    assert registry.dataset_name({"dataset": "tsv", "train": str(tmp_path / "snli" / "train.tsv")}) == "snli"
    assert registry.dataset_name({"name": "x"}) == "x" and registry.dataset_name({}) == "mrpc"


def test_a_benchmark_dataset_section_takes_every_data_flag_and_nothing_else(tmp_path):
    """A suite config's ``dataset:`` holds the pair data set's flags, whatever PairDataSpec declares."""
    from benchmarks.plan.matrix import load_config

    values = {
        "dataset": "tsv",
        "mrpc_dir": "data/mine",
        "data_dir": "data/sick",
        "train": "data/mine/train.tsv",
        "dev": "data/mine/dev.tsv",
        "test": "data/mine/test.tsv",
        "sentence1_column": "a",
        "sentence2_column": "b",
        "label_column": "y",
        "id_column": "id",
        "has_header": True,
        "positive_label": "1",
        "name": "mine",
        "max_split_overlap": 0.1,
    }
    assert set(values) == set(SPEC_KEYS)  # a new data flag needs a value here, and so this test's attention
    path = tmp_path / "suite.yaml"
    matrix = {
        "encoders": [{"name": "e", "pretrain": {"config": "configs/pretrain/smoke.yaml"}}],
        "mixes": ["scalar"],
        "heads": ["pool-mlp"],
        "seeds": 1,
    }
    path.write_text(yaml.safe_dump({**matrix, "dataset": values}))
    assert load_config(path).experiment == "mine"
    path.write_text(yaml.safe_dump({**matrix, "dataset": {**values, "batch_size": 8}}))
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}: unknown `dataset` key\(s\) \['batch_size'\]"):
        load_config(path)


@pytest.mark.slow
def test_a_registered_data_set_runs_through_pretrain_and_finetune(toy, tmp_path, monkeypatch, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    common = ["--data.dataset=toy3", "--trainer.enable_progress_bar=false"]
    assert (
        run_cli(
            PretrainCLI,
            [
                "fit",
                "--config",
                str(REPO / "configs/pretrain/smoke.yaml"),
                *common,
                "--trainer.limit_train_batches=3",
                "--trainer.limit_val_batches=2",
            ],
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "toy3 held-out sentences" in printed
    client = MlflowClient(uri)
    (pretrained,) = client.search_runs([client.get_experiment_by_name("pretrain").experiment_id])
    assert pretrained.data.tags["dataset"] == "toy3" and pretrained.data.params["toy3_hash"] == "toy3-v1"
    assert (
        run_cli(
            FinetuneCLI,
            [
                "fit",
                "--config",
                str(REPO / "configs/downstream/smoke.yaml"),
                *common,
                f"--model.encoder=runs:/{pretrained.info.run_id}",
                "--trainer.max_epochs=1",
                "--data.cache_dir=none",
            ],
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "(toy3 held-out, 45 pairs)" in printed and "(toy3 final, 45 pairs)" in printed
    (finetuned,) = client.search_runs([client.get_experiment_by_name("toy3").experiment_id])
    assert finetuned.info.status == "FINISHED" and finetuned.info.run_name.startswith("toy3-")
    assert finetuned.data.tags["dataset"] == "toy3" and finetuned.data.params["num_classes"] == "3"
    assert 0.0 <= finetuned.data.metrics["test_acc"] <= 1.0


def test_mrpcs_published_anchors_cite_papers_not_files():
    """Each anchor's source is a paper (author and year) or the test set's own label counts,
    never a file a reader of the report does not have."""
    anchors = registry.published_anchors("mrpc")
    file_name = re.compile(r"\b[\w-]+\.(md|py|txt|csv|json|yaml)\b")
    for system, accuracy, f1, source in anchors.rows:
        assert not file_name.search(source), (system, source)
        assert re.search(r"[A-Z][a-z]+ (et al\. )?(19|20)\d\d", source) or "label" in source, (system, source)
        assert all(50 < figure < 100 for figure in (accuracy, f1) if figure is not None), system
        assert (accuracy, f1) != (None, None), system
    assert anchors.rows[0][1:3] == (66.5, 79.9)  # always paraphrase: 1147 of 1725 MSR test pairs

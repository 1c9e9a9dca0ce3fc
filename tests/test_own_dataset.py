"""A user's own 3-label data set end to end through the real CLIs, on a throw-away SQLite store:
pretrain (smoke config) on its train sentences plus a text file → finetune → a benchmark-quick-style
suite on the same data, and a bad file ending in one line. No MRPC needed."""

import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient
from sklearn.metrics import accuracy_score, f1_score

from tests.helpers import all_runs, printed_run_id, run_module
from tests.pair_files import LABELS, write_three_label_set

REPO = Path(__file__).resolve().parents[1]
PRETRAIN_SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
FINETUNE_SMOKE = REPO / "configs" / "downstream" / "smoke.yaml"
PREDICTION_COLUMNS = ["id", "label", *(f"prob_{label}" for label in LABELS), "pred", "sentence1", "sentence2"]
SUITE_METHODS = [
    "elmo-scalar-pool-mlp",
    "random-scalar-pool-mlp",
    "elmo-top-pool-mlp",
    "random-top-pool-mlp",
    "elmo-scalar-pool-mlp@0.5",
    "random-scalar-pool-mlp@0.5",
    "majority",
    "tfidf-lr",
    "majority@0.5",
    "tfidf-lr@0.5",
]

pytestmark = pytest.mark.slow


def run(store: dict, *command: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    started = time.perf_counter()
    process = run_module(*command, uri=store["uri"], cwd=cwd or store["root"])
    store["seconds"].setdefault(command[0], time.perf_counter() - started)  # the first run of each CLI
    return process


def data_flags(store: dict) -> list[str]:
    return ["--data.dataset=tsv", *(f"--data.{split}={path}" for split, path in store["files"].items())]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    files = write_three_label_set(root / "nli3")
    extra = root / "extra.txt"
    extra.write_text("The wombat reported a large profit this quarter.\nInvestors cheered the wombat.\n")
    store = {"root": root, "uri": f"sqlite:///{root / 'mlflow.db'}", "files": files, "extra": extra, "seconds": {}}
    yield store
    for pretrain_run in [r for r in all_runs(store["uri"]) if r.data.tags.get("stage") == "pretrain"]:
        shutil.rmtree(REPO / ".cache" / "encoders" / pretrain_run.info.run_id, ignore_errors=True)
    print("\n  timings (s): " + ", ".join(f"{name} {seconds:.1f}" for name, seconds in store["seconds"].items()))


@pytest.fixture(scope="module")
def pretrained(store):
    process = run(
        store,
        "pretrain",
        "fit",
        "--config",
        str(PRETRAIN_SMOKE),
        "--trainer.enable_progress_bar=false",
        *data_flags(store),
        f"--data.extra_corpus=[{store['extra']}]",
    )
    return MlflowClient(store["uri"]).get_run(printed_run_id(process))


def test_pretraining_reads_the_data_sets_train_sentences_and_logs_its_corpora(pretrained):
    assert pretrained.info.status == "FINISHED"
    assert pretrained.data.tags["dataset"] == "nli3"
    assert pretrained.info.run_name == "elmo·2x32·full·nli3+extra·smoke·s0"  # configs/pretrain/smoke.yaml
    params = pretrained.data.params
    assert params["dataset"] == "nli3" and int(params["corpus_sentences.extra"]) == 2
    assert int(params["corpus_sentences.nli3"]) + 2 == int(params["train_sentences"])
    inputs = pretrained.inputs.dataset_inputs
    assert [item.dataset.name for item in inputs] == ["nli3", "extra"]


@pytest.fixture(scope="module")
def finetuned(store, pretrained):
    process = run(
        store,
        "downstream",
        "fit",
        "--config",
        str(FINETUNE_SMOKE),
        "--trainer.enable_progress_bar=false",
        f"--data.cache_dir={store['root'] / 'cache'}",
        f"--model.encoder=runs:/{pretrained.info.run_id}",
        *data_flags(store),
    )
    return process, MlflowClient(store["uri"]).get_run(printed_run_id(process))


def test_finetune_run_goes_to_the_data_sets_experiment_with_three_classes(store, finetuned, tmp_path):
    process, finetune_run = finetuned
    client = MlflowClient(store["uri"])
    assert client.get_experiment(finetune_run.info.experiment_id).name == "nli3"
    assert finetune_run.info.run_name == "nli3-elmo-smoke·scalar·pool-mlp·s0"
    assert finetune_run.data.tags["dataset"] == "nli3" and finetune_run.data.tags["task"] == "tsv"
    params, metrics = finetune_run.data.params, finetune_run.data.metrics
    assert (params["f1_average"], params["num_classes"], params["test_pairs"]) == ("macro", "3", "60")
    assert "nli3 test, 60 pairs" in process.stdout
    test_file = pd.read_csv(store["files"]["test"], sep="\t", dtype=str)
    for split in ("dev", "test"):
        path = client.download_artifacts(finetune_run.info.run_id, f"predictions/{split}.csv", str(tmp_path))
        frame = pd.read_csv(path, dtype={"id": str, "label": str, "pred": str})
        assert list(frame.columns) == PREDICTION_COLUMNS
        probabilities = frame[[f"prob_{label}" for label in LABELS]]
        assert ((probabilities.sum(axis=1) - 1).abs() < 1e-6).all()
        assert (frame["pred"] == probabilities.idxmax(axis=1).str.removeprefix("prob_")).all()
        assert metrics[f"{split}_acc"] == pytest.approx(accuracy_score(frame["label"], frame["pred"]), abs=1e-12)
        assert metrics[f"{split}_f1"] == pytest.approx(
            f1_score(frame["label"], frame["pred"], average="macro"), abs=1e-12
        )
    assert frame["id"].tolist() == test_file["id"].tolist() and frame["label"].tolist() == test_file["label"].tolist()
    print(f"\n  finetune (smoke, 3 labels): test acc {metrics['test_acc']:.3f}, macro F1 {metrics['test_f1']:.3f}")


@pytest.fixture(scope="module")
def suite(store, pretrained):
    config = {
        "name": "own-quick",
        "dataset": {"dataset": "tsv", **{k: str(v) for k, v in store["files"].items()}},
        "encoders": [{"name": "elmo", "run": f"runs:/{pretrained.info.run_id}"}],
        "finetune": {"config": str(FINETUNE_SMOKE)},
        "mixes": ["scalar", "top"],
        "heads": ["pool-mlp"],
        "seeds": 1,
        "random_control": True,
        "baselines": ["majority", "tfidf-lr"],
        "learning_curve": {"fractions": [0.5, 1.0], "mix": "scalar", "head": "pool-mlp", "seeds": 1},
    }
    path = store["root"] / "own-quick.yaml"
    path.write_text(yaml.safe_dump(config))
    results = store["root"] / "results"
    scratch = f"--trainer.default_root_dir={store['root'] / 'lightning'}"
    process = run(
        store,
        "benchmarks.suite",
        "--config",
        str(path),
        "--results-dir",
        str(results),
        f"--finetune-args=--data.cache_dir={store['root'] / 'cache'} {scratch}",
        cwd=REPO,
    )
    assert process.returncode == 0, process.stderr[-5000:]
    return {"process": process, "results": results}


def test_suite_on_the_data_set_names_it_and_tests_against_the_control(store, suite):
    runs = all_runs(store["uri"])
    (parent,) = [r for r in runs if r.data.tags.get("stage") == "benchmark"]
    client = MlflowClient(store["uri"])
    assert client.get_experiment(parent.info.experiment_id).name == "nli3"
    assert parent.info.status == "FINISHED" and parent.data.tags["dataset"] == "nli3"
    cells = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["method"] for r in cells) == sorted(SUITE_METHODS)
    assert all(r.data.tags["dataset"] == "nli3" and r.info.status == "FINISHED" for r in cells)
    assert parent.data.tags["task"] == "tsv" and all(r.data.tags["task"] == "tsv" for r in cells)
    results = pd.read_csv(suite["results"] / "results.csv").set_index("method")
    assert results.index.tolist() == SUITE_METHODS
    assert results.loc["majority", "test_acc_mean"] == pytest.approx(1 / 3)  # balanced 3 labels
    paired = results.loc[[m for m in SUITE_METHODS if m.startswith("elmo-")]]  # paired on `id`, one seed pair
    assert paired["gap_vs_random"].between(-1, 1).all() and (paired["paired_items"] == 60).all()
    assert (paired["gap_test"] == "no seed replication").all() and paired["p_value_vs_random"].isna().all()
    report = (suite["results"] / "report.md").read_text()
    assert "dev = nli3 dev split (60 pairs), test = nli3 test split (60 pairs)" in report
    assert "macro F1 over the 3 labels" in report and "Published anchors" not in report
    print(
        "\n  suite: "
        + ", ".join(
            f"{m} test acc {results.loc[m, 'test_acc_mean']:.3f} F1 {results.loc[m, 'test_f1_mean']:.3f}"
            for m in SUITE_METHODS
        )
    )


def test_an_unknown_test_label_ends_in_one_line_naming_file_and_line(store, pretrained):
    bad = store["root"] / "bad-test.tsv"
    lines = store["files"]["test"].read_text().splitlines()
    lines[4] = "\t".join(lines[4].split("\t")[:3] + ["maybe"])
    bad.write_text("\n".join(lines) + "\n")
    before = {r.info.run_id for r in all_runs(store["uri"])}
    flags = [flag if not flag.startswith("--data.test=") else f"--data.test={bad}" for flag in data_flags(store)]
    process = run(
        store,
        "downstream",
        "fit",
        "--config",
        str(FINETUNE_SMOKE),
        *flags,
        f"--model.encoder=runs:/{pretrained.info.run_id}",
    )
    assert process.returncode == 2 and "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and f"{bad}:5" in last and "maybe" in last, last
    assert not [r for r in all_runs(store["uri"]) if r.info.run_id not in before or r.info.status == "RUNNING"]

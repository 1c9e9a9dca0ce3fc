"""A finetune summary's context (``downstream.run.summary_comparisons``): the data set's baselines scored by the
benchmark's code and cached per digest of the splits, the twin found only among runs with the same
settings, the gap's sign for either arm; and ``--model.standardize``'s default (on for frozen
transfers, off where it cannot apply)."""

import json

import pytest
from mlflow.tracking import MlflowClient

from downstream.model.standardization import resolved_standardize
from downstream.run import baselines, summary_comparisons
from downstream.run.cli import pair_classifier
from downstream.run.evaluation import predictions_frame, split_metrics
from tests.downstream.test_baselines import as_pair_data, toy_pairs
from tests.downstream.test_lit_pair import HEAD, checkpoint, mrpc_dir


def toy_data():
    data = as_pair_data(toy_pairs(0, 60), toy_pairs(100, 24))
    return data, {"train": data.train, "dev": data.dev, "test": data.test}


def test_baselines_are_the_benchmark_systems_scored_on_the_test_split():
    data, pairs = toy_data()
    scores = summary_comparisons.baseline_scores(data, pairs, None)
    majority = baselines.majority_baseline(data.train, {"test": data.test}, 2)["test"]
    tfidf = baselines.tfidf_lr_baseline(data.train, {"test": data.test}, 2, 0)["test"]
    assert scores["majority"] == split_metrics(predictions_frame(data, data.test, majority), "test", data)
    assert scores["tfidf-lr"] == split_metrics(predictions_frame(data, data.test, tfidf), "test", data)
    assert scores["tfidf-lr"]["test_acc"] > scores["majority"]["test_acc"]  # the toy pairs are lexical


def test_baselines_are_cached_per_digest_of_the_splits(tmp_path, monkeypatch):
    data, pairs = toy_data()
    first = summary_comparisons.baseline_scores(data, pairs, tmp_path)
    files = list((tmp_path / "baselines").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == first

    def refuse(*args, **kwargs):
        raise AssertionError("computed again")

    monkeypatch.setattr(baselines, "tfidf_lr_baseline", refuse)
    assert summary_comparisons.baseline_scores(data, pairs, tmp_path) == first  # read back, not fitted again
    fewer = {**pairs, "train": pairs["train"][:30]}  # another train subset is another key
    assert summary_comparisons.baseline_key(data, fewer) != summary_comparisons.baseline_key(data, pairs)
    with pytest.raises(AssertionError, match="computed again"):
        summary_comparisons.baseline_scores(data, fewer, tmp_path)


def test_a_baseline_that_cannot_fit_is_a_reason_not_a_failure():
    data, pairs = toy_data()
    one_class = [pair for pair in pairs["train"] if pair.label == 1]
    scores = summary_comparisons.baseline_scores(data, {**pairs, "train": one_class}, None)
    assert scores["majority"]["test_acc"] == pytest.approx(16 / 24)
    assert "at least 2 classes" in scores["tfidf-lr"]


def make_run(client, experiment_id, encoder_label: str, standardize: str, test_acc: float, seed: str = "0") -> str:
    run = client.create_run(
        experiment_id,
        tags={
            "stage": "finetune",
            "finetune_mode": "frozen",
            "mix": "scalar",
            "head": "pool-mlp",
            "train_fraction": "1.0",
            "seed": seed,
            "dataset": "mrpc",
            "encoder": encoder_label,
        },
    )
    run_id = run.info.run_id
    client.log_param(run_id, "model.encoder", "runs:/abc" if not encoder_label.startswith("random") else "random")
    client.log_param(run_id, "model.standardize", standardize)
    client.log_param(run_id, "data.max_pairs", "300")
    client.log_param(run_id, "encoder_fingerprint", encoder_label)  # differs between the arms: not a setting
    client.log_metric(run_id, "test_acc", test_acc)
    client.log_metric(run_id, "test_f1", test_acc)
    client.set_terminated(run_id)
    return run_id


def test_the_twin_is_the_other_arm_with_the_same_settings(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("mrpc")
    pretrained = make_run(client, experiment, "elmo-2x32-abc", "True", 0.70)
    make_run(client, experiment, "random-elmo-2x32-abc", "True", 0.66, seed="1")  # another seed
    raw_twin = make_run(client, experiment, "random-elmo-2x32-abc", "False", 0.66)  # not standardised
    tags = client.get_run(pretrained).data.tags
    assert summary_comparisons.twin_run(client, experiment, pretrained, tags) is None
    twin = make_run(client, experiment, "random-elmo-2x32-abc", "True", 0.65)
    assert summary_comparisons.twin_run(client, experiment, pretrained, tags).info.run_id == twin
    back = summary_comparisons.twin_run(client, experiment, twin, client.get_run(twin).data.tags)
    assert back.info.run_id == pretrained
    assert summary_comparisons.twin_run(client, experiment, raw_twin, client.get_run(raw_twin).data.tags) is None


class Twin:
    def __init__(self, run_id: str, test_acc: float, test_f1: float):
        self.info = type("Info", (), {"run_id": run_id})()
        self.data = type("Data", (), {"metrics": {"test_acc": test_acc, "test_f1": test_f1}})()


SCORES = {"majority": {"test_acc": 0.665, "test_f1": 0.799}, "tfidf-lr": {"test_acc": 0.732, "test_f1": 0.815}}


@pytest.mark.parametrize(
    "is_random, this, other, gap",
    [(False, 0.733, 0.701, "+0.032"), (True, 0.701, 0.733, "+0.032"), (False, 0.690, 0.701, "-0.011")],
)
def test_the_gap_is_pretrained_minus_random_whichever_arm_prints_it(is_random, this, other, gap):
    lines = summary_comparisons.context_lines(
        {"test_acc": this, "test_f1": 0.8},
        SCORES,
        Twin("t1", other, 0.79),
        is_random,
        "",
        "MSR test",
        "--model.encoder=random",
    )
    text = "\n".join(lines)
    assert "0.665     0.799     majority class" in text and "0.732     0.815     TF-IDF + LR" in text
    assert ("pretrained counterpart (run t1)" if is_random else "random twin (run t1)") in text
    assert f"  gap        {gap}    test acc (pretrained − random twin)" in text  # a fraction, as the rows


def test_the_majority_line_names_the_subset_of_test_pairs_it_was_scored_on():
    subset = summary_comparisons.context_lines(
        {"test_acc": 0.70, "test_f1": 0.8},
        SCORES,
        None,
        False,
        "",
        "MSR test",
        "--model.encoder=random",
        test_pairs=1000,
        all_test_pairs=1725,
    )
    majority = next(line for line in subset if "majority class" in line)
    assert majority.endswith(
        "majority class (every pair: the most frequent train label; these 1000 of 1725 test pairs)"
    )
    assert "(MSR test: 1000 of its 1725 pairs, the same pairs in every row)" in subset[0]
    whole = summary_comparisons.context_lines(
        {"test_acc": 0.70, "test_f1": 0.8},
        SCORES,
        None,
        False,
        "",
        "MSR test",
        "--model.encoder=random",
        test_pairs=1725,
        all_test_pairs=1725,
    )
    assert "(MSR test, 1725 pairs, the same pairs in every row)" in whole[0]


def test_without_a_twin_the_summary_says_how_to_run_it():
    lines = summary_comparisons.context_lines(
        {"test_acc": 0.665, "test_f1": 0.799},
        None,
        None,
        False,
        "",
        "MSR test",
        "--model.encoder=random --model.random_like=runs:/abc",
        collapsed=True,
    )
    text = "\n".join(lines)
    assert "majority" not in text  # a benchmark's cell: its baseline cells hold them
    assert "this run (one label for every pair: collapsed)" in text
    assert "no random twin with these settings" in text and "--model.random_like=runs:/abc" in lines[-1]


@pytest.mark.parametrize(
    "value, finetune, head, expected",
    [
        ("auto", "frozen", "pool-mlp", True),
        ("auto", "frozen", "attn", True),
        ("auto", "full", "pool-mlp", False),
        ("auto", "gradual", "attn", False),
        ("auto", "full", "cls", False),
        (False, "frozen", "attn", False),
        (True, "frozen", "attn", True),
    ],
)
def test_standardize_auto_is_on_for_frozen_transfers_only(value, finetune, head, expected):
    assert resolved_standardize(value, finetune, head) is expected


def test_a_frozen_transfer_standardises_by_default_and_a_fine_tuned_one_builds_without_it(checkpoint):
    frozen = pair_classifier(encoder=str(checkpoint), **HEAD)
    assert frozen.hparams.standardize is True and frozen.classifier.standardizer is not None
    twin = pair_classifier(encoder="random", random_like=str(checkpoint), **HEAD)
    assert twin.hparams.standardize is True and twin.classifier.standardizer is not None
    tuned = pair_classifier(encoder=str(checkpoint), **HEAD, finetune="full")
    assert tuned.hparams.standardize is False and tuned.classifier.standardizer is None
    raw = pair_classifier(encoder=str(checkpoint), **HEAD, standardize=False)
    assert raw.classifier.standardizer is None

"""The linear probe of frozen features: its pooled vectors and pair features, its logistic
regression against sklearn's on the same features, its child run (metrics recomputed by sklearn
from the logged predictions), the probe cells of a plan, and the report's check rows and remark."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from benchmarks.cell.definition import Cell
from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import parse_matrix
from benchmarks.report.cells_from_store import read_predictions
from benchmarks.report.probe_checks import probe_remarks, probe_section
from benchmarks.report.results_table import build_results
from benchmarks.tasks.cells import linear_probe
from benchmarks.tasks.linear_probe import pair_features, probe_probabilities, sentence_vectors
from downstream.data.features import FeatureStore
from downstream.run.baselines import REGULARISATION_GRID
from harness.datasets.mrpc import load_mrpc
from pretrain.encoders.loading import load_encoder, random_encoder


@pytest.fixture(scope="module")
def data(mrpc_dir):
    full = load_mrpc(str(mrpc_dir))
    return dataclasses.replace(full, train=full.train[:160], dev=full.dev[:60], test=full.test[:80])


@pytest.fixture(scope="module")
def encoder_path(tmp_path_factory):
    from tests.conftest import _save_encoder

    return _save_encoder("elmo", tmp_path_factory.mktemp("probe-encoder"))[0]


def test_sentence_vectors_are_the_encoders_mean_over_tokens_and_layers(data, encoder_path):
    encoder = load_encoder(encoder_path)
    sentences = data.sentences()[:20]
    vectors = sentence_vectors(FeatureStore.build(encoder, sentences, None, progress=False))  # (N, D)
    expected = encoder.embed_sentences(sentences).double().numpy()  # (N, D), float32 features
    np.testing.assert_allclose(vectors, expected, atol=2e-3)  # the store keeps float16
    u, v = vectors[:3], vectors[3:6]
    features = pair_features(vectors, [0, 1, 2], [3, 4, 5])
    np.testing.assert_array_equal(features, np.concatenate([u, v, np.abs(u - v), u * v], axis=1))


def test_the_probe_is_sklearns_logistic_regression_on_those_features(data, encoder_path):
    encoder = load_encoder(encoder_path)
    probabilities = probe_probabilities(encoder, data, None, seed=3)
    sentences = data.sentences()
    row = {sentence: index for index, sentence in enumerate(sentences)}
    vectors = sentence_vectors(FeatureStore.build(encoder, sentences, None, progress=False))

    def features(pairs):
        return pair_features(vectors, [row[p.sentence1] for p in pairs], [row[p.sentence2] for p in pairs])

    labels = np.array([p.label for p in data.train])
    search = GridSearchCV(
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=3)),
        {"logisticregression__C": REGULARISATION_GRID},
        scoring="accuracy",
        cv=StratifiedKFold(5, shuffle=True, random_state=3),
    )
    with threadpool_limits(1):  # BLAS threads on a busy 2-core machine cost seconds here
        search.fit(features(data.train), labels)
    for split in ("dev", "test"):
        expected = search.best_estimator_.predict_proba(features(data.split(split)))
        np.testing.assert_allclose(probabilities[split], expected, rtol=0, atol=1e-12)
    twin = probe_probabilities(random_encoder(encoder, 5), data, None, seed=3)
    assert not np.array_equal(twin["test"], probabilities["test"])  # the twin's own features


@pytest.mark.parametrize("probe_of", ["pretrained", "random"])
@pytest.mark.slow
def test_a_probe_run_logs_sklearn_metrics_of_its_predictions(data, encoder_path, tmp_path, monkeypatch, probe_of):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    parent = client.create_run(client.create_experiment("probe")).info.run_id
    cell = Cell(
        f"{'elmo' if probe_of == 'pretrained' else 'random'}-linear-probe",
        "probe",
        1,
        "elmo",
        str(encoder_path),
        probe_of=probe_of,
    )
    run_id = linear_probe(cell, data, "probe", parent, "hash1", cache_dir=str(tmp_path / "cache"))
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert (tags["stage"], tags["kind"], tags["probe_of"], tags["mlflow.parentRunId"]) == (
        "baseline",
        "probe",
        probe_of,
        parent,
    )
    assert tags["pretrain_run_id"] == ("random" if probe_of == "random" else str(encoder_path))
    assert tags["encoder"].startswith("random-") == (probe_of == "random")
    assert run.data.params["model.encoder"] == (
        f"random:{encoder_path}@1" if probe_of == "random" else str(encoder_path)
    )
    for split in ("dev", "test"):
        frame = read_predictions(client.download_artifacts(run_id, f"predictions/{split}.csv", str(tmp_path)))
        assert len(frame) == len(data.split(split))
        assert run.data.metrics[f"{split}_acc"] == pytest.approx(accuracy_score(frame["label"], frame["pred"]))
        assert run.data.metrics[f"{split}_f1"] == pytest.approx(f1_score(frame["label"], frame["pred"], pos_label="1"))


def test_a_plan_with_linear_probe_has_a_probe_per_encoder_twin_and_seed():
    config = {"mixes": ["scalar"], "heads": ["pool-mlp"], "seeds": 2, "linear_probe": True, "baselines": ["majority"]}
    encoders = [
        {"name": "elmo", "run_id": "abc", "num_layers": 3, "family": "elmo"},
        {"name": "gpt", "run_id": "def", "num_layers": 3, "family": "gpt"},
    ]
    probes = [cell for cell in plan(parse_matrix(config), encoders, []) if cell.kind == "probe"]
    assert [(cell.method, cell.seed, cell.probe_of, cell.encoder_run) for cell in probes[:4]] == [
        ("elmo-linear-probe", 0, "pretrained", "abc"),
        ("random(elmo)-linear-probe", 0, "random", "abc"),
        ("elmo-linear-probe", 1, "pretrained", "abc"),
        ("random(elmo)-linear-probe", 1, "random", "abc"),
    ]
    assert len(probes) == 8 and not probes[0].control
    assert probes[0].spec() != probes[1].spec()  # the twin's probe is another cell
    assert not [
        cell for cell in plan(parse_matrix({**config, "linear_probe": False}), encoders, []) if cell.kind == "probe"
    ]


def _predictions(correct: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    pred = np.where(correct, labels, 1 - labels)
    return pd.DataFrame(
        {"id1": [str(i) for i in range(len(labels))], "id2": "x", "label": labels.astype(str), "pred": pred.astype(str)}
    )


def test_the_report_shows_probes_apart_and_names_a_collapsed_arm_with_a_usable_probe():
    rng = np.random.default_rng(0)
    labels = (rng.random(400) < 0.66).astype(int)
    majority = np.ones(400, dtype=int)
    rows, predictions = [], {}

    def add(method, kind, seed, pred, control="", probe_of=""):
        run_id = f"{method}/{seed}"
        frame = _predictions(pred == labels, labels)
        predictions[run_id] = frame
        accuracy = float((pred == labels).mean())
        rows.append(
            {
                "run_id": run_id,
                "method": method,
                "seed": seed,
                "encoder": "elmo" if kind != "baseline" else "",
                "kind": kind,
                "control": control,
                "probe_of": probe_of,
                "dev_acc": accuracy,
                "dev_f1": 0.8,
                "test_acc": accuracy,
                "test_f1": 0.8,
                "test_pairs": 400,
            }
        )

    for seed in range(3):
        good = np.where(rng.random(400) < 0.8, labels, 1 - labels)
        add("elmo-scalar-attn", "pretrained", seed, good, control="random-scalar-attn")
        add("random-scalar-attn", "random", seed, majority)  # collapsed in every seed
        add(
            "random-linear-probe",
            "probe",
            seed,
            np.where(rng.random(400) < 0.75, labels, 1 - labels),
            probe_of="random",
        )
        add("elmo-linear-probe", "probe", seed, good, probe_of="pretrained")
    add("majority", "baseline", 0, majority)
    runs = pd.DataFrame(rows)
    results = build_results(runs, predictions)
    table = results.set_index("method")
    assert pd.isna(table.loc["random-linear-probe", "gap_vs_random"])  # a check: no gap
    section = "\n".join(probe_section(results, runs))
    assert "| `random-linear-probe` | 3 |" in section and "| `elmo-linear-probe` | 3 |" in section
    (remark,) = probe_remarks(results, runs)
    assert remark.startswith("**Protocol defect:** `random-scalar-attn` collapsed to one class in 3/3 seeds")
    assert "`random-linear-probe`" in remark
    # the same arm beside a probe at the majority rate: nothing to say
    probe_runs = [f"random-linear-probe/{seed}" for seed in range(3)]
    runs_at_majority = runs.copy()
    runs_at_majority.loc[runs["run_id"].isin(probe_runs), "test_acc"] = float((majority == labels).mean())
    at_majority = {**predictions, **{run: _predictions(majority == labels, labels) for run in probe_runs}}
    assert probe_remarks(build_results(runs_at_majority, at_majority), runs_at_majority) == []


@pytest.mark.slow
def test_a_probe_task_is_found_again_by_its_hash(data, encoder_path, tmp_path, monkeypatch):
    from benchmarks.tasks import entry_points as tasks

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr(tasks, "linear_probe", functools.partial(linear_probe, cache_dir=str(tmp_path / "cache")))
    client = MlflowClient(uri)
    parent = client.create_run(client.create_experiment("probe")).info.run_id
    study = tasks.Study("unit", "probe", parent, "driver-1", tmp_path / "logs", "digest")
    cell = Cell("random-linear-probe", "probe", 0, "elmo", str(encoder_path), probe_of="random")
    first = tasks.run_probe(cell, data, "hash-probe", study)
    again = tasks.run_probe(cell, data, "hash-probe", study)
    assert not first["reused"] and again == {**again, "run_id": first["run_id"], "reused": True}

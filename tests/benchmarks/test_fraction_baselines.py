"""Baselines at every labelled fraction: majority and TF-IDF + LR fitted on the very subset each
seed's cells train on (``tfidf-lr@0.1``), planned by the suite, fitted by a report whose folders lack
them, and the reference of every 10% arm's gap to TF-IDF; and ``make study-report STUDY=…``."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.plan.cells import baseline_cells
from benchmarks.plan.matrix import Matrix, Transfer
from benchmarks.report.fraction_baselines import missing_fraction_baselines, with_fraction_baselines
from benchmarks.report.results_table import build_results
from benchmarks.stats.gaps import compare_with_twin
from benchmarks.tasks.baselines import fit_baseline
from downstream.data.pair_datamodule import subsample
from downstream.run.baselines import tfidf_lr_baseline
from harness.datasets.registry import load_pair_data

REPO = Path(__file__).resolve().parents[2]
WORDS = "the a market rose fell shares bank said on monday profit loss quarter year company".split()


def write_split(path: Path, pairs: int, seed: int) -> None:
    """A TSV split of ``pairs`` pairs: label 1 when the second sentence repeats most of the first."""
    rng = np.random.default_rng(seed)
    lines = ["sentence1\tsentence2\tlabel"]
    for index in range(pairs):
        first = list(rng.choice(WORDS, 8))
        label = int(rng.random() < 0.6)
        second = first[:6] + list(rng.choice(WORDS, 2)) if label else list(rng.choice(WORDS, 8))
        lines.append(f"{' '.join(first)} {index}\t{' '.join(second)}\t{label}")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("pairs")
    for split, pairs, seed in (("train", 200, 0), ("dev", 40, 1), ("test", 60, 2)):
        write_split(root / f"{split}.tsv", pairs, seed)
    return {"dataset": "tsv", **{split: str(root / f"{split}.tsv") for split in ("train", "dev", "test")}}


def matrix() -> Matrix:
    return Matrix(
        baselines=("majority", "tfidf-lr"),
        seeds=(0, 1, 2),
        fractions=(0.1, 1.0),
        transfers={"elmo": (Transfer("frozen", (0.1, 1.0), (0, 1, 2), ()),)},
    )


def test_the_plan_fits_each_baseline_once_whole_and_per_seed_at_each_smaller_fraction():
    cells = baseline_cells(matrix())
    assert [(cell.method, cell.seed, cell.train_fraction) for cell in cells] == [
        ("majority", 0, 1.0),
        ("tfidf-lr", 0, 1.0),
        *[(name, seed, 0.1) for seed in (0, 1, 2) for name in ("majority@0.1", "tfidf-lr@0.1")],
    ]
    assert all(cell.kind == "baseline" for cell in cells)


def test_a_fraction_baseline_fits_on_the_subset_a_cell_of_that_seed_trains_on(dataset):
    data = load_pair_data(**dataset)
    fitted = fit_baseline("tfidf-lr@0.25", data, 0.25, seed=3)
    expected = tfidf_lr_baseline(
        subsample(data.train, 0.25, 3), {"dev": data.dev, "test": data.test}, data.num_classes, 3
    )
    np.testing.assert_allclose(fitted["test"], expected["test"])
    assert not np.allclose(fitted["test"], fit_baseline("tfidf-lr@0.25", data, 0.25, seed=4)["test"])
    majority = fit_baseline("majority", data)["test"]  # the whole train split: its class rates
    np.testing.assert_allclose(majority[0], np.bincount([pair.label for pair in data.train]) / len(data.train))


def correct_on(share: float, labels: np.ndarray, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pred = np.where(rng.random(len(labels)) < share, labels, 1 - labels)
    return pd.DataFrame(
        {"id1": np.arange(len(labels)), "id2": np.arange(len(labels)), "label": labels, "prob": 0.5, "pred": pred}
    )


def test_a_10_percent_arm_is_compared_with_tfidf_at_10_percent_paired_by_seed():
    labels = (np.arange(400) % 3 != 0).astype(int)
    rows, predictions = [], {}
    for method, kind, fraction, share, seeds in (
        ("m@0.1", "pretrained", 0.1, 0.75, (0, 1, 2)),
        ("m", "pretrained", 1.0, 0.8, (0, 1, 2)),
        ("tfidf-lr", "baseline", 1.0, 0.9, (0,)),
        ("tfidf-lr@0.1", "baseline", 0.1, 0.7, (0, 1, 2)),
    ):
        for seed in seeds:
            run_id = f"{method}/{seed}"
            predictions[run_id] = correct_on(share, labels, 10 * len(rows))
            rows.append(
                {
                    "run_id": run_id,
                    "method": method,
                    "seed": seed,
                    "kind": kind,
                    "train_fraction": fraction,
                    "control": "",
                    "test_acc": share,
                }
            )
    results = build_results(pd.DataFrame(rows), predictions).set_index("method")
    assert results.loc["m@0.1", "tfidf_reference"] == "tfidf-lr@0.1"
    assert results.loc["m", "tfidf_reference"] == "tfidf-lr"
    by_seed = {seed: predictions[f"m@0.1/{seed}"] for seed in (0, 1, 2)}
    expected = compare_with_twin(by_seed, {seed: predictions[f"tfidf-lr@0.1/{seed}"] for seed in (0, 1, 2)})
    assert results.loc["m@0.1", "gap_vs_tfidf"] == pytest.approx(expected.gap)
    assert results.loc["m@0.1", "gap_vs_tfidf"] > 0 > results.loc["m", "gap_vs_tfidf"]
    assert pd.isna(results.loc["tfidf-lr@0.1", "gap_vs_tfidf"])  # a baseline is no method


def folder_runs(fraction_seeds=(0, 1)) -> tuple[pd.DataFrame, dict]:
    rows = [
        {"run_id": f"m@0.1/{seed}", "method": "m@0.1", "seed": seed, "kind": "pretrained", "train_fraction": 0.1}
        for seed in fraction_seeds
    ]
    rows += [{"run_id": "tfidf-lr/0", "method": "tfidf-lr", "seed": 0, "kind": "baseline", "train_fraction": 1.0}]
    return pd.DataFrame(rows), {row["run_id"]: pd.DataFrame() for row in rows}


def test_a_report_fits_the_fraction_baselines_its_folders_lack(dataset):
    data = load_pair_data(**dataset)
    runs, predictions = folder_runs()
    benchmark = {
        "settings": {"baselines": ["majority", "tfidf-lr"], "dataset": dataset},
        "data_digest": data.content_hash,
    }
    assert [(cell.method, cell.seed) for cell in missing_fraction_baselines(runs, [benchmark])] == [
        ("majority@0.1", 0),
        ("tfidf-lr@0.1", 0),
        ("majority@0.1", 1),
        ("tfidf-lr@0.1", 1),
    ]
    runs, predictions = folder_runs(fraction_seeds=(1,))  # one seed's fits: seconds
    runs, predictions, notes = with_fraction_baselines(runs, predictions, [benchmark])
    fitted = runs[runs["method"] == "tfidf-lr@0.1"]
    assert list(fitted["seed"]) == [1] and set(fitted["train_fraction"]) == {0.1}
    assert set(fitted["kind"]) == {"baseline"}
    for run_id, seed in zip(fitted["run_id"], fitted["seed"]):
        expected = fit_baseline("tfidf-lr@0.1", data, 0.1, seed)["test"][:, 1] >= 0.5
        assert list(predictions[run_id]["pred"]) == [data.labels[int(p)] for p in expected]
    assert fitted["test_acc"].notna().all()
    (note,) = notes
    assert "2 baseline run(s)" in note and "fitted by this report from the data set" in note
    again = with_fraction_baselines(runs, predictions, [benchmark])
    assert again[0] is runs and again[2] == []  # nothing left to fit


def test_another_data_set_is_refused_and_the_report_says_so(dataset):
    runs, predictions = folder_runs()
    benchmark = {"settings": {"baselines": ["tfidf-lr"], "dataset": dataset}, "data_digest": "0" * 64}
    kept, kept_predictions, (note,) = with_fraction_baselines(runs, predictions, [benchmark])
    assert kept is runs and kept_predictions is predictions
    assert "could not be fitted here" in note and "not the one the results were computed on" in note


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_study_report_takes_the_study_as_a_variable():
    def make(*variables: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["make", "-s", "--no-print-directory", "study-report", "STAMP=", *variables],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    default = make("-n")
    assert "results/families-v3/gpt-frozen-runs0-2" in default.stdout and "--out docs/study-report" in default.stdout
    assert "configs/benchmarks/families-v3/gpt-frozen-runs0-2.yaml" in default.stdout
    assert "results/families-budget" not in default.stdout
    v2 = make("-n", "STUDY=families-budget")  # beside its folders: never over the published report
    assert "results/families-budget/gpt-frozen" in v2.stdout and "--out results/families-budget/report" in v2.stdout
    other = make("-n", "STUDY=frozen-heads-x", "OUT=/tmp/x")
    assert "results/families-v3" not in other.stdout and "transfer study (frozen-heads-x)" in other.stdout
    missing = make("STUDY=no-such-study")
    assert missing.returncode != 0
    assert missing.stderr.splitlines()[0] == (
        "error: STUDY=no-such-study: no results/no-such-study/*/benchmark.json; "
        "name a study with committed chunks (ls results/)"
    )


def test_the_learning_curve_draws_the_fraction_baselines_as_lines_not_a_curve(tmp_path, monkeypatch):
    from benchmarks.report import figures

    drawn = []
    monkeypatch.setattr(figures, "_errorbar", lambda axes, group, x, label: drawn.append(label))
    runs = pd.DataFrame(
        [
            {
                "method": method,
                "seed": seed,
                "kind": kind,
                "encoder": encoder,
                "mix": "scalar" if encoder else "",
                "head": "attn" if encoder else "",
                "train_fraction": fraction,
                "test_acc": 0.7,
            }
            for method, kind, encoder, fraction in (
                ("e-attn", "pretrained", "e", 1.0),
                ("e-attn@0.1", "pretrained", "e", 0.1),
                ("majority", "baseline", "", 1.0),
                ("majority@0.1", "baseline", "", 0.1),
                ("tfidf-lr@0.1", "baseline", "", 0.1),
            )
            for seed in (0, 1)
        ]
    )
    assert figures._learning_curve(runs, tmp_path / "curve.png") is not None
    assert drawn == ["e-attn"]


def test_cells_on_other_test_items_than_the_fraction_baseline_get_no_gap_to_it():
    labels = (np.arange(400) % 3 != 0).astype(int)
    capped = correct_on(0.75, labels[:100], 1)  # a smoke run capped by --data.max_pairs
    rows = [
        {
            "run_id": f"m@0.1/{seed}",
            "method": "m@0.1",
            "seed": seed,
            "kind": "pretrained",
            "train_fraction": 0.1,
            "control": "",
        }
        for seed in (0, 1)
    ]
    rows += [
        {
            "run_id": f"tfidf-lr@0.1/{seed}",
            "method": "tfidf-lr@0.1",
            "seed": seed,
            "kind": "baseline",
            "train_fraction": 0.1,
            "control": "",
        }
        for seed in (0, 1)
    ]
    predictions = {
        **{f"m@0.1/{seed}": capped for seed in (0, 1)},
        **{f"tfidf-lr@0.1/{seed}": correct_on(0.7, labels, seed) for seed in (0, 1)},
    }
    results = build_results(pd.DataFrame(rows).assign(test_acc=0.7), predictions).set_index("method")
    assert pd.isna(results.loc["m@0.1", "gap_vs_tfidf"]) and pd.isna(results.loc["m@0.1", "tfidf_reference"])


def test_every_baseline_a_matrix_may_name_is_one_the_tasks_can_fit():
    from benchmarks.cell.method_names import BASELINE_NAMES
    from benchmarks.tasks.baselines import BASELINES

    assert set(BASELINES) == set(BASELINE_NAMES)

"""Results folders (``benchmarks.results_files.folder``): a folder written by hand here the way
``python -m benchmarks export`` writes one, read back with every check, merged, and reported from
alone; every kind of bad folder is one line naming its file, and nothing is used."""

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score

from benchmarks.__main__ import main
from benchmarks.results_files.folder import (
    BENCHMARK_FILE,
    CELLS_DIR,
    FORMAT,
    PREDICTIONS_SUFFIX,
    ResultSet,
    predictions_bytes,
    read_folder,
    write_json,
)
from benchmarks.results_files.folder_readme import readme_text
from benchmarks.results_files.manifest import write_manifest
from harness.errors import UserError
from harness.protocol import PROTOCOL_VERSIONS, protocol_version, settings_hash

DATA_DIGEST = "d" * 64
ENCODER = {
    "name": "elmo",
    "identity": "stage-1",
    "digest": "c" * 64,
    "family": "elmo",
    "num_layers": 3,
    "val_ppl": 120.0,
    "run_id": "pretrain-run",
}


def predictions(correct: list[bool]) -> pd.DataFrame:
    labels = ["1", "0"] * (len(correct) // 2)
    preds = [label if right else str(1 - int(label)) for label, right in zip(labels, correct)]
    return pd.DataFrame(
        {
            "id1": [str(100 + i) for i in range(len(correct))],
            "id2": [str(500 + i) for i in range(len(correct))],
            "label": labels,
            "prob": [0.9 if pred == "1" else 0.1 for pred in preds],
            "pred": preds,
            "sentence1": ["a sentence"] * len(correct),
            "sentence2": ["another"] * len(correct),
        }
    )


def write_cell(
    folder: Path,
    method: str,
    kind: str,
    seed: int,
    correct: list[bool],
    order: int,
    control: str = "",
    encoder: dict | None = ENCODER,
    protocol: str | None = None,
    encoder_name: str = "elmo",
) -> Path:
    frames = {"dev": predictions(correct[:10]), "test": predictions(correct)}
    spec = {
        "kind": kind,
        "seed": seed,
        "method": method,
        "encoder": encoder["identity"] if encoder else "",
        "mix": "scalar",
        "head": "pool-mlp",
        "train_fraction": 1.0,
        "args": [],
        "config": "",
        "config_text": "",
        "data": DATA_DIGEST,
    }
    protocol = protocol or protocol_version()
    cell_hash = settings_hash(spec, protocol)
    content = predictions_bytes(frames)
    (folder / CELLS_DIR / f"{cell_hash}{PREDICTIONS_SUFFIX}").write_bytes(content)
    metrics = {
        f"{split}_{name}": score(frame["label"], frame["pred"], **options)
        for split, frame in frames.items()
        for name, score, options in (("acc", accuracy_score, {}), ("f1", f1_score, {"pos_label": "1"}))
    }
    record = {
        "format": FORMAT,
        "cell_hash": cell_hash,
        "protocol": protocol,
        "commit": "abc",
        "spec": spec,
        "data_digest": DATA_DIGEST,
        "order": [0, order],
        "encoder": encoder,
        "cell": {
            "method": method,
            "kind": kind,
            "seed": seed,
            "encoder": encoder_name if encoder else "",
            "encoder_run": "pretrain-run",
            "mix": "scalar",
            "head": "pool-mlp",
            "train_fraction": 1.0,
            "control": control,
            "args": [],
            "config": "",
            "family": "elmo",
            "transfer": "",
            "encoder_identity": spec["encoder"],
            "probe_of": "",
            "grid_of": "",
            "learning_rate": None,
        },
        "metrics": metrics,
        "params": {"encoder_layers": "3", "dev_pairs": "10", "test_pairs": str(len(correct))},
        "tags": {"method": method},
        "run": {"run_id": f"run-{encoder_name}-{method}-{seed}", "parent_run_id": "parent"},
        "predictions": {
            "file": f"{cell_hash}{PREDICTIONS_SUFFIX}",
            "sha256": hashlib.sha256(content).hexdigest(),
            "rows": {"dev": len(frames["dev"]), "test": len(frames["test"])},
        },
    }
    path = folder / CELLS_DIR / f"{cell_hash}.json"
    write_json(path, record)
    return path


def make_folder(folder: Path, seeds: int = 3, twin_right: int = 26) -> Path:
    """A method better than its twin on 40 test pairs, over ``seeds`` seeds."""
    (folder / CELLS_DIR).mkdir(parents=True)
    write_json(
        folder / BENCHMARK_FILE,
        {
            "format": FORMAT,
            "benchmark": "tiny",
            "experiment": "mrpc",
            "dataset": "mrpc",
            "data_digest": DATA_DIGEST,
            "labels": ["0", "1"],
            "positive_label": "1",
            "settings": {"seeds": seeds},
        },
    )
    for seed in range(seeds):
        write_cell(
            folder,
            "elmo-scalar-pool-mlp",
            "pretrained",
            seed,
            [i % 10 != seed for i in range(40)],
            2 * seed,
            control="random-scalar-pool-mlp",
        )
        write_cell(
            folder, "random-scalar-pool-mlp", "random", seed, [i < twin_right + seed for i in range(40)], 2 * seed + 1
        )
    write_manifest(folder)
    return folder


def tiny_config(path: Path, seeds: str = "3", name: str = "tiny", comparisons: str = "[]") -> Path:
    """The matrix config that plans :func:`make_folder`'s cells (its majority baseline exempt)."""
    path.write_text(
        f"name: {name}\nencoders: [{{name: elmo, run: 'runs:/abc'}}]\nmixes: [scalar]\nheads: [pool-mlp]\n"
        f"seeds: {seeds}\nbaselines: [majority]\nlinear_probe: false\ncomparisons: {comparisons}\n"
    )
    return path


def test_a_folder_reads_back_in_plan_order_without_any_sentence(tmp_path):
    folder = make_folder(tmp_path / "a")
    benchmark, cells = read_folder(folder)
    assert benchmark["benchmark"] == "tiny" and len(cells) == 6
    assert [cell.record["cell"]["method"] for cell in cells[:2]] == ["elmo-scalar-pool-mlp", "random-scalar-pool-mlp"]
    assert "sentence1" not in cells[0].predictions["test"] and len(cells[0].predictions["test"]) == 40
    assert all(path.stat().st_size < 4000 for path in (folder / CELLS_DIR).iterdir())


def test_the_folder_readme_names_the_benchmark_protocol_cells_dates_and_machine(tmp_path):
    benchmark, cells = read_folder(make_folder(tmp_path / "tiny"))
    records = [cell.record for cell in cells]
    records[0]["run"].update(start_time=1796288265050, host="node-a")
    records[-1]["run"].update(end_time=1796288526687, host="node-b")
    text = readme_text(benchmark, records)
    assert text.startswith("# tiny\n") and "`python -m benchmarks export --benchmark tiny --out <this folder>`" in text
    for line in (
        f"- **protocol**: `{protocol_version()}` (6)",
        "- **cells**: 6, 2 methods × seeds 0, 1, 2",
        "- **dates**: 2026-12-03 08:57 UTC to 2026-12-03 09:02 UTC (the cells' runs)",
        "- **machine**: `node-a` (1), `node-b` (1); code `abc` (6)",
    ):
        assert line in text.splitlines(), line
    assert "python -m benchmarks report <this folder> --out <report folder>" in text


def test_the_same_predictions_are_the_same_bytes():
    frames = {"dev": predictions([True] * 10), "test": predictions([True, False] * 20)}
    assert predictions_bytes(frames) == predictions_bytes({split: frame.copy() for split, frame in frames.items()})


def test_a_report_from_the_folder_alone_compares_the_method_with_its_twin(tmp_path):
    folder = make_folder(tmp_path / "a")
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    results = pd.read_csv(tmp_path / "report" / "results.csv").set_index("method")
    assert results.loc["elmo-scalar-pool-mlp", "n_seeds"] == 3
    assert results.loc["elmo-scalar-pool-mlp", "test_acc_mean"] == pytest.approx(0.9)
    twin_accuracies = [(26 + seed) / 40 for seed in range(3)]
    assert results.loc["elmo-scalar-pool-mlp", "gap_vs_random"] == pytest.approx(0.9 - sum(twin_accuracies) / 3)
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.startswith("# Benchmark report: tiny")
    assert "- built from results folders:" in report and "wall time" not in report  # a folder records none


def test_folders_merge_by_cell_hash(tmp_path):
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b")
    merged = ResultSet([first, second])
    assert len(merged.cells) == 6 and len(merged.benchmarks) == 2


def edit_record(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def first_cell(folder: Path) -> Path:
    return sorted((folder / CELLS_DIR).glob("*.json"))[0]


def truncate(folder):
    path = first_cell(folder)
    path.write_text(path.read_text()[:200])
    return path.name, "unreadable, truncated or edited"


def edit_accuracy(folder):
    path = first_cell(folder)
    edit_record(path, lambda record: record["metrics"].update(test_acc=0.99))
    return path.name, "is not its predictions'"


def edit_settings(folder):
    path = first_cell(folder)
    edit_record(path, lambda record: record["spec"].update(seed=7))
    return path.name, "do not give its cell hash"


def drop_predictions(folder):
    path = first_cell(folder)
    (folder / CELLS_DIR / json.loads(path.read_text())["predictions"]["file"]).unlink()
    return path.name, "is missing"


def edit_predictions(folder):
    path = first_cell(folder)
    predictions_file = folder / CELLS_DIR / json.loads(path.read_text())["predictions"]["file"]
    predictions_file.write_bytes(predictions_file.read_bytes()[:-20])
    return predictions_file.name, "sha256 differs"


def future_protocol(folder):
    newer = protocol_version({**PROTOCOL_VERSIONS, "heads": PROTOCOL_VERSIONS["heads"] + 1})
    path = write_cell(
        folder,
        "elmo-scalar-pool-mlp",
        "pretrained",
        9,
        [True] * 40,
        99,
        control="random-scalar-pool-mlp",
        protocol=newer,
    )
    return path.name, "newer than this harness's in heads"


def another_data_set(folder):
    path = first_cell(folder)
    edit_record(path, lambda record: record.update(data_digest="e" * 64))
    return path.name, "another data set"


def no_benchmark_file(folder):
    (folder / BENCHMARK_FILE).unlink()
    return folder.name, "not a results folder"


@pytest.mark.parametrize(
    "spoil",
    [
        truncate,
        edit_accuracy,
        edit_settings,
        drop_predictions,
        edit_predictions,
        future_protocol,
        another_data_set,
        no_benchmark_file,
    ],
)
def test_a_bad_folder_is_one_line_naming_the_file_and_nothing_is_imported(tmp_path, spoil, capsys, monkeypatch):
    folder = make_folder(tmp_path / "a")
    name, fragment = spoil(folder)
    with pytest.raises(UserError) as error:
        ResultSet([folder])
    assert name in str(error.value) and fragment in str(error.value) and "\n" not in str(error.value)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["import", str(folder)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    from tests.helpers import all_runs

    assert all_runs(tmp_path) == []  # nothing imported half-way


def test_a_conflict_between_folders_is_named_never_averaged(tmp_path):
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b")
    write_cell(
        second,
        "elmo-scalar-pool-mlp",
        "pretrained",
        0,
        [i % 10 != 1 for i in range(40)],
        0,
        control="random-scalar-pool-mlp",
    )  # the same cell, under the same checkpoint, other predictions
    write_manifest(second)
    with pytest.raises(UserError, match="has other numbers"):
        ResultSet([first, second])
    third = make_folder(tmp_path / "c", seeds=0)  # the same cell from another checkpoint, other predictions, the same
    write_cell(
        third,
        "elmo-scalar-pool-mlp",
        "pretrained",
        0,
        [i % 10 != 2 for i in range(40)],
        0,  # scores
        control="random-scalar-pool-mlp",
        encoder={**ENCODER, "digest": "f" * 64},
    )
    write_manifest(third)
    with pytest.raises(UserError, match="names another checkpoint"):
        ResultSet([first, third])


def test_a_cell_two_chunks_ran_from_copies_of_one_stage_is_reported_once_and_named(tmp_path):
    """Two chunks that each pretrained the same stage share cells (the full-label probe); their
    checkpoint files differ (saved under another code version) but the predictions are the same."""
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b")
    for path in (second / CELLS_DIR).glob("*.json"):
        edit_record(path, lambda record: record["encoder"].update(digest="f" * 64))
    write_manifest(second)
    merged = ResultSet([first, second])
    assert len(merged.ordered) == 6 and {cell.folder.name for cell in merged.ordered} == {"a"}
    (note,) = merged.notes
    assert note.startswith("6 cell(s) of a ran again in b") and "very same predictions" in note


def test_a_cell_two_chunks_ran_from_two_pretrainings_of_one_stage_is_reported_once_with_both_scores(tmp_path):
    """CPU pretraining is not always bit-reproducible: two chunks' copies of one stage may differ, and
    so may the cells they share. Reported once, from the first folder, the other score named."""
    first, second = make_folder(tmp_path / "a"), make_folder(tmp_path / "b")
    other_predictions = [i % 10 != 1 for i in range(40)]
    write_cell(second, "elmo-scalar-pool-mlp", "pretrained", 0, other_predictions, 0, control="random-scalar-pool-mlp")
    write_manifest(second)
    with pytest.raises(UserError, match="has other numbers"):  # one checkpoint, other numbers: a conflict
        ResultSet([first, second])
    write_cell(
        second,
        "elmo-scalar-pool-mlp",
        "pretrained",
        0,
        other_predictions,
        0,
        control="random-scalar-pool-mlp",
        encoder={**ENCODER, "digest": "f" * 64},
    )
    write_manifest(second)
    merged = ResultSet([first, second])
    assert len(merged.ordered) == 6 and {cell.folder.name for cell in merged.ordered} == {"a"}
    assert any(
        "ran again in b from another pretraining of the same stage (checkpoint ffffffffffff" in note
        for note in merged.notes
    )
    for seed, right in ((2, 20), (0, 32)):  # two seeds scored apart: named per seed, in seed order
        write_cell(
            second,
            "elmo-scalar-pool-mlp",
            "pretrained",
            seed,
            [i < right for i in range(40)],
            2 * seed,
            control="random-scalar-pool-mlp",
            encoder={**ENCODER, "digest": "f" * 64},
        )
    write_manifest(second)
    (note,) = [note for note in ResultSet([first, second]).notes if note.startswith("elmo-scalar-pool-mlp")]
    assert "(seed 0, 2)" in note and "scored 80.0%, 50.0% test accuracy, not 90.0%;" in note


def test_two_checkpoints_under_one_method_stop_the_merge_and_under_one_name_are_named(tmp_path):
    folder = make_folder(tmp_path / "a", seeds=1)
    other = {**ENCODER, "digest": "b" * 64, "identity": "stage-2"}
    write_cell(
        folder, "elmo-scalar-pool-mlp", "pretrained", 5, [True] * 40, 9, control="random-scalar-pool-mlp", encoder=other
    )
    write_manifest(folder)
    with pytest.raises(UserError, match="encoder 'elmo'.* is two checkpoints"):
        ResultSet([folder])
    chunks = make_folder(tmp_path / "b", seeds=1)
    write_cell(
        chunks, "elmo-gradual-attn", "pretrained", 0, [True] * 40, 9, control="random-gradual-attn", encoder=other
    )
    write_manifest(chunks)
    (note,) = ResultSet([chunks]).notes
    assert note.startswith("encoder 'elmo' is 2 checkpoints") and "bbbbbbbbbbbb" in note


def test_the_twins_of_two_encoders_from_their_own_chunks_stay_two_methods_in_the_report(tmp_path):
    """Each chunk pretrains one encoder and names its twin ``random-…``; merged for the report, the
    twins are named by their encoder, as one plan over both encoders names them, never pooled."""
    elmo, gpt = make_folder(tmp_path / "elmo"), make_folder(tmp_path / "gpt", seeds=0)
    other = {**ENCODER, "name": "gpt", "identity": "stage-2", "digest": "b" * 64, "family": "gpt"}
    for seed in range(3):
        write_cell(
            gpt,
            "gpt-scalar-pool-mlp",
            "pretrained",
            seed,
            [i % 5 != seed for i in range(40)],
            2 * seed,
            control="random-scalar-pool-mlp",
            encoder=other,
            encoder_name="gpt",
        )
        write_cell(
            gpt,
            "random-scalar-pool-mlp",
            "random",
            seed,
            [i < 20 + seed for i in range(40)],
            2 * seed + 1,
            encoder=other,
            encoder_name="gpt",
        )
    write_manifest(gpt)
    with pytest.raises(UserError, match="'random-scalar-pool-mlp' .* is two checkpoints"):
        ResultSet([elmo, gpt])  # the files' own names: one twin method over two encoders
    merged = ResultSet([elmo, gpt], name_twins_by_encoder=True)
    assert {cell.record["cell"]["method"] for cell in merged.ordered} == {
        "elmo-scalar-pool-mlp",
        "random(elmo)-scalar-pool-mlp",
        "gpt-scalar-pool-mlp",
        "random(gpt)-scalar-pool-mlp",
    }
    assert read_folder(gpt)[1][1].record["cell"]["method"] == "random-scalar-pool-mlp"  # the files stay as written
    assert main(["report", str(elmo), str(gpt), "--out", str(tmp_path / "report")]) == 0
    results = pd.read_csv(tmp_path / "report" / "results.csv").set_index("method")
    assert results.loc["gpt-scalar-pool-mlp", "gap_vs_random"] == pytest.approx(0.8 - 21 / 40)
    assert results.loc["elmo-scalar-pool-mlp", "gap_vs_random"] == pytest.approx(0.9 - 27 / 40)
    assert results.loc["random(gpt)-scalar-pool-mlp", "n_seeds"] == 3


def test_mixed_protocol_versions_within_one_comparison_are_named(tmp_path):
    folder = make_folder(tmp_path / "a", seeds=1)
    older = protocol_version({**PROTOCOL_VERSIONS, "heads": 0})
    write_cell(folder, "random-scalar-pool-mlp", "random", 4, [True] * 40, 9, protocol=older)
    write_manifest(folder)
    with pytest.raises(UserError, match="mixes protocol versions"):
        ResultSet([folder])


def test_a_folder_of_another_data_set_is_refused_by_a_suite(tmp_path):
    folder = make_folder(tmp_path / "a", seeds=1)
    with pytest.raises(UserError, match="another data set"):
        ResultSet([folder], data_digest="e" * 64)
    shutil.rmtree(folder)


def test_the_report_adjusts_over_the_folders_and_the_declared_chunks_registered_comparisons(tmp_path):
    folder = make_folder(tmp_path / "a")
    benchmark = json.loads((folder / BENCHMARK_FILE).read_text())
    benchmark["settings"]["comparisons"] = ["elmo-scalar-pool-mlp"]
    write_json(folder / BENCHMARK_FILE, benchmark)
    write_manifest(folder)
    chunk = tmp_path / "chunk.yaml"  # a chunk not run yet, registered before it runs
    chunk.write_text("encoders: [{name: gpt-reuters, run: 'runs:/abc'}]\ncomparisons: [gpt-reuters-full-cls]\n")
    assert main(["report", str(folder), "--out", str(tmp_path / "alone")]) == 0
    own = tiny_config(tmp_path / "tiny.yaml", comparisons="[elmo-scalar-pool-mlp]")
    assert main(["report", str(folder), "--out", str(tmp_path / "study"), "--registered", str(own), str(chunk)]) == 0
    alone = pd.read_csv(tmp_path / "alone" / "results.csv").set_index("method")
    study = pd.read_csv(tmp_path / "study" / "results.csv").set_index("method")
    p = alone.loc["elmo-scalar-pool-mlp", "p_value_vs_random"]
    assert alone.loc["elmo-scalar-pool-mlp", "p_adjusted"] == pytest.approx(p)  # a family of one
    assert study.loc["elmo-scalar-pool-mlp", "p_adjusted"] == pytest.approx(min(1.0, 2 * p))  # the unrun one: p = 1
    assert bool(study.loc["elmo-scalar-pool-mlp", "preregistered"])
    assert "`gpt-reuters-full-cls`" in (tmp_path / "study" / "report.md").read_text()

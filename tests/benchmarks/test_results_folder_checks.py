"""A results folder as a hostile user edits it: every field that decides or labels a number is
derived from the settings and predictions or bound by the manifest, predictions stay inside the
folder and are read within the data set's bounds, and every wrong type is one line naming the file
and the field; nothing is reported or imported."""

import gzip
import hashlib
import json
import shutil
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score

from benchmarks.__main__ import main
from benchmarks.results_files.folder import BENCHMARK_FILE, CELLS_DIR, MANIFEST_FILE, ResultSet, read_folder
from benchmarks.results_files.manifest import write_manifest
from benchmarks.results_files.task_predictions import ClassPredictions
from harness.errors import UserError
from tests.benchmarks.test_results_files import edit_record, make_folder

RESULTS = Path(__file__).resolve().parents[2] / "results"


def cells_by_arm(folder: Path) -> dict[tuple[str, int], Path]:
    """Each cell file of the folder by (kind, seed) (the tiny folder: one method and its twin)."""
    records = {path: json.loads(path.read_text()) for path in (folder / CELLS_DIR).glob("*.json")}
    return {(record["cell"]["kind"], record["cell"]["seed"]): path for path, record in records.items()}


def edit_manifest(folder: Path, change) -> None:
    edit_record(folder / MANIFEST_FILE, change)


def swap_arms(folder):
    """The pretrained arm and its twin trade method, kind and control: the gap flips sign."""
    pretrained, twin = cells_by_arm(folder)[("pretrained", 0)], cells_by_arm(folder)[("random", 0)]
    fields = ("method", "kind", "control")
    first, second = (json.loads(path.read_text())["cell"] for path in (pretrained, twin))
    edit_record(pretrained, lambda record: record["cell"].update({key: second[key] for key in fields}))
    edit_record(twin, lambda record: record["cell"].update({key: first[key] for key in fields}))
    return "cell.method"


def edit_seed(folder):
    edit_record(cells_by_arm(folder)[("random", 2)], lambda record: record["cell"].update(seed=1))
    return "cell.seed"


def edit_fraction(folder):
    edit_record(cells_by_arm(folder)[("random", 1)], lambda record: record["cell"].update(train_fraction=0.1))
    return "cell.train_fraction"


def edit_control(folder):
    edit_record(cells_by_arm(folder)[("pretrained", 1)], lambda record: record["cell"].update(control="random-other"))
    return "cell.control"


def edit_test_f1(folder):
    edit_record(cells_by_arm(folder)[("pretrained", 0)], lambda record: record["metrics"].update(test_f1=0.99))
    return "test_f1"


def edit_encoder_block(folder):
    edit_record(cells_by_arm(folder)[("pretrained", 0)], lambda record: record["encoder"].update(val_ppl=12.3))
    return "encoder"


def edit_settings(folder):
    edit_record(folder / BENCHMARK_FILE, lambda record: record["settings"].update(seeds=5))
    return "settings"


def edit_positive_label(folder):
    edit_record(folder / BENCHMARK_FILE, lambda record: record.update(positive_label="0"))
    return "positive_label"


def swap_predictions(folder):
    """Two cells trade their predictions files, with the sha256 and the metrics their records hold."""
    first, second = cells_by_arm(folder)[("pretrained", 0)], cells_by_arm(folder)[("random", 0)]
    records = [json.loads(path.read_text()) for path in (first, second)]
    files = [folder / CELLS_DIR / record["predictions"]["file"] for record in records]
    contents = [path.read_bytes() for path in files]
    for path, record, other, content in zip((first, second), records, reversed(records), reversed(contents)):
        (folder / CELLS_DIR / record["predictions"]["file"]).write_bytes(content)
        edit_record(
            path,
            lambda changed, other=other: (
                changed["predictions"].update(sha256=other["predictions"]["sha256"]),
                changed["metrics"].update(other["metrics"]),
            ),
        )
    return "predictions.sha256"


def drop_a_cell(folder):
    path = cells_by_arm(folder)[("random", 1)]
    (folder / CELLS_DIR / json.loads(path.read_text())["predictions"]["file"]).unlink()
    path.unlink()
    return "missing"


def escaping_name(name: str):
    def spoil(folder):
        edit_record(cells_by_arm(folder)[("random", 0)], lambda record: record["predictions"].update(file=name))
        return "predictions.file"

    spoil.__name__ = f"predictions_named_{name}"
    return spoil


def link_out(folder):
    """The predictions file a link to a file outside the folder, with the very same bytes."""
    record = json.loads(cells_by_arm(folder)[("random", 0)].read_text())
    inside = folder / CELLS_DIR / record["predictions"]["file"]
    outside = folder.parent / "elsewhere.csv.gz"
    outside.write_bytes(inside.read_bytes())
    inside.unlink()
    inside.symlink_to(outside)
    return "a link"


def text_format(folder):
    edit_record(folder / BENCHMARK_FILE, lambda record: record.update(format="1"))
    return "format is str, not an integer"


def null_order(folder):
    edit_record(cells_by_arm(folder)[("random", 0)], lambda record: record.update(order=None))
    return "order is null, not a list"


def list_for_object(folder):
    edit_record(cells_by_arm(folder)[("random", 0)], lambda record: record.update(metrics=[0.5]))
    return "metrics is list, not an object"


def text_seed(folder):
    edit_record(cells_by_arm(folder)[("random", 0)], lambda record: record["spec"].update(seed="0"))
    return "spec.seed is str, not an integer"


def number_precision(folder):
    edit_record(cells_by_arm(folder)[("random", 0)], lambda record: record.update(precision=16))
    return "precision is int, not text or null"


def deep_nesting(folder):
    path = cells_by_arm(folder)[("random", 0)]
    text = path.read_text()
    path.write_text(text.replace('"encoder": {', '"encoder": ' + "[" * 100_000 + "]" * 100_000 + ', "x": {', 1))
    return "RecursionError"


def text_comparisons(folder):
    """A type a forger might also put in the manifest: still one line."""
    edit_record(folder / BENCHMARK_FILE, lambda record: record["settings"].update(comparisons=5))
    return "settings.comparisons is int, not a list or null"


def manifest_lacks_a_field(folder):
    edit_manifest(folder, lambda manifest: manifest["benchmark"].pop("labels"))
    return "labels"


@pytest.mark.parametrize(
    "spoil",
    [
        swap_arms,
        edit_seed,
        edit_fraction,
        edit_control,
        edit_test_f1,
        edit_encoder_block,
        edit_settings,
        edit_positive_label,
        swap_predictions,
        drop_a_cell,
        escaping_name("../../x"),
        escaping_name("/etc/hostname"),
        escaping_name("../cells/x.predictions.csv.gz"),
        link_out,
        text_format,
        null_order,
        list_for_object,
        text_seed,
        number_precision,
        deep_nesting,
        text_comparisons,
        manifest_lacks_a_field,
    ],
    ids=lambda spoil: spoil.__name__,
)
def test_an_edited_folder_is_one_line_naming_the_file_and_the_field_and_nothing_is_reported(tmp_path, spoil, capsys):
    folder = make_folder(tmp_path / "a")
    field = spoil(folder)
    with pytest.raises(UserError) as error:
        ResultSet([folder])
    message = str(error.value)
    assert field in message and str(folder) in message and "\n" not in message
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "report").exists()


def test_the_arms_of_a_committed_folder_swapped_no_longer_flip_its_gap(tmp_path, capsys):
    """The published frozen-heads result: a method and its twin trading method, kind and control
    turned a gap of +6.4 points into −6.4 with exit code 0."""
    folder = tmp_path / "frozen-heads"
    shutil.copytree(RESULTS / "frozen-heads", folder)
    records = {path: json.loads(path.read_text()) for path in (folder / CELLS_DIR).glob("*.json")}
    pretrained = next(path for path, record in records.items() if record["cell"]["kind"] == "pretrained")
    twin = next(
        path
        for path, record in records.items()
        if record["cell"]["method"] == records[pretrained]["cell"]["control"]
        and record["cell"]["seed"] == records[pretrained]["cell"]["seed"]
    )
    for path, other in ((pretrained, twin), (twin, pretrained)):
        edit_record(
            path,
            lambda record, other=other: record["cell"].update(
                {key: records[other]["cell"][key] for key in ("method", "kind", "control")}
            ),
        )
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cell.method" in err and "edited by hand" in err


def test_a_cell_may_name_where_its_data_lay_beside_its_settings_but_no_other_flag(tmp_path):
    """A cell's args keep the flags that locate data on the machine that ran it; its settings (its
    hash) drop them (``benchmarks.cell.definition.portable_args``)."""
    folder = make_folder(tmp_path / "a")
    path = cells_by_arm(folder)[("random", 0)]
    edit_record(path, lambda record: record["cell"].update(args=["--data.mrpc_dir=/data/mrpc"]))
    write_manifest(folder)
    assert len(ResultSet([folder]).ordered) == 6
    edit_record(path, lambda record: record["cell"].update(args=["--data.mrpc_dir=/data/mrpc", "--model.head=attn"]))
    write_manifest(folder)
    with pytest.raises(UserError, match=r"cell.args \["):
        ResultSet([folder])


def bomb(members: int) -> bytes:
    """A gzip of well-formed prediction rows, 17 MB in each of ``members`` repeated members."""
    member = gzip.compress(b"test,1,2,1,0.5,1\n" * 1_000_000, mtime=0)
    return gzip.compress(b"split,id1,id2,label,prob,pred\n", mtime=0) + member * members


@pytest.mark.parametrize(
    "members, refusal",
    [(24, "decompresses to more than the"), (51, "more than predictions of this data set can take")],
    ids=["1MB-to-400MB", "2MB-to-900MB"],
)
def test_a_gzip_bomb_with_a_matching_sha256_is_refused_in_seconds_within_a_few_mb(tmp_path, members, refusal):
    """The predictions' bound comes from MRPC's split sizes (408 + 1725 pairs), not from the file or
    its cell, whose sha256 the cell and the manifest were made to record."""
    folder = tmp_path / "device-check"
    shutil.copytree(RESULTS / "device-check" / "elmo-frozen-h200", folder)
    cell = sorted((folder / CELLS_DIR).glob("*.json"))[0]
    record = json.loads(cell.read_text())
    content = bomb(members)
    (folder / CELLS_DIR / record["predictions"]["file"]).write_bytes(content)
    sha256 = hashlib.sha256(content).hexdigest()
    edit_record(cell, lambda changed: changed["predictions"].update(sha256=sha256))
    edit_manifest(folder, lambda manifest: manifest["cells"][record["cell_hash"]].update(predictions=sha256))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(UserError, match=refusal):
            read_folder(folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 20 and peak < 50_000_000


def test_more_rows_than_the_data_set_has_are_refused_whatever_the_folder_claims(tmp_path):
    folder = tmp_path / "device-check"
    shutil.copytree(RESULTS / "device-check" / "elmo-frozen-h200", folder)
    cell = sorted((folder / CELLS_DIR).glob("*.json"))[0]
    record = json.loads(cell.read_text())
    path = folder / CELLS_DIR / record["predictions"]["file"]
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    test_rows = [line for line in lines if line.startswith(b"test,")]
    content = gzip.compress(b"".join([*lines, *test_rows]), mtime=0)  # 3450 test rows: MRPC's test split has 1725
    path.write_bytes(content)
    sha256 = hashlib.sha256(content).hexdigest()
    edit_record(
        cell,
        lambda changed: (
            changed["predictions"].update(sha256=sha256),
            changed["predictions"]["rows"].update(test=2 * len(test_rows)),
        ),
    )
    edit_manifest(folder, lambda manifest: manifest["cells"][record["cell_hash"]].update(predictions=sha256))
    with pytest.raises(UserError, match=r"3450 test rows, more than the data set's 1725"):
        read_folder(folder)


def unseal(folder: Path) -> None:
    """The folder as written before manifests (format 1)."""
    (folder / MANIFEST_FILE).unlink()
    edit_record(folder / BENCHMARK_FILE, lambda record: record.update(format=1))


def test_a_folder_written_before_manifests_is_refused_until_sealed_and_seals_to_the_same_bytes(tmp_path, capsys):
    folder = tmp_path / "device-check"
    shutil.copytree(RESULTS / "device-check" / "elmo-frozen-h200", folder)
    committed = json.loads((folder / MANIFEST_FILE).read_text())
    unseal(folder)
    with pytest.raises(UserError, match="format 1, written before folders had a manifest.json; check and seal"):
        ResultSet([folder])
    assert main(["seal", str(folder)]) == 0
    sealed = {path.name: path.read_bytes() for path in (folder / MANIFEST_FILE, folder / BENCHMARK_FILE)}
    manifest = json.loads(sealed[MANIFEST_FILE])
    assert {key: manifest[key] for key in ("benchmark", "cells")} == {
        key: committed[key] for key in ("benchmark", "cells")
    }
    unseal(folder)
    assert main(["seal", str(folder)]) == 0
    assert {path.name: path.read_bytes() for path in (folder / MANIFEST_FILE, folder / BENCHMARK_FILE)} == sealed
    assert len(ResultSet([folder]).ordered) == 11
    capsys.readouterr()
    assert main(["seal", str(folder)]) == 2  # sealed already: a seal never blesses later edits
    assert "sealed already" in capsys.readouterr().err


def test_sealing_checks_the_folder_first_and_writes_nothing_when_a_check_fails(tmp_path, capsys):
    folder = make_folder(tmp_path / "a")
    unseal(folder)
    edit_record(cells_by_arm(folder)[("random", 2)], lambda record: record["cell"].update(seed=1))
    assert main(["seal", str(folder)]) == 2
    assert "cell.seed" in capsys.readouterr().err and not (folder / MANIFEST_FILE).exists()
    assert json.loads((folder / BENCHMARK_FILE).read_text())["format"] == 1


@pytest.mark.parametrize("labels", [["0", "1"], ["a", "b", "c", "d"]], ids=["binary", "macro"])
def test_the_recomputed_metrics_are_sklearns(labels):
    """The checks count instead of calling sklearn (seconds over a folder); the numbers are the same."""
    generator = np.random.default_rng(0)
    for size in (1, 7, 400):
        frame = pd.DataFrame({"label": generator.choice(labels, size), "pred": generator.choice(labels[:-1], size)})
        binary = {"average": "binary", "pos_label": labels[-1]} if len(labels) == 2 else {"average": "macro"}
        expected = {
            "test_acc": accuracy_score(frame["label"], frame["pred"]),
            "test_f1": f1_score(frame["label"], frame["pred"], zero_division=0, **binary),
        }
        positive = labels[-1] if len(labels) == 2 else None
        assert ClassPredictions(labels, positive).metrics(frame, "test") == pytest.approx(expected, abs=1e-12)

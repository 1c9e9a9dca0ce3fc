"""Values a hostile user puts in a results folder, each one line and never a traceback: an
integer too large for any result, arms that disagree on a pair's gold label (at ``seal`` and when
read), a method name with an invisible or look-alike character, and MRPC content that is not the
MSR release mixed with release cells."""

import gzip
import hashlib
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score

import tests.benchmarks.test_results_files as tiny
from benchmarks.__main__ import main
from benchmarks.results_files.folder import BENCHMARK_FILE, CELLS_DIR, MANIFEST_FILE, ResultSet, read_folder
from benchmarks.results_files.manifest import digest, write_manifest
from harness.datasets.mrpc import CONTENT_HASH
from harness.errors import UserError
from tests.benchmarks.test_results_across_folders import cell_path, forge
from tests.benchmarks.test_results_files import edit_record, make_folder
from tests.benchmarks.test_results_folder_checks import unseal


def test_a_5000_digit_integer_in_a_cell_is_one_line(tmp_path):
    folder = make_folder(tmp_path / "a")
    path = cell_path(folder, "random", 1)
    path.write_text(path.read_text().replace('"order": [', '"order": [' + "7" * 5000 + ", ", 1))
    with pytest.raises(UserError, match=r"unreadable, truncated or edited \(ValueError: Exceeds the limit"):
        read_folder(folder)


def test_an_integer_no_result_can_hold_is_one_line_even_sealed(tmp_path):
    folder = make_folder(tmp_path / "a")
    path = cell_path(folder, "random", 1)
    edit_record(path, lambda record: record["metrics"].update(test_acc=10**400))
    record = json.loads(path.read_text())
    edit_record(  # a forger binds it in the manifest too
        folder / MANIFEST_FILE,
        lambda manifest: manifest["cells"][record["cell_hash"]].update(metrics=digest(record["metrics"])),
    )
    with pytest.raises(UserError, match=r"metrics.test_acc is an integer of 1329 bits"):
        read_folder(folder)


def flip_gold_label(path: Path) -> None:
    """The cell's first test pair labelled the other way, its metrics and digests made consistent."""
    record = json.loads(path.read_text())
    predictions = path.parent / record["predictions"]["file"]
    frame = pd.read_csv(io.BytesIO(gzip.decompress(predictions.read_bytes())), dtype=str, keep_default_na=False)
    first = frame.index[frame["split"] == "test"][0]
    frame.loc[first, "label"] = "0" if frame.loc[first, "label"] == "1" else "1"
    content = gzip.compress(frame.to_csv(index=False).encode(), mtime=0)
    predictions.write_bytes(content)
    test = frame[frame["split"] == "test"]
    record["metrics"].update(
        test_acc=accuracy_score(test["label"], test["pred"]),
        test_f1=f1_score(test["label"], test["pred"], pos_label="1"),
    )
    record["predictions"]["sha256"] = hashlib.sha256(content).hexdigest()
    path.write_text(json.dumps(record))


def test_arms_that_disagree_on_a_gold_label_are_refused_when_read_and_at_seal(tmp_path, capsys):
    folder = make_folder(tmp_path / "a")
    flip_gold_label(cell_path(folder, "random", 0))
    write_manifest(folder)
    with pytest.raises(UserError, match=r"test pair '100 500' is labelled '0' in one and '1' in the other"):
        ResultSet([folder])
    unseal(folder)
    assert main(["seal", str(folder)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "disagree on the gold labels" in line
    assert not (folder / MANIFEST_FILE).exists() and json.loads((folder / BENCHMARK_FILE).read_text())["format"] == 1


@pytest.mark.parametrize(
    ("name", "shown"),
    [("random-scalar\u200b-pool-mlp", "U+200B"), ("random-scalar-pool-m\uff4cp", "not NFKC-normal")],
    ids=["zero-width-space", "fullwidth-letter"],
)
def test_a_method_name_with_hidden_or_look_alike_characters_is_refused(tmp_path, name, shown):
    folder = make_folder(tmp_path / "a", seeds=1)
    path = cell_path(folder, "random", 0)  # the twin: no control names it
    edit_record(path, lambda record: [record[part].update(method=name) for part in ("spec", "cell")])
    forge(path)  # its hash made consistent with the new name
    write_manifest(folder)
    with pytest.raises(UserError, match=f"cell.method .* holds .*{re.escape(shown)}"):
        ResultSet([folder])


def test_mrpc_content_other_than_the_release_is_never_mixed_with_release_cells(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tiny, "DATA_DIGEST", CONTENT_HASH)
    release = make_folder(tmp_path / "release")
    monkeypatch.undo()
    edited = make_folder(tmp_path / "edited")  # another digest under the name mrpc: a flipped label, say
    with pytest.raises(UserError, match="not the known mrpc release: own or edited files"):
        ResultSet([release, edited])
    assert main(["report", str(edited), "--out", str(tmp_path / "report")]) == 0
    assert (
        "is not the known release's: own or edited files (MRPC_DIR?)" in (tmp_path / "report" / "report.md").read_text()
    )
    assert len(list((release / CELLS_DIR).glob("*.json"))) == 6

"""MRPC files that are not the MSR release (one flipped label is enough) still load, as your own
MRPC-format files do, but say so in one line and record ``data_release=own`` on every run, so
that a study can keep them apart from the release's cells; the release itself records
``data_release=release`` and says nothing."""

import shutil

from harness.datasets import mrpc
from harness.datasets.registry import RELEASE_PARAM, dataset_params, load_pair_data


def flipped_copy(source, folder, line: int = 1):
    """The MSR files with the label of data line ``line`` of the train file flipped."""
    folder.mkdir()
    for name in (mrpc.TRAIN_FILE, mrpc.TEST_FILE):
        shutil.copy(source / name, folder / name)
    path = folder / mrpc.TRAIN_FILE
    lines = path.read_bytes().split(b"\n")
    lines[line] = (b"0" if lines[line][:1] == b"1" else b"1") + lines[line][1:]
    path.write_bytes(b"\n".join(lines))
    return folder


def test_the_release_records_release_and_says_nothing(real_mrpc_dir, capsys):
    data = load_pair_data(dataset="mrpc", mrpc_dir=str(real_mrpc_dir))
    assert dataset_params(data)[RELEASE_PARAM] == "release"
    assert "not the MSR release" not in capsys.readouterr().err


def test_one_flipped_label_is_said_in_one_line_and_recorded_on_the_run(real_mrpc_dir, tmp_path, capsys, monkeypatch):
    folder = flipped_copy(real_mrpc_dir, tmp_path / "mrpc")
    monkeypatch.setenv("MRPC_DIR", str(folder))
    data = load_pair_data(dataset="mrpc")
    assert len(data.train) + len(data.dev) == 4076  # own MRPC-format files keep working
    assert dataset_params(data)[RELEASE_PARAM] == "own"
    lines = [line for line in capsys.readouterr().err.splitlines() if "MSR release" in line]
    assert lines == [
        f"note: {folder}: msr_paraphrase_train.txt is not the MSR release's (4076 pairs, 2752 positive; the "
        "release: 4076, 2753; sha256 differs); read as your own MRPC-format files, its runs record "
        "data_release=own and a study does not pool them with the release's"
    ]
    load_pair_data(dataset="mrpc")
    assert "MSR release" not in capsys.readouterr().err  # said once

"""``harness.atomic``: files and folders written whole or not at all, without importing torch."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.atomic import atomic_folder, atomic_write, move_into_place

REPO = Path(__file__).resolve().parents[2]


class WriterFailed(Exception):
    pass


def half_then_fail(temporary: Path) -> None:
    temporary.write_text("half of the new")
    raise WriterFailed


def test_a_writer_that_raises_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = atomic_write(tmp_path / "table.csv", lambda temporary: temporary.write_text("old"))
    with pytest.raises(WriterFailed):
        atomic_write(path, half_then_fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_writer_that_raises_leaves_no_file_where_there_was_none(tmp_path):
    with pytest.raises(WriterFailed):
        atomic_write(tmp_path / "table.csv", half_then_fail)
    assert list(tmp_path.iterdir()) == []


def fill(content: str):
    def write(folder: Path) -> None:
        (folder / "part").mkdir()
        (folder / "part" / "file.txt").write_text(content)

    return write


def test_a_folder_writer_that_raises_leaves_the_previous_folder_and_no_temporary(tmp_path):
    out = atomic_folder(tmp_path / "out", fill("old"))
    with pytest.raises(WriterFailed):
        atomic_folder(out, lambda folder: (fill("new")(folder), half_then_fail(folder / "more")))
    assert (out / "part" / "file.txt").read_text() == "old" and [p.name for p in out.iterdir()] == ["part"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_finished_folder_replaces_the_previous_one_whole(tmp_path):
    out = atomic_folder(tmp_path / "nested" / "out", fill("old"))
    (out / "only-in-old").write_text("")
    atomic_folder(out, fill("new"))
    assert sorted(p.name for p in out.iterdir()) == ["part"] and (out / "part" / "file.txt").read_text() == "new"
    assert [p.name for p in out.parent.iterdir()] == ["out"]  # no .out.tmp-<pid>, no .out.stale-<pid>


def test_a_finished_file_moves_into_place_within_its_folder(tmp_path):
    finished = tmp_path / "scratch" / "download.bin"
    finished.parent.mkdir()
    finished.write_bytes(b"whole")
    (tmp_path / "target.bin").write_bytes(b"old")
    assert move_into_place(finished, tmp_path / "target.bin").read_bytes() == b"whole"
    assert not finished.exists()


def test_the_helper_imports_no_torch():
    probe = "import sys, harness.atomic; print('torch' in sys.modules)"
    process = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.stdout.strip() == "False", process.stderr[-2000:]

"""Checkpoints written whole or not at all, and a checkpoint folder checked before a run."""

import errno
import os

import pytest
import torch

from harness.atomic import atomic_torch_save
from harness.errors import UserError
from harness.training.checkpoints import AtomicCheckpointIO, check_checkpoint_room, with_atomic_checkpoints


def full_disk_after(limit: int):
    """An ``open`` whose files take ``limit`` bytes, then fail as a full disk does."""
    original = open

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            self.handle.write(bytes(data)[:limit])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __enter__(self):
            return self

        def __exit__(self, *args):
            self.handle.close()

    return lambda path, mode="r", *args, **kwargs: Full(original(path, mode, *args, **kwargs))


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(3)}, "epoch": 0}, path)
    monkeypatch.setattr("builtins.open", full_disk_after(100))
    with pytest.raises(UserError) as raised:
        AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.zeros(1000)}, "epoch": 1}, path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("--trainer.default_root_dir: cannot write checkpoint ")
    assert "no space left" in message
    monkeypatch.undo()
    assert torch.load(path, weights_only=True)["epoch"] == 0  # the previous checkpoint, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_atomic_save_writes_beside_the_target(tmp_path, monkeypatch):
    seen = []
    original = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: seen.append((source, target)) or original(source, target))
    atomic_torch_save({"a": 1}, tmp_path / "encoder.ckpt")
    ((source, target),) = seen
    assert os.path.dirname(source) == os.path.dirname(target) == str(tmp_path)  # a rename, never a copy


def test_the_plugin_is_added_once_and_a_users_own_checkpoint_io_wins():
    plugins = with_atomic_checkpoints(None)
    assert [type(p) for p in plugins] == [AtomicCheckpointIO]
    own = AtomicCheckpointIO()
    assert with_atomic_checkpoints([own]) == [own]


def test_a_checkpoint_folder_on_a_full_disk_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.diskspace.free_bytes", lambda path: 10_000)
    with pytest.raises(UserError) as raised:
        check_checkpoint_room(tmp_path / "checkpoints" / "pretrain", torch.nn.Linear(100, 100))
    message = str(raised.value)
    assert message.startswith("--trainer.default_root_dir (") and "only 9.8 KiB free" in message


def test_an_unwritable_checkpoint_folder_is_refused_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError) as raised:
        check_checkpoint_room(blocker / "checkpoints", torch.nn.Linear(2, 2))
    assert str(raised.value).startswith(f"--trainer.default_root_dir: cannot write checkpoints under {blocker}")


def test_disk_problems_are_found_through_the_exception_chain():
    import sqlite3

    from harness.diskspace import disk_problem

    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as inner:
            raise RuntimeError("the store wrapped it") from inner
    except RuntimeError as outer:
        assert "no space left (SQLite: database or disk is full)" in disk_problem(outer)
    assert (
        disk_problem(OSError(errno.EROFS, "Read-only file system", "/x")) == "/x: read-only filesystem "
        "(Read-only file system)"
    )
    assert disk_problem(ValueError("database or disk is full")) is None
    assert disk_problem(OSError(errno.ENOENT, "missing")) is None

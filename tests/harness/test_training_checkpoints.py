"""Checkpoints are read without running pickled code, only from the run's own folder, and a
``--ckpt_path`` that cannot be resumed from is refused in one line."""

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.demos.boring_classes import BoringModel

from downstream.run.evaluation import EvaluateBest
from harness.errors import UserError
from harness.training.checkpoints import find_last, read_best, resume_point
from harness.training.resume import ResumeState
from pretrain.callbacks import ExportEncoder

RUN_ID = "0123456789abcdef0123456789abcdef"


class Payload:
    """Unpickling this creates ``marker``: the stand-in for arbitrary code in a crafted file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def crafted(path: Path, marker: Path) -> Path:
    torch.save({"state_dict": {}, "epoch": 0, "payload": Payload(marker)}, path)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A real Lightning run folder ``<tmp>/<run id>/`` holding best.ckpt and last.ckpt."""
    folder = tmp_path_factory.mktemp("checkpoints") / RUN_ID
    checkpoint = ModelCheckpoint(dirpath=folder, filename="best", monitor="valid_loss", save_last=True)

    class Model(BoringModel):
        def validation_step(self, batch, batch_index):
            loss = super().validation_step(batch, batch_index)["x"]
            self.log("valid_loss", loss)

    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=1,
        logger=False,
        callbacks=[checkpoint, ResumeState(RUN_ID)],
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=folder.parent,
    )
    trainer.fit(Model())
    return folder


@pytest.mark.parametrize("callback", ["export", "evaluate"])
@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_crafted_best_model_path_never_runs_its_payload(tmp_path, callback, where):
    folder = tmp_path / RUN_ID
    folder.mkdir()
    marker = tmp_path / "payload-ran"
    payload = crafted((folder if where == "inside" else tmp_path) / "best.ckpt", marker)
    trainer = SimpleNamespace(
        is_global_zero=True, checkpoint_callback=SimpleNamespace(best_model_path=str(payload), dirpath=str(folder))
    )
    hook = ExportEncoder(folder) if callback == "export" else EvaluateBest()
    with pytest.raises(UserError) as raised:
        hook.on_fit_end(trainer, pl_module=SimpleNamespace(load_state_dict=lambda state: None))
    assert not marker.exists()
    message = str(raised.value)
    assert "\n" not in message and str(payload) in message
    assert ("outside the run's checkpoint folder" if where == "outside" else "refused to load") in message


def test_read_best_returns_a_real_checkpoint(trained):
    checkpoint = read_best(str(trained / "best.ckpt"), trained)
    assert set(checkpoint["state_dict"]) == set(BoringModel().state_dict())


def test_resume_point_of_a_run_folder(trained):
    point = resume_point(str(trained / "last.ckpt"), trained.parent)
    assert (point.path, point.run_id, point.directory) == (trained / "last.ckpt", RUN_ID, trained)
    assert resume_point("last", trained.parent) == point


def test_run_id_is_read_from_the_checkpoint_wherever_it_lies(trained, tmp_path):
    copy = tmp_path / "elsewhere.ckpt"
    copy.write_bytes((trained / "last.ckpt").read_bytes())
    assert resume_point(str(copy), tmp_path).run_id == RUN_ID


def test_last_is_the_newest_last_ckpt(tmp_path):
    assert find_last(tmp_path) is None
    paths = []
    for number, run_id in enumerate(["a" * 32, "b" * 32]):
        (tmp_path / run_id).mkdir()
        paths.append(tmp_path / run_id / "last.ckpt")
        paths[-1].write_bytes(b"x")
        os.utime(paths[-1], (time.time() - 100 + number, time.time() - 100 + number))
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "not-a-run" / "last.ckpt").write_bytes(b"x")
    assert find_last(tmp_path) == paths[1]


def refused(ckpt_path: str, root: Path) -> str:
    with pytest.raises(UserError) as raised:
        resume_point(ckpt_path, root)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"--ckpt_path={ckpt_path}: "), message
    return message


def test_unusable_ckpt_paths_are_refused_in_one_line(trained, tmp_path):
    assert "no such file" in refused(str(tmp_path / "missing.ckpt"), tmp_path)
    assert "no last.ckpt under" in refused("last", tmp_path)
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes((trained / "last.ckpt").read_bytes()[:2000])
    assert "truncated, or not a torch checkpoint" in refused(str(truncated), tmp_path)
    text = tmp_path / "notes.ckpt"
    text.write_text("not a checkpoint")
    assert "refused to load" in refused(str(text), tmp_path)
    slim = tmp_path / "slim.ckpt"
    torch.save({"state_dict": {}, "epoch": 1}, slim)
    assert "not a training checkpoint" in refused(str(slim), tmp_path)


def test_a_pickled_payload_as_ckpt_path_is_refused_without_running(tmp_path):
    marker = tmp_path / "payload-ran"
    payload = crafted(tmp_path / "evil.ckpt", marker)
    assert "refused to load (it holds pickled objects" in refused(str(payload), tmp_path)
    assert not marker.exists()


def test_a_checkpoint_naming_files_outside_its_folder_is_refused(trained, tmp_path):
    folder = tmp_path / RUN_ID
    folder.mkdir()
    checkpoint = torch.load(trained / "last.ckpt", weights_only=True)
    (key,) = [key for key in checkpoint["callbacks"] if key.startswith("ModelCheckpoint")]
    checkpoint["callbacks"][key].update(dirpath=str(folder), best_model_path="/etc/passwd")
    torch.save(checkpoint, folder / "last.ckpt")
    message = refused(str(folder / "last.ckpt"), tmp_path)
    assert "names /etc/passwd, outside the run's checkpoint folder" in message


def test_a_checkpoint_without_a_run_is_refused(trained, tmp_path):
    checkpoint = torch.load(trained / "last.ckpt", weights_only=True)
    del checkpoint["callbacks"]["ResumeState"]
    torch.save(checkpoint, tmp_path / "orphan.ckpt")
    assert "does not say which MLflow run" in refused(str(tmp_path / "orphan.ckpt"), tmp_path)

"""Lightning training checkpoints of a run (best and last): written whole, read safely, and the one a fit resumes from.

Every checkpoint is read with ``torch.load(weights_only=True)``: a pickle that would run code is
refused, not executed. A checkpoint's ModelCheckpoint state names other files (the best model,
the last one); those must lie inside the run's own checkpoint folder, so a doctored state cannot
point the harness at a file elsewhere. Each run keeps its checkpoints in
``<root>/checkpoints/<stage>/<run_id>/``; the run id is also stored inside (``ResumeState``).

Checkpoints are written whole or not at all (:class:`AtomicCheckpointIO`: a temporary file in the
run's own folder, renamed into place), so a full disk never leaves a truncated ``last.ckpt``; the
folder is checked for writability and room before a run starts (:func:`check_checkpoint_room`).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.plugins.io import CheckpointIO, TorchCheckpointIO

from harness.atomic import atomic_torch_save
from harness.diskspace import check_free, disk_problem
from harness.errors import UserError

RUN_ID = re.compile(r"^[0-9a-f]{32}$")
LAST = "last.ckpt"
ROOT_FLAG = "--trainer.default_root_dir"
RESUME_STATE_KEY = "ResumeState"  # where harness.training.resume.ResumeState keeps its state in "callbacks"
PATH_FIELDS = ("best_model_path", "last_model_path", "kth_best_model_path")


@dataclass(frozen=True)
class ResumePoint:
    """Where a fit resumes: the checkpoint, its MLflow run and its run's checkpoint folder."""

    path: Path
    run_id: str
    directory: Path


def run_checkpoints(directory: Path, monitor: str, mode: str, every: timedelta | None = None) -> list[ModelCheckpoint]:
    """The two checkpoints a run keeps in its folder, refreshed at every validation:
    ``best.ckpt`` (the best ``monitor`` so far) and ``last.ckpt`` (the latest: what
    ``--ckpt_path=last`` resumes from). Lightning's own ``save_last`` refreshes ``last.ckpt`` only
    when a new best is saved, so resuming from it would go back to the best epoch. With ``every``,
    ``last.ckpt`` is also written after the first batch that ends that long after the previous
    save (a long epoch then loses at most that much when the run is stopped)."""
    last = LAST.removesuffix(".ckpt")
    callbacks = [
        ModelCheckpoint(dirpath=directory, filename="best", monitor=monitor, mode=mode, save_top_k=1),
        ModelCheckpoint(dirpath=directory, filename=last, save_top_k=1, enable_version_counter=False),
    ]
    if every is not None:
        callbacks.append(
            ModelCheckpoint(
                dirpath=directory, filename=last, save_top_k=1, enable_version_counter=False, train_time_interval=every
            )
        )
    return callbacks


def load_weights_only(path: Path, what: str) -> dict:
    """The checkpoint dict at ``path``, read without running any pickled code.

    Raises:
        UserError naming ``what`` when the file is missing, unreadable or holds other objects.
    """
    if not path.is_file():
        raise UserError(f"{what}: no such file")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - truncated, not a checkpoint, or objects beyond tensors
        if "weights only load failed" in str(error).lower():
            reason = "it holds pickled objects other than tensors and plain containers, which could run code"
        else:
            reason = f"{type(error).__name__}: truncated, or not a torch checkpoint"
        raise UserError(f"{what}: refused to load ({reason})") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserError(f"{what}: not a Lightning checkpoint (no state_dict)")
    return checkpoint


def inside(path: str | Path, directory: Path) -> bool:
    resolved, folder = Path(path).resolve(), directory.resolve()
    return resolved == folder or folder in resolved.parents


def read_best(path: str, directory: Path) -> dict:
    """The best checkpoint a run's ModelCheckpoint recorded, which must lie in ``directory``."""
    if not inside(path, directory):
        raise UserError(
            f"best checkpoint {path} lies outside the run's checkpoint folder {directory}; refusing to read it"
        )
    return load_weights_only(Path(path), f"best checkpoint {path}")


def find_last(root: Path) -> Path | None:
    """The newest ``<root>/<run_id>/last.ckpt``, None when there is none."""
    candidates = [path for path in root.glob(f"*/{LAST}") if RUN_ID.match(path.parent.name)]
    return max(candidates, key=lambda path: path.stat().st_mtime, default=None)


def checked_paths(checkpoint: dict, directory: Path, what: str) -> None:
    """Refuse a checkpoint whose ModelCheckpoint state, restored into a callback writing to
    ``directory``, would name files outside it."""
    for key, state in (checkpoint.get("callbacks") or {}).items():
        if not str(key).startswith("ModelCheckpoint") or not isinstance(state, dict):
            continue
        if Path(str(state.get("dirpath", ""))).resolve() != directory.resolve():
            continue  # Lightning restores none of these paths into a callback with another folder
        paths = [state.get(field) for field in PATH_FIELDS] + list((state.get("best_k_models") or {}).keys())
        for path in paths:
            if path and not inside(str(path), directory):
                raise UserError(
                    f"{what}: its {key.split('{')[0]} state names {path}, outside the run's "
                    f"checkpoint folder {directory}; refusing to resume from it"
                )


def resume_point(ckpt_path: str, checkpoint_root: Path) -> ResumePoint:
    """Resolve ``--ckpt_path`` (``last`` or a file) to a checkpoint, its run and its folder.

    ``last`` is the newest ``last.ckpt`` under ``checkpoint_root`` (``<root>/checkpoints/<stage>``).
    The run id comes from the checkpoint itself, else from its folder's name.
    """
    if ckpt_path == "last":
        found = find_last(checkpoint_root)
        if found is None:
            raise UserError(
                f"--ckpt_path=last: no {LAST} under {checkpoint_root}; pass the path of a checkpoint "
                f"(checkpoints/<stage>/<run_id>/{LAST} under the --trainer.default_root_dir of the run)"
            )
        path = found
    else:
        path = Path(ckpt_path).expanduser()
    what = f"--ckpt_path={ckpt_path}"
    checkpoint = load_weights_only(path, what)
    if "loops" not in checkpoint or "optimizer_states" not in checkpoint:
        raise UserError(
            f"{what}: a weights-only export, not a training checkpoint; resume from checkpoints/<stage>/<run_id>/{LAST}"
        )
    state = (checkpoint.get("callbacks") or {}).get(RESUME_STATE_KEY) or {}
    run_id = state.get("run_id") if isinstance(state, dict) else None
    if not run_id and RUN_ID.match(path.parent.name):
        run_id = path.parent.name
    if not run_id:
        raise UserError(
            f"{what}: the checkpoint does not say which MLflow run it belongs to (and its folder "
            f"is not named by a run id); start a new run without --ckpt_path"
        )
    directory = path.parent.resolve()
    checked_paths(checkpoint, directory, what)
    return ResumePoint(path.resolve(), str(run_id), directory)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO, writing each file whole or not at all: ``torch.save`` into a
    temporary file beside the target, fsync, rename (Lightning's own goes through a temporary
    file in the system's temp folder and copies it across filesystems). A disk error is a
    :class:`UserError` naming the file; the previous checkpoint of that name stays intact."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_torch_save(checkpoint, path)
        except OSError as error:
            problem = disk_problem(error) or f"{type(error).__name__}: {error}"
            raise UserError(
                f"{ROOT_FLAG}: cannot write checkpoint {path} ({problem}); free space there or point "
                f"{ROOT_FLAG} at another disk"
            ) from None


def with_atomic_checkpoints(plugins) -> list:
    """The trainer's plugins plus :class:`AtomicCheckpointIO`, unless one of them is a CheckpointIO already."""
    plugins = list(plugins or []) if isinstance(plugins, (list, tuple)) or plugins is None else [plugins]
    if any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        return plugins
    return [*plugins, AtomicCheckpointIO()]


def state_bytes(module: torch.nn.Module) -> int:
    """Bytes of the tensors of ``module``'s state_dict (what its checkpoint's weights take)."""
    return sum(
        tensor.numel() * tensor.element_size()
        for tensor in module.state_dict().values()
        if isinstance(tensor, torch.Tensor)
    )


def check_checkpoint_room(directory: Path, module: torch.nn.Module) -> None:
    """Refuse, before a run starts, a checkpoint folder that cannot be written or whose disk cannot
    hold the run's two checkpoints (``best``, ``last``: weights and AdamW's two moments each)."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-probe-"):
            pass
    except OSError as error:
        problem = disk_problem(error) or f"{type(error).__name__}: {error}"
        raise UserError(
            f"{ROOT_FLAG}: cannot write checkpoints under {directory} ({problem}); point "
            f"{ROOT_FLAG} at a writable folder"
        ) from None
    needed = 2 * 3 * state_bytes(module)
    check_free(
        directory,
        needed,
        f"{ROOT_FLAG} ({directory})",
        f"the run's best and last checkpoints would not fit; free space there or point {ROOT_FLAG} at another disk",
    )

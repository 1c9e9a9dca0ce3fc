"""Checkpoint digests: a run records the sha256 of the checkpoint it produced, and whoever loads
that checkpoint later checks the bytes it got against the record.

A pretrain run records its ``checkpoint/encoder.ckpt`` (checked on every download: ``runs:/``,
``models:/``, ``latest``), a finetune run its ``best.ckpt`` (checked by ``load_classifier``).
The digest is a run param (``checkpoint_sha256``), written when the run finishes. MLflow never
lets a param change once logged, so someone who can overwrite the run's artifacts (anyone with
EDIT on its experiment, or anyone at all on an open server) cannot make a swapped file pass.
Runs made before digests existed carry none; their checkpoints load unchecked, with a note.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytorch_lightning as pl
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.tracking.store import SERVER_SCHEMES, scheme_of, server_problem, tracking_uri

DIGEST_PARAM = "checkpoint_sha256"
BEST = "best.ckpt"  # a finetune run's best checkpoint (harness.training.checkpoints.run_checkpoints)
CHUNK = 1 << 20
_NOTED: set[str] = set()  # runs without a digest this process has already said so about


def sha256_of(path: str | Path) -> str:
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def record_digest(client: MlflowClient, run_id: str, path: str | Path) -> str:
    """Log the sha256 of ``path`` as the run's ``checkpoint_sha256`` param. Returns the digest.

    Raises:
        UserError when the run already records another digest (a param never changes).
    """
    digest = sha256_of(path)
    recorded = client.get_run(run_id).data.params.get(DIGEST_PARAM)
    if recorded is None:
        client.log_param(run_id, DIGEST_PARAM, digest)
    elif recorded != digest:
        raise UserError(
            f"run {run_id} already records {DIGEST_PARAM}={recorded[:12]}… for another checkpoint "
            f"than {path} ({digest[:12]}…); start a new run instead of resuming this one"
        )
    return digest


def recorded_digest(run: Run) -> str | None:
    return run.data.params.get(DIGEST_PARAM)


def matches_record(run: Run, path: str | Path) -> bool:
    """True when the file's sha256 equals the run's record, or the run records none."""
    recorded = recorded_digest(run)
    return recorded is None or sha256_of(path) == recorded


def check_digest(run: Run, path: str | Path, artifact: str, source: str) -> None:
    """Refuse ``path`` (the run's ``artifact``, as downloaded) unless its bytes match the run's
    recorded sha256; a run without a record gets a one-line note on stderr.

    Raises:
        UserError: one line naming ``source``, the run and both digests.
    """
    run_id, recorded = run.info.run_id, recorded_digest(run)
    if recorded is None:
        if run_id in _NOTED:
            return
        _NOTED.add(run_id)
        print(
            f"note: run {run_id} records no {DIGEST_PARAM} (made before checkpoint digests); "
            f"its {artifact} is loaded unchecked",
            file=sys.stderr,
        )
        return
    actual = sha256_of(path)
    if actual != recorded:
        raise UserError(
            f"{source}: run {run_id}'s {artifact} is not the checkpoint the run recorded "
            f"(sha256 {actual[:12]}… ≠ {DIGEST_PARAM} {recorded[:12]}…): the artifact was replaced "
            f"or damaged in the store; refusing to load it"
        )


class RecordBestDigest(pl.Callback):
    """At the end of fit, the sha256 of the run's best checkpoint (``best.ckpt``) as its
    ``checkpoint_sha256`` param, so a later :func:`check_run_checkpoint` can tell it was not swapped."""

    def on_fit_end(self, trainer, pl_module):
        callback, logger = trainer.checkpoint_callback, trainer.logger
        best = callback.best_model_path if callback else ""
        if trainer.is_global_zero and best and Path(best).is_file() and hasattr(logger, "run_id"):
            record_digest(logger.experiment, logger.run_id, best)


def check_run_checkpoint(path: str | Path, run_id: str | None) -> None:
    """Refuse a run's ``best.ckpt`` whose bytes differ from the digest the run recorded. Nothing
    to check for other files, a checkpoint that names no run, or a run the store does not have
    (or a tracking server that does not answer).

    Raises:
        UserError: one line naming the file and the run.
    """
    path = Path(path)
    if not run_id or path.name != BEST:
        return
    uri = tracking_uri()
    if scheme_of(uri) in SERVER_SCHEMES and server_problem(uri):
        return
    try:
        run = MlflowClient(uri).get_run(run_id)
    except MlflowException:
        return
    check_digest(run, path, BEST, str(path))

"""What an encoder has read, in the run store: a pretraining run logs the digests of its training
text (:mod:`harness.datasets.seen_sentences`), and a transfer run reads them back to tell which of
its pairs the encoder has seen."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from mlflow.exceptions import MlflowException

from harness.datasets import seen_sentences


def log_seen_text(client, run_id: str, sentences: list[str], continued_run: str | None = None) -> int:
    """Log the digests of ``sentences`` (and of what ``continued_run`` had read, where it logged
    them) as the run's ``corpus/seen_sentences.npy``; returns how many distinct sentences it holds."""
    values = seen_sentences.digests(sentences)
    if continued_run:
        earlier = encoder_seen_text(client, continued_run)
        if earlier is not None:
            values = seen_sentences.merged(values, earlier)
    with tempfile.TemporaryDirectory() as folder:
        client.log_artifact(run_id, str(seen_sentences.write(Path(folder), values)), seen_sentences.ARTIFACT_DIR)
    return len(values)


def encoder_seen_text(client, run_id: str | None, task: str | None = None) -> np.ndarray | None:
    """The digests of what the pretraining run ``run_id`` read. Where it logged none (a run from
    before they were logged), its ``contamination_<task>_dev`` and ``_test`` params may still say
    that it read none of ``task``'s dev and test sentences: then an empty array. None where nothing
    is known (no run, e.g. a published encoder, or counts above zero without the digests)."""
    if not run_id:
        return None
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = client.download_artifacts(run_id, seen_sentences.ARTIFACT, folder)
        except (MlflowException, OSError):
            path = None
        if path and Path(path).is_file():
            return seen_sentences.read(Path(path))
    if task is None:
        return None
    params = client.get_run(run_id).data.params
    name = task.replace("-", "_")
    counts = [params.get(f"contamination_{name}_{split}") for split in ("dev", "test")]
    return np.empty(0, dtype=np.uint64) if counts == ["0", "0"] else None

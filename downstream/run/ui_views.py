"""What a finetune run shows in the MLflow UI beyond its metrics and files.

- its data: each split as an MLflow dataset input (``log_inputs``: name, source folder, content
  digest, context ``train``/``dev``/``test``), so the runs table's Dataset column and the run page
  say what it was trained and evaluated on;
- its predictions as MLflow tables (``predictions/<split>.json`` via ``log_table``, with both
  sentences), which the run's artifact view shows as a table, so errors can be read in the UI;
- the confusion matrix and the mix weights as logged images (``log_image`` with a key), which
  the compare view's image grid puts side by side across runs.

The contract files (``predictions/{dev,test}.csv``, ``figures/*.png``) stay as they are.
"""

from __future__ import annotations

import hashlib
import json
import time

import mlflow.data
import pandas as pd
import pytorch_lightning as pl
from mlflow.data.dataset_source import DatasetSource
from mlflow.data.dataset_source_registry import get_registered_sources, resolve_dataset_source
from mlflow.entities import DatasetInput, InputTag
from mlflow.exceptions import MlflowException
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

from downstream.run.evaluation import gold_labels
from harness.training.worker_reuse import reusing

SPLITS = ("train", "dev", "test")
SENTENCE_COLUMNS = ("sentence1", "sentence2")


def split_frame(data, pairs) -> pd.DataFrame:
    """One row per pair: ids, label name (a graded task's gold score) and both sentences (the content
    the dataset digest covers)."""
    return pd.DataFrame(
        {
            **data.ids_by_column(pairs),
            "label": gold_labels(data, pairs),
            "sentence1": [p.sentence1 for p in pairs],
            "sentence2": [p.sentence2 for p in pairs],
        }
    )


def dataset_source(source: str) -> DatasetSource:
    """``source`` as MLflow's dataset source. MLflow 3.17 registers two equal local-file sources and
    warns on every resolution that may be either; a local path is resolved among the last one alone
    (the one MLflow picks), anything else among all."""
    local = [kind for kind in get_registered_sources() if kind._get_source_type() == "local"]
    try:
        return resolve_dataset_source(source, candidate_sources=local[-1:] or None)
    except MlflowException:
        return resolve_dataset_source(source)


def dataset_inputs(data, pairs: dict[str, list], source: str) -> list[DatasetInput]:
    """Each split of the pair data set ``data`` as a dataset input named ``<data set>-<split>``, with
    MLflow's digest of its rows; a benchmark worker computes each split's digest once
    (``harness.training.worker_reuse``: keyed on the data's content hash, the split, its rows' ids and the source)."""
    inputs = []
    for split in SPLITS:
        if split not in pairs:
            continue
        key = _split_key(data, split, pairs[split], source)
        entity = _DIGESTED.get(key) if reusing() else None
        if entity is None:
            dataset = mlflow.data.from_pandas(
                split_frame(data, pairs[split]),
                source=dataset_source(source),
                targets="label",
                name=f"{data.name}-{split}",
            )
            entity = dataset._to_mlflow_entity()  # the client API takes entities
            if reusing():
                _DIGESTED[key] = entity
        inputs.append(DatasetInput(entity, tags=[InputTag(MLFLOW_DATASET_CONTEXT, split)]))
    return inputs


_DIGESTED: dict[str, object] = {}  # split key → its MLflow dataset entity (benchmark workers only)


def _split_key(data, split: str, pairs: list, source: str) -> str:
    ids = json.dumps(data.ids_by_column(pairs), ensure_ascii=False)
    return hashlib.sha256(f"{data.content_hash}\n{data.name}\n{split}\n{source}\n{ids}".encode()).hexdigest()


def with_sentences(frame: pd.DataFrame, pairs: list) -> pd.DataFrame:
    """The predictions frame (split order) with ``sentence1, sentence2`` when it lacks them."""
    if all(column in frame for column in SENTENCE_COLUMNS):
        return frame
    if len(frame) != len(pairs):
        raise ValueError(f"{len(frame)} predictions for {len(pairs)} pairs")
    return frame.assign(sentence1=[p.sentence1 for p in pairs], sentence2=[p.sentence2 for p in pairs])


class LogDatasets(pl.Callback):
    """At fit start: the run's splits as dataset inputs (rank 0). Runs started together may insert
    the same dataset row at once; the store keeps one and refuses the other, so log again."""

    def on_fit_start(self, trainer, pl_module):
        data, logger = trainer.datamodule, trainer.logger
        if not trainer.is_global_zero or data is None or not hasattr(logger, "run_id"):
            return
        inputs = dataset_inputs(data.pair_data, data.pairs, data.pair_data.source)
        for attempt in range(3):
            try:
                logger.experiment.log_inputs(logger.run_id, datasets=inputs)
                return
            except MlflowException:
                if attempt == 2:
                    raise
                time.sleep(0.2 * (attempt + 1))


class LogPredictionViews(pl.Callback):
    """At fit end, after :class:`~downstream.run.evaluation.EvaluateBest` (whose ``frames`` and
    ``images`` it reads): predictions tables with sentences, and the figures EvaluateBest drew
    (confusion matrix, mix weights) as keyed images, from the same pixels."""

    def __init__(self, evaluation):
        self.evaluation = evaluation

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero or not self.evaluation.frames:
            return
        client, run_id = trainer.logger.experiment, trainer.logger.run_id
        pairs = trainer.datamodule.pairs
        for split, frame in self.evaluation.frames.items():
            client.log_table(run_id, with_sentences(frame, pairs[split]), f"predictions/{split}.json")
        for key, image in self.evaluation.images.items():
            client.log_image(run_id, image, key=key, step=trainer.global_step)

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

import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mlflow.data  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytorch_lightning as pl  # noqa: E402
from mlflow.entities import DatasetInput, InputTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT  # noqa: E402


SPLITS = ("train", "dev", "test")
SENTENCE_COLUMNS = ("sentence1", "sentence2")


def split_frame(data, pairs) -> pd.DataFrame:
    """One row per pair: ids, label name and both sentences (the content the dataset digest covers)."""
    return pd.DataFrame({**data.ids_by_column(pairs), "label": [data.labels[p.label] for p in pairs],
                         "sentence1": [p.sentence1 for p in pairs], "sentence2": [p.sentence2 for p in pairs]})


def dataset_inputs(data, pairs: dict[str, list], source: str) -> list[DatasetInput]:
    """Each split of the pair data set ``data`` as a dataset input named ``<data set>-<split>``, with
    MLflow's digest of its rows."""
    inputs = []
    for split in SPLITS:
        if split not in pairs:
            continue
        dataset = mlflow.data.from_pandas(split_frame(data, pairs[split]), source=source, targets="label",
                                          name=f"{data.name}-{split}")
        inputs.append(DatasetInput(dataset._to_mlflow_entity(),  # noqa: SLF001 - the client API takes entities
                                   tags=[InputTag(MLFLOW_DATASET_CONTEXT, split)]))
    return inputs


def with_sentences(frame: pd.DataFrame, pairs: list) -> pd.DataFrame:
    """The predictions frame (split order) with ``sentence1, sentence2`` when it lacks them."""
    if all(column in frame for column in SENTENCE_COLUMNS):
        return frame
    if len(frame) != len(pairs):
        raise ValueError(f"{len(frame)} predictions for {len(pairs)} pairs")
    return frame.assign(sentence1=[p.sentence1 for p in pairs], sentence2=[p.sentence2 for p in pairs])


def figure_image(figure) -> np.ndarray:
    """A matplotlib figure as an (H, W, 3) uint8 array."""
    figure.canvas.draw()
    return np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()


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
    """At fit end, after :class:`~downstream.evaluation.EvaluateBest` (whose ``frames`` and
    ``results`` it reads): predictions tables with sentences, confusion matrix and mix weights
    as keyed images."""

    def __init__(self, evaluation):
        self.evaluation = evaluation

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero or not self.evaluation.frames:
            return
        from downstream.evaluation import confusion_figure, mix_figure  # noqa: PLC0415 - evaluation owns the figures

        client, run_id = trainer.logger.experiment, trainer.logger.run_id
        pairs = trainer.datamodule.pairs
        for split, frame in self.evaluation.frames.items():
            client.log_table(run_id, with_sentences(frame, pairs[split]), f"predictions/{split}.json")
        step = trainer.global_step
        figures = {"confusion_matrix": lambda: confusion_figure(self.evaluation.frames, trainer.datamodule.pair_data)}
        results = self.evaluation.results
        if pl_module.mix is not None:
            weights = [results[f"mix_weight_{k}"] for k in range(pl_module.mix.num_layers)]
            figures["mix_weights"] = lambda: mix_figure(weights, results["mix_gamma"], f"mix = {pl_module.hparams.mix}")
        for key, make in figures.items():
            figure = make()
            client.log_image(run_id, figure_image(figure), key=key, step=step)
            plt.close(figure)

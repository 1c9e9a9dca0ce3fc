"""End of a finetune run: the best checkpoint on GLUE dev and MSR test, with predictions and
figures logged so that any metric can be recomputed from the run."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
from sklearn.metrics import ConfusionMatrixDisplay, accuracy_score, f1_score  # noqa: E402

from harness.checkpoints import read_best  # noqa: E402

PREDICTION_COLUMNS = ["id1", "id2", "label", "prob", "pred"]


def predictions_frame(pairs, probabilities: torch.Tensor, indices: torch.Tensor) -> pd.DataFrame:
    """Returns one row per pair: ``id1, id2, label, prob, pred`` (pred = prob ≥ 0.5), in split order."""
    order = torch.argsort(indices)
    rows = [pairs[i] for i in indices[order].tolist()]
    probability = probabilities[order].double().numpy()
    return pd.DataFrame({
        "id1": [p.id1 for p in rows], "id2": [p.id2 for p in rows], "label": [p.label for p in rows],
        "prob": probability, "pred": (probability >= 0.5).astype(int),
    })[PREDICTION_COLUMNS]


def split_metrics(frame: pd.DataFrame, split: str) -> dict[str, float]:
    """``<split>_acc`` and ``<split>_f1`` (positive class = paraphrase) from sklearn."""
    return {f"{split}_acc": float(accuracy_score(frame["label"], frame["pred"])),
            f"{split}_f1": float(f1_score(frame["label"], frame["pred"], zero_division=0))}


def confusion_figure(frames: dict[str, pd.DataFrame]):
    figure, axes = plt.subplots(1, len(frames), figsize=(4 * len(frames), 3.6))
    for axis, (split, frame) in zip(axes, frames.items()):
        ConfusionMatrixDisplay.from_predictions(frame["label"], frame["pred"], labels=[0, 1],
                                                display_labels=["not para.", "paraphrase"], ax=axis, colorbar=False)
        axis.set_title(f"{split} ({len(frame)} pairs)")
    figure.tight_layout()
    return figure


def mix_figure(weights: list[float], gamma: float, title: str):
    figure, axis = plt.subplots(figsize=(1.2 * len(weights) + 2, 3))
    axis.bar(range(len(weights)), weights, color="tab:blue")
    axis.set_xticks(range(len(weights)), [f"layer {k}" for k in range(len(weights))])
    axis.set_ylim(0, 1)
    axis.set_ylabel("softmax weight")
    axis.set_title(f"{title}  (γ = {gamma:.2f})")
    figure.tight_layout()
    return figure


class EvaluateBest(pl.Callback):
    """At the end of fit (before the run closes): reload the best dev checkpoint, predict GLUE dev
    and MSR test, log ``dev_acc, dev_f1, test_acc, test_f1`` computed by sklearn from exactly the
    logged ``predictions/{dev,test}.csv``, a confusion matrix and the mix-weight bar chart. The best
    checkpoint is read from the run's own checkpoint folder only, without running pickled code."""

    def __init__(self):
        self.results: dict[str, float] = {}
        self.frames: dict[str, pd.DataFrame] = {}

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        checkpoint_callback = trainer.checkpoint_callback
        best = checkpoint_callback.best_model_path if checkpoint_callback else ""
        if best:
            pl_module.load_state_dict(read_best(best, Path(checkpoint_callback.dirpath))["state_dict"])
        data = trainer.datamodule
        for split in ("dev", "test"):
            probabilities, indices = pl_module.probabilities(data.loader(split))
            self.frames[split] = predictions_frame(data.pairs[split], probabilities, indices)
            self.results.update(split_metrics(self.frames[split], split))
        self.results.update(pl_module.mix_metrics())
        logger = trainer.logger
        client, run_id = logger.experiment, logger.run_id
        logger.log_metrics(self.results, step=trainer.global_step + 1)
        for split, frame in self.frames.items():
            client.log_text(run_id, frame.to_csv(index=False), f"predictions/{split}.csv")
        figure = confusion_figure(self.frames)
        client.log_figure(run_id, figure, "figures/confusion_matrix.png")
        plt.close(figure)
        weights = [self.results[f"mix_weight_{k}"] for k in range(pl_module.mix.num_layers)]
        figure = mix_figure(weights, self.results["mix_gamma"], f"mix = {pl_module.hparams.mix}")
        client.log_figure(run_id, figure, "figures/mix_weights.png")
        plt.close(figure)

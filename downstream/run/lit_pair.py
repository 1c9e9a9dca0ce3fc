"""LightningModule for sentence-pair tasks: trains a ``PairClassifier`` (mix → pair head, the
encoder frozen or fine-tuned) with its task's loss and dev metrics, optimiser and schedule, and
checkpoints that name the encoder they were trained on.

The task (``harness.datasets.task``) comes as plain hyper-parameters the CLI links from the data
(``target``, ``score_range``), as ``num_classes`` does, so a checkpoint reloads without pickled
objects. Classes: ``dev_acc`` and ``dev_f1`` (binary F1 of the positive class, or macro), and
``train_acc``; a graded task: ``dev_pearson`` and ``dev_spearman`` (torchmetrics) of the predicted
against the gold scores. Checkpoints and early stopping follow ``task.monitor``.

``finetune``:
- ``frozen``: the encoder stays outside the optimiser and the checkpoint; batches hold its cached
  per-layer features. AdamW at a constant rate.
- ``full``: the encoder's model trains under the head, with discriminative learning rates (each
  lower parameter group's rate / ``lr_decay``, ULMFiT's 2.6) and the slanted triangular schedule
  (``warmup_fraction`` = cut_frac 0.1, ``stlr_ratio`` 32), per step.
- ``gradual``: as ``full``, plus gradual unfreezing (``downstream.run.unfreezing.GradualUnfreezing``).
The random-init twin runs the identical procedure: only its encoder's weights differ.
"""

from __future__ import annotations

import warnings
from typing import Literal

import pytorch_lightning as pl
import torch
from torchmetrics.classification import BinaryAccuracy, BinaryF1Score, MulticlassAccuracy, MulticlassF1Score
from torchmetrics.regression import PearsonCorrCoef, SpearmanCorrCoef

from downstream.model.pair_classifier import FeaturePair, JointPair, PairClassifier, SegmentPair, TokenPair
from downstream.model.settings import Finetune, Head, Mix
from downstream.model.standardization import resolved_standardize
from downstream.run.evaluation import predicted_class
from downstream.run.unfreezing import GradualUnfreezing
from harness.cli.precision import clip_gradients
from harness.datasets.task import CLASSES, Target, Task, graded
from harness.training.schedules import slanted_triangular
from pretrain.encoders.protocol import Encoder


def linked_task(target: Target, score_range: tuple[float, float] | None) -> Task:
    """The task of the hyper-parameters the CLI links from the data: classes, or graded over
    ``score_range``.

    Raises:
        ValueError: ``target=…: …`` for another target, or a graded one without its range.
    """
    if target == "classes":
        return CLASSES
    if target != "graded" or score_range is None:
        raise ValueError(f"target={target}: expected classes, or graded with a score_range (low, high)")
    return graded(*score_range)


class LitPairClassifier(pl.LightningModule):
    """Classify (or score) sentence pairs from an encoder's per-layer features.

    Args:
        encoder: the resolved encoder (the CLI resolves ``--model.encoder`` once and passes it).
        mix: ``average``, ``scalar``, ``top`` or ``layer:K``.
        layer_norm: normalise each layer before a scalar mix (ELMo's option).
        standardize: z-score each frozen layer per dimension with the mean and deviation over the
            training pairs' tokens before the mix (``downstream.model.standardization``; frozen only):
            what lets a head learn from a random-init twin's features, whose common direction
            it otherwise never got past. The same for a pretrained cell and its twin. ``auto`` (the
            default): on for frozen features under a layer mix, off where the encoder trains or
            ``head=cls``; the hyper-parameters hold the resolved bool.
        head: ``pool-mlp``, ``bilstm``, ``dense``, ``attn``, ``decomp``, ``concat-pool`` or ``cls`` (the joint
            pair classifier of an encoder that takes a joint pair input: GPT's both orders, BERT's
            segments; ``downstream.model.joint_classifiers``).
        hidden_size, dropout: of the head (jiant's MRPC default: 256, 0.2). For few labels (a 10%
            cell's 367 MRPC pairs) a smaller width is the setting to try, not a rate tuned per cell:
            64 cuts the decomp head from 560k to 54k weights and pool-mlp from 790k to 200k over 384
            features; kept at every fraction and for both arms, so a learning curve and a gap to
            the twin still compare one head (``configs/benchmarks/frozen-heads.yaml``).
        learning_rate, weight_decay: AdamW; with fine-tuning, the head's (top) rate.
        mix_learning_rate: the rate of a learned scalar mix's s and gamma, a parameter group of
            their own (no weight decay). Default 0.1: s are softmax logits whose useful range is a
            few units (a difference of 2–3 makes a layer dominate), so at the head's 1e-3 Adam
            moves them by at most ~1e-3 a step and the learned mix stays near the average; at 0.1
            it can cross that range in tens of steps. ELMo trains s and gamma with the task model (its λ‖s‖² only pulls
            toward the average); the rate is the same for a pretrained cell and its twin.
        finetune: ``frozen``, ``full`` or ``gradual`` (see the module docstring).
        lr_decay: discriminative rates: each lower encoder group's rate / ``lr_decay``.
        warmup_fraction, stlr_ratio: the slanted triangular schedule's cut_frac and ratio.
        num_classes: labels of the data set (2 for MRPC); the CLI links it from the data.
        positive_class: with 2 classes, the class id whose F1 is ``dev_f1`` and that a tie at
            P = 0.5 goes to (1 for MRPC); the CLI links it from the data.
        lm_weight: λ of the auxiliary LM loss with ``head=cls`` (GPT: 0.5; 0 ablates it).
        target, score_range: the data set's task (``classes``, or ``graded`` over (low, high));
            the CLI links both from the data.
    """

    def __init__(
        self,
        encoder: Encoder,
        mix: Mix = Mix("scalar"),  # noqa: B008 - an immutable value, shown as the default by --help
        layer_norm: bool = False,
        head: Head = "pool-mlp",
        hidden_size: int = 256,
        dropout: float = 0.2,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.0,
        mix_learning_rate: float = 0.1,
        finetune: Finetune = "frozen",
        lr_decay: float = 2.6,
        warmup_fraction: float = 0.1,
        stlr_ratio: float = 32.0,
        num_classes: int = 2,
        positive_class: int = 1,
        lm_weight: float = 0.0,
        standardize: bool | Literal["auto"] = "auto",
        target: Target = "classes",
        score_range: tuple[float, float] | None = None,
    ):
        super().__init__()
        mix = str(Mix.parse(mix))  # the hyper-parameters hold the flag's text (checkpoints load weights_only)
        standardize = resolved_standardize(standardize, finetune, head)  # and the resolved bool, never ``auto``
        if learning_rate <= 0:
            raise ValueError(f"learning_rate={learning_rate}: must be > 0")
        if mix_learning_rate <= 0:
            raise ValueError(f"mix_learning_rate={mix_learning_rate}: must be > 0")
        task = linked_task(target, score_range)
        if not task.graded and num_classes == 2 and positive_class not in (0, 1):
            raise ValueError(f"positive_class={positive_class}: with 2 classes, 0 or 1")
        self.save_hyperparameters(ignore=["encoder"], logger=False)
        self.classifier = PairClassifier(
            encoder,
            mix,
            head,
            finetune,
            layer_norm=layer_norm,
            hidden_size=hidden_size,
            dropout=dropout,
            num_classes=num_classes,
            lm_weight=lm_weight,
            standardize=standardize,
            task=task,
        )
        self.task = task
        self.train_accuracy = None  # classes only
        if task.graded:
            with warnings.catch_warnings():  # Spearman keeps the split's scores to rank them: a dev split's, by design
                warnings.filterwarnings(
                    "ignore", message=".*will save all targets and predictions", category=UserWarning
                )
                self.dev_pearson, self.dev_spearman = PearsonCorrCoef(), SpearmanCorrCoef()
        elif num_classes == 2:
            self.dev_accuracy, self.dev_f1, self.train_accuracy = BinaryAccuracy(), BinaryF1Score(), BinaryAccuracy()
        else:
            self.dev_accuracy = MulticlassAccuracy(num_classes, average="micro")
            self.dev_f1 = MulticlassF1Score(num_classes, average="macro")
            self.train_accuracy = MulticlassAccuracy(num_classes, average="micro")

    @property
    def encoder(self) -> Encoder:
        return self.classifier.encoder

    @property
    def mix(self):
        """The ``ScalarMix``, or None (``head=cls`` reads no layer mix)."""
        return self.classifier.mix

    @property
    def head(self) -> torch.nn.Module:
        return self.classifier.head

    @property
    def input_kind(self) -> str:
        """What the data module feeds: cached ``features`` (frozen), each sentence's ``tokens``
        (fine-tuning), or the ``joint`` sequences of both orders (``head=cls``)."""
        return self.classifier.input_kind

    def forward(self, inputs: FeaturePair | TokenPair | JointPair | SegmentPair) -> torch.Tensor:
        """Returns (B, C) outputs: class logits, or (B, 1) graded scores on [0, 1] (no auxiliary LM
        loss: nothing reads it outside training)."""
        return self.classifier(inputs, language_modelling=False).logits

    def batch_inputs(self, batch) -> FeaturePair | TokenPair | JointPair | SegmentPair:
        """The data module's batch ``(4 input tensors, labels, pair indices)``: its inputs, named."""
        return self.classifier.inputs(*batch[:4])

    def training_step(self, batch, batch_index):
        labels = batch[4]
        output = self.classifier(self.batch_inputs(batch))
        loss = self.classifier.loss(output, labels)
        if output.lm_loss is not None:
            self.log("train_lm_loss", output.lm_loss, batch_size=len(labels))
        self.log("train_loss", loss, prog_bar=True, batch_size=len(labels))
        if self.train_accuracy is not None:
            self.train_accuracy(self.predict_classes(output.logits.detach()), labels)
            self.log("train_acc", self.train_accuracy, on_step=False, on_epoch=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch, batch_index):
        """Dev metrics of the task: ``dev_acc`` and ``dev_f1``, or ``dev_pearson`` and ``dev_spearman``."""
        labels, outputs = batch[4], self(self.batch_inputs(batch))
        if self.task.graded:  # the correlations of the [0, 1] outputs equal those on the task's scale
            predicted = self.classifier.loss_function.readout(outputs)  # (B,)
            self.dev_pearson(predicted, labels.float())
            self.dev_spearman(predicted, labels.float())
            metrics = {"dev_pearson": self.dev_pearson, "dev_spearman": self.dev_spearman}
            self.log_dict(metrics, prog_bar=True, batch_size=len(labels))
            return
        predictions = self.predict_classes(outputs)
        self.dev_accuracy(predictions, labels)
        if self.hparams.num_classes == 2:  # binary F1 of the positive class, whichever id it has
            positive = self.hparams.positive_class
            self.dev_f1((predictions == positive).long(), (labels == positive).long())
        else:
            self.dev_f1(predictions, labels)
        self.log_dict({"dev_acc": self.dev_accuracy, "dev_f1": self.dev_f1}, prog_bar=True, batch_size=len(labels))

    def predict_classes(self, logits: torch.Tensor) -> torch.Tensor:
        """(B, C) logits → (B,) classes by the rule of the predictions files (``predicted_class``)."""
        return predicted_class(torch.softmax(logits, dim=-1), self.hparams.positive_class)

    def on_fit_start(self):
        """Fit the standardisation's statistics on the training pairs' features, once (a resumed
        or reloaded run keeps those of its checkpoint)."""
        standardizer = self.classifier.standardizer
        if standardizer is None or bool(standardizer.fitted):
            return
        data = getattr(self.trainer, "datamodule", None)
        if data is None or getattr(data, "store", None) is None:
            raise RuntimeError(
                "standardize (on by default for frozen features) needs the pair data module's "
                "feature store; standardize=False trains on the raw features"
            )
        standardizer.fit(data.store, data.train_rows())

    def on_train_epoch_end(self):
        self.log_dict(self.mix_metrics())

    def mix_metrics(self) -> dict[str, float]:
        """``mix_weight_<k>`` (after softmax) and ``mix_gamma``; none without a mix (``head=cls``)."""
        if self.mix is None:
            return {}
        weights = self.mix.weights().detach().cpu()
        metrics = {f"mix_weight_{k}": float(w) for k, w in enumerate(weights)}
        metrics["mix_gamma"] = float(self.mix.gamma.detach())
        return metrics

    @torch.no_grad()
    def predictions(self, loader) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns what the predictions files are made of over ``loader`` — class probabilities
        (N, C), or a graded task's (N,) predicted scores on [0, 1] (``Task.unscaled`` maps them
        onto its scale) — and the pair indices (N,)."""
        was_training = self.training
        self.eval()
        values, indices = [], []
        for batch in loader:
            inputs = self.batch_inputs([t.to(self.device) for t in batch[:4]])
            values.append(self.classifier.loss_function.readout(self(inputs)).cpu())
            indices.append(batch[5])
        self.train(was_training)
        return torch.cat(values), torch.cat(indices)

    def configure_optimizers(self):
        hparams = self.hparams
        fused = all(p.device.type in ("cpu", "cuda") for p in self.parameters())  # one kernel per step
        groups = self.classifier.optimizer_groups(hparams.learning_rate, hparams.lr_decay, hparams.mix_learning_rate)
        optimizer = torch.optim.AdamW(groups, lr=hparams.learning_rate, weight_decay=hparams.weight_decay, fused=fused)
        if hparams.finetune == "frozen":
            return optimizer
        total = max(1, int(self.trainer.estimated_stepping_batches))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: slanted_triangular(step, total, hparams.warmup_fraction, hparams.stlr_ratio)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)  # fused AdamW under bf16 too

    def configure_callbacks(self):
        return [GradualUnfreezing()] if self.hparams.finetune == "gradual" else []

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["encoder"] = self.encoder.record()

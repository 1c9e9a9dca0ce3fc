"""LightningModule for sentence-pair classification over any family's encoder: layer mix → pair
head → one logit per class, with the encoder frozen (cached features) or fine-tuned.

``finetune``:
- ``frozen``: the encoder is a plain attribute, outside the optimiser and the checkpoint; batches
  hold its cached per-layer features. AdamW at a constant rate.
- ``full``: the encoder's model is a submodule trained under the head, with discriminative
  learning rates (each lower parameter group's rate / ``lr_decay``, ULMFiT's 2.6) and the slanted
  triangular schedule (``warmup_fraction`` = cut_frac 0.1, ``stlr_ratio`` 32), per step.
- ``gradual``: as ``full``, plus gradual unfreezing (``downstream.finetuning.GradualUnfreezing``).
The random-init twin runs the identical procedure: only its encoder's weights differ.

``head=cls`` is the joint pair classifier of an encoder that takes a joint pair input
(``Encoder.pair_input``): GPT's (``downstream.joint``), the pair as one sequence in both orders,
fine-tuned with an auxiliary LM loss weighted by ``lm_weight`` (GPT: 0.5; 0 ablates it), or, for
bidirectional encoders, BERT's ``[CLS] s1 [SEP] s2 [SEP]`` with segment ids
(``downstream.joint_segments``).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torchmetrics.classification import (BinaryAccuracy, BinaryF1Score, MulticlassAccuracy,
                                         MulticlassF1Score)

from downstream.evaluation import predicted_class
from downstream.finetuning import GradualUnfreezing
from downstream.heads import HEAD_NAMES, build_head
from downstream.joint import JointClassifier
from downstream.joint_segments import FirstTokenClassifier
from downstream.scalar_mix import ScalarMix
from harness.errors import UserError
from harness.precision import clip_gradients
from pretrain.encoder import Encoder
from pretrain.families import FAMILIES
from harness.schedules import discriminative_groups, slanted_triangular

FINETUNE_MODES = ("frozen", "full", "gradual")
JOINT_HEAD = "cls"  # the pair as one sequence (GPT's both orders, BERT's segments), linear on one state


def joint_families() -> list[str]:
    return [name for name, family in FAMILIES.items() if family.joint_pair_input]


class LitPairClassifier(pl.LightningModule):
    """Classify sentence pairs from an encoder's per-layer features.

    Args:
        encoder: the resolved encoder (the CLI resolves ``--model.encoder`` once and passes it).
        mix: ``average``, ``scalar``, ``top`` or ``layer:K``.
        layer_norm: normalise each layer before a scalar mix (ELMo's option).
        head: ``pool-mlp``, ``bilstm``, ``dense``, ``attn``, ``concat-pool`` or ``cls`` (the joint input).
        hidden_size, dropout: of the head (jiant's MRPC default: 256, 0.2).
        mix_dropout: dropout on the mixed features (ELMo applies it to its output).
        learning_rate, weight_decay: AdamW; with fine-tuning, the head's (top) rate.
        finetune: ``frozen``, ``full`` or ``gradual`` (see the module docstring).
        lr_decay: discriminative rates: each lower encoder group's rate / ``lr_decay``.
        warmup_fraction, stlr_ratio: the slanted triangular schedule's cut_frac and ratio.
        num_classes: labels of the data set (2 for MRPC); the CLI links it from the data.
        positive_class: with 2 classes, the class id whose F1 is ``dev_f1`` and that a tie at
            P = 0.5 goes to (1 for MRPC); the CLI links it from the data.
        lm_weight: λ of the auxiliary LM loss with ``head=cls`` (GPT: 0.5).
    """

    def __init__(
        self,
        encoder: Encoder,
        mix: str = "scalar",
        layer_norm: bool = False,
        head: str = "pool-mlp",
        hidden_size: int = 256,
        dropout: float = 0.2,
        mix_dropout: float = 0.0,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.0,
        finetune: str = "frozen",
        lr_decay: float = 2.6,
        warmup_fraction: float = 0.1,
        stlr_ratio: float = 32.0,
        num_classes: int = 2,
        positive_class: int = 1,
        lm_weight: float = 0.0,
    ):
        super().__init__()
        if finetune not in FINETUNE_MODES:
            raise UserError(f"--model.finetune={finetune}: choose one of {', '.join(FINETUNE_MODES)}")
        if learning_rate <= 0:
            raise UserError(f"--model.learning_rate={learning_rate}: must be > 0")
        if num_classes < 2 or (num_classes == 2 and positive_class not in (0, 1)):
            raise UserError(f"--model.num_classes={num_classes}, --model.positive_class={positive_class}: "
                            f"need at least 2 classes and, with 2, a positive class of 0 or 1")
        self.save_hyperparameters(ignore=["encoder"], logger=False)
        self.encoder = encoder
        if finetune != "frozen":
            self.encoder_model = encoder.model.requires_grad_(True).train()  # a submodule: trained, checkpointed
        if head == JOINT_HEAD:
            pair_input = encoder.pair_input  # a capability of the family's model, not of its name
            if pair_input is None or finetune == "frozen":
                raise UserError(f"--model.head={head}: the joint pair classifier needs an encoder that takes a "
                                f"joint pair input ({', '.join(joint_families())}) and --model.finetune=full or gradual (this is "
                                f"{encoder.family}, {finetune}); other heads: {', '.join(HEAD_NAMES)}")
            if lm_weight and not hasattr(encoder.model, "next_token_nll"):
                raise UserError(f"--model.lm_weight={lm_weight}: this {encoder.family} encoder has no language-model "
                                f"head for the auxiliary loss; use --model.lm_weight=0")
            self.mix = None
            joint = FirstTokenClassifier if pair_input == "segments" else JointClassifier
            self.head = joint(encoder.dim, dropout=dropout, num_classes=num_classes)
        else:
            self.mix = ScalarMix(encoder.num_layers, mix=mix, layer_norm=layer_norm, dropout=mix_dropout)
            self.head = build_head(head, encoder.dim, hidden_size=hidden_size, dropout=dropout,
                                   num_classes=num_classes)
        self.loss = torch.nn.CrossEntropyLoss()
        if num_classes == 2:
            self.dev_accuracy, self.dev_f1, self.train_accuracy = BinaryAccuracy(), BinaryF1Score(), BinaryAccuracy()
        else:
            self.dev_accuracy = MulticlassAccuracy(num_classes, average="micro")
            self.dev_f1 = MulticlassF1Score(num_classes, average="macro")
            self.train_accuracy = MulticlassAccuracy(num_classes, average="micro")

    @property
    def input_kind(self) -> str:
        """What the data module feeds: cached ``features`` (frozen), each sentence's ``tokens``
        (fine-tuning), or the ``joint`` sequences of both orders (``head=cls``)."""
        if self.hparams.head == JOINT_HEAD:
            return "joint"
        return "features" if self.hparams.finetune == "frozen" else "tokens"

    @property
    def encoder_kind(self) -> str:
        return "random" if self.encoder.is_random else self.encoder.family

    @property
    def pretrain_run_id(self) -> str:
        """The ``pretrain_run_id`` tag: the run, ``file:<path>``, a published model's source
        (``hf:…``, ``reference:…``), or ``random`` for the control."""
        encoder = self.encoder
        if encoder.is_random:
            return "random"
        return encoder.run_id or (encoder.source if encoder.family == "hf" else f"file:{encoder.source}")

    def forward(self, inputs_a, mask_or_lengths_a, inputs_b, mask_or_lengths_b) -> torch.Tensor:
        """Both sentences' encoder inputs → (B, C) logits.

        Frozen: (L, B, T, D) features, zero at padding, and (B, T) masks. Fine-tuned: (B, T + 2) ids
        and (B,) lengths, run through the encoder here. ``head=cls``: the joint sequences of both orders.
        """
        return self.scores(inputs_a, mask_or_lengths_a, inputs_b, mask_or_lengths_b)[0]

    def scores(self, inputs_a, mask_or_lengths_a, inputs_b, mask_or_lengths_b) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, C) logits and, with ``head=cls``, the auxiliary LM loss (mean NLL per token)."""
        if self.mix is None:
            logits, lm = self.head(self.encoder.model, inputs_a, mask_or_lengths_a, inputs_b, mask_or_lengths_b)
            return logits, None if lm is None else lm["nll_forward"] / lm["count"].clamp(min=1)
        frozen = self.hparams.finetune == "frozen"
        if frozen:  # the feature store's batches: zeros at padding
            layers_a, mask_a, layers_b, mask_b = inputs_a, mask_or_lengths_a, inputs_b, mask_or_lengths_b
        else:
            layers_a, mask_a = self.encoder.features(inputs_a, mask_or_lengths_a)  # (L, B, Ta, D), (B, Ta)
            layers_b, mask_b = self.encoder.features(inputs_b, mask_or_lengths_b)  # (L, B, Tb, D), (B, Tb)
        mixed_a = self.mix(layers_a, mask_a, padding_is_zero=frozen)  # (B, Ta, D)
        mixed_b = self.mix(layers_b, mask_b, padding_is_zero=frozen)  # (B, Tb, D)
        return self.head(mixed_a, mask_a, mixed_b, mask_b), None

    def training_step(self, batch, batch_index):
        labels = batch[4]
        logits, lm_loss = self.scores(*batch[:4])
        loss = self.loss(logits, labels)
        if lm_loss is not None:
            self.log("train_lm_loss", lm_loss, batch_size=len(labels))
            loss = loss + self.hparams.lm_weight * lm_loss
        self.train_accuracy(self.predict_classes(logits.detach()), labels)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(labels))
        self.log("train_acc", self.train_accuracy, on_step=False, on_epoch=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch, batch_index):
        labels = batch[4]
        predictions = self.predict_classes(self(*batch[:4]))
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
    def probabilities(self, loader) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns class probabilities (N, C) and the pair indices (N,) over ``loader``."""
        was_training = self.training
        self.eval()
        probabilities, indices = [], []
        for batch in loader:
            inputs = [t.to(self.device) for t in batch[:4]]
            probabilities.append(torch.softmax(self(*inputs), dim=-1).cpu())
            indices.append(batch[5])
        self.train(was_training)
        return torch.cat(probabilities), torch.cat(indices)

    def head_parameters(self) -> list[torch.nn.Parameter]:
        """The mix's and the head's trainable parameters (never the encoder's)."""
        return [p for name, p in self.named_parameters() if not name.startswith("encoder_model.") and p.requires_grad]

    def configure_optimizers(self):
        hparams = self.hparams
        fused = all(p.device.type in ("cpu", "cuda") for p in self.parameters())  # one kernel per step
        if hparams.finetune == "frozen":
            return torch.optim.AdamW(self.head_parameters(), lr=hparams.learning_rate, weight_decay=hparams.weight_decay,
                                     fused=fused)
        # The head is the top of the discriminative chain; the encoder's groups follow, top to input.
        groups = discriminative_groups([*self.encoder.parameter_groups(), self.head_parameters()],
                                       hparams.learning_rate, hparams.lr_decay)
        for index, group in enumerate(groups):
            group["name"] = "head" if index == len(groups) - 1 else f"encoder-{index}"
        optimizer = torch.optim.AdamW(groups, lr=hparams.learning_rate, weight_decay=hparams.weight_decay, fused=fused)
        total = max(1, int(self.trainer.estimated_stepping_batches))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: slanted_triangular(step, total, hparams.warmup_fraction, hparams.stlr_ratio))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)  # fused AdamW under bf16 too

    def configure_callbacks(self):
        return [GradualUnfreezing()] if self.hparams.finetune == "gradual" else []

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["encoder"] = self.encoder.record()

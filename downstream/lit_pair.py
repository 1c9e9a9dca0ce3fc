"""LightningModule for MRPC on frozen biLM features: layer mix → pair head → 2 logits."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torchmetrics.classification import BinaryAccuracy, BinaryF1Score

from downstream.heads import build_head
from downstream.scalar_mix import ScalarMix
from pretrain.encoder import Encoder, load_encoder, random_encoder, resolve_run_id
from harness.errors import UserError


def resolve_encoder(encoder: str, random_like: str | None, seed: int) -> tuple[Encoder, str]:
    """Returns the frozen encoder for ``--model.encoder`` and the ``pretrain_run_id`` tag.

    ``random`` is the control: the architecture and tokenizer of ``random_like`` (default: the
    latest pretrain run) with untrained weights drawn from ``seed``.
    """
    flag = f"--model.encoder={encoder}"
    try:
        if encoder == "random":
            like = load_encoder(random_like or "latest")
            return random_encoder(like, seed), "random"
        loaded = load_encoder(encoder)
    except UserError as error:
        message = str(error).removeprefix(f"{random_like or 'latest'}: " if encoder == "random" else f"{encoder}: ")
        raise UserError(f"{flag}: {message}") from None
    run_id = resolve_run_id(loaded.source) if loaded.source.startswith("runs:/") else None
    return loaded, run_id or f"file:{loaded.source}"


class LitPairClassifier(pl.LightningModule):
    """Classify MRPC pairs from cached frozen per-layer features.

    The encoder is a plain attribute, not a submodule: it is outside the optimiser and the
    checkpoint, and training sees only its cached outputs.

    Args:
        encoder: ``runs:/<id>``, a checkpoint path, ``latest`` or ``random`` (the control).
        random_like: with ``encoder=random``, the run whose architecture to copy (default latest).
        mix: ``average``, ``scalar``, ``top`` or ``layer:K``.
        layer_norm: normalise each layer before a scalar mix (ELMo's option).
        head: ``pool-mlp``, ``bilstm``, ``dense`` or ``attn``.
        hidden_size, dropout: of the head (jiant's MRPC default: 256, 0.2).
        mix_dropout: dropout on the mixed features (ELMo applies it to its output).
        learning_rate, weight_decay: AdamW.
    """

    def __init__(
        self,
        encoder: str = "latest",
        random_like: str | None = None,
        mix: str = "scalar",
        layer_norm: bool = False,
        head: str = "pool-mlp",
        hidden_size: int = 256,
        dropout: float = 0.2,
        mix_dropout: float = 0.0,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.0,
    ):
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.encoder, self.pretrain_run_id = resolve_encoder(encoder, random_like, torch.initial_seed() % 2**31)
        self.encoder_kind = "random" if encoder == "random" else "elmo"
        self.mix = ScalarMix(self.encoder.num_layers, mix=mix, layer_norm=layer_norm, dropout=mix_dropout)
        self.head = build_head(head, self.encoder.dim, hidden_size=hidden_size, dropout=dropout)
        self.loss = torch.nn.CrossEntropyLoss()
        self.dev_accuracy, self.dev_f1 = BinaryAccuracy(), BinaryF1Score()
        self.train_accuracy = BinaryAccuracy()

    def forward(self, layers_a, mask_a, layers_b, mask_b) -> torch.Tensor:
        """(L, B, T, D) features and (B, T) masks of both sentences → (B, 2) logits."""
        mixed_a = self.mix(layers_a, mask_a)  # (B, Ta, D)
        mixed_b = self.mix(layers_b, mask_b)  # (B, Tb, D)
        return self.head(mixed_a, mask_a, mixed_b, mask_b)

    def training_step(self, batch, batch_index):
        layers_a, mask_a, layers_b, mask_b, labels, _ = batch
        logits = self(layers_a, mask_a, layers_b, mask_b)
        loss = self.loss(logits, labels)
        self.train_accuracy(logits.argmax(-1), labels)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(labels))
        self.log("train_acc", self.train_accuracy, on_step=False, on_epoch=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch, batch_index):
        layers_a, mask_a, layers_b, mask_b, labels, _ = batch
        predictions = self(layers_a, mask_a, layers_b, mask_b).argmax(-1)
        self.dev_accuracy(predictions, labels)
        self.dev_f1(predictions, labels)
        self.log_dict({"dev_acc": self.dev_accuracy, "dev_f1": self.dev_f1}, prog_bar=True, batch_size=len(labels))

    def on_train_epoch_end(self):
        self.log_dict(self.mix_metrics())

    def mix_metrics(self) -> dict[str, float]:
        """``mix_weight_<k>`` (after softmax) and ``mix_gamma``."""
        weights = self.mix.weights().detach().cpu()
        metrics = {f"mix_weight_{k}": float(w) for k, w in enumerate(weights)}
        metrics["mix_gamma"] = float(self.mix.gamma.detach())
        return metrics

    @torch.no_grad()
    def probabilities(self, loader) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns P(paraphrase) (N,) and the pair indices (N,) over ``loader``."""
        was_training = self.training
        self.eval()
        probabilities, indices = [], []
        for layers_a, mask_a, layers_b, mask_b, _, pair_index in loader:
            batch = [t.to(self.device) for t in (layers_a, mask_a, layers_b, mask_b)]
            probabilities.append(torch.softmax(self(*batch), dim=-1)[:, 1].cpu())
            indices.append(pair_index)
        self.train(was_training)
        return torch.cat(probabilities), torch.cat(indices)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.learning_rate,
                                 weight_decay=self.hparams.weight_decay)

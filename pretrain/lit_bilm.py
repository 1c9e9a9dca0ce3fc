"""LightningModule around :class:`BiLM`: loss, perplexity metrics, optimiser, LM samples."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torchmetrics import SumMetric

from pretrain.models.bilm import BiLM
from pretrain.tokenize import Tokenizer


class LitBiLM(pl.LightningModule):
    """Pretrains a :class:`BiLM`. The checkpoint holds config, vocabulary and weights.

    Args:
        vocab_size: linked from the data module's tokenizer.
        hidden_size: embedding size and per-direction LSTM output H (features are D = 2H).
        cell_size: LSTM memory size; larger than ``hidden_size`` adds ELMo's projection.
        num_layers: LSTM layers per direction.
        dropout: on LSTM inputs and on the states fed to the softmax.
        softmax: ``full`` (exact) or ``adaptive``.
        adaptive_cutoffs: cluster boundaries of the adaptive softmax (frequency ranks).
        tie_weights: share the embedding and full-softmax matrices.
        learning_rate, weight_decay: AdamW.
        plateau_patience: halve the learning rate after this many validations without a
            better ``val_ppl`` (None: constant learning rate).
    """

    def __init__(
        self,
        vocab_size: int = 0,
        hidden_size: int = 256,
        cell_size: int | None = None,
        num_layers: int = 2,
        dropout: float = 0.1,
        softmax: str = "full",
        adaptive_cutoffs: tuple[int, ...] = (2000, 8000),
        tie_weights: bool = False,
        learning_rate: float = 2e-3,
        weight_decay: float = 0.01,
        plateau_patience: int | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.model = BiLM(vocab_size, hidden_size, cell_size, num_layers, dropout, softmax,
                          tuple(adaptive_cutoffs), tie_weights)
        self.tokenizer: Tokenizer | None = None
        self.validation_sums = torch.nn.ModuleDict(
            {name: SumMetric() for name in ("nll_forward", "nll_backward", "count")}
        )

    def bilm_config(self) -> dict:
        """The constructor arguments of the wrapped :class:`BiLM`."""
        keys = ("vocab_size", "hidden_size", "cell_size", "num_layers", "dropout", "softmax",
                "adaptive_cutoffs", "tie_weights")
        return {key: self.hparams[key] for key in keys}

    def training_step(self, batch, batch_index):
        token_ids, lengths = batch
        sums = self.model(token_ids, lengths)
        loss = (sums["nll_forward"] + sums["nll_backward"]) / (2 * sums["count"])
        self.log("train_loss", loss, prog_bar=True, batch_size=len(lengths))
        self.last_train_loss = loss.detach()
        return loss

    def on_train_epoch_end(self):
        # Steps reach the logger every `log_every_n_steps`; an epoch's last step always does,
        # so even a run shorter than that interval has its train_loss.
        if self.logger is not None and hasattr(self, "last_train_loss"):
            self.logger.log_metrics({"train_loss": float(self.last_train_loss)}, step=self.global_step - 1)

    def validation_step(self, batch, batch_index):
        token_ids, lengths = batch
        sums = self.model(token_ids, lengths)
        for name, metric in self.validation_sums.items():
            metric.update(sums[name].float())

    def on_validation_epoch_end(self):
        totals = {name: metric.compute() for name, metric in self.validation_sums.items()}
        for metric in self.validation_sums.values():
            metric.reset()
        self.log_dict(perplexities(totals), prog_bar=True)

    @torch.no_grad()
    def evaluate(self, loader) -> dict[str, float]:
        """Perplexities of the current weights over ``loader`` (used on the best checkpoint)."""
        was_training = self.training
        self.eval()
        totals = {"nll_forward": 0.0, "nll_backward": 0.0, "count": 0}
        for token_ids, lengths in loader:
            sums = self.model(token_ids.to(self.device), lengths.to(self.device))
            for name in totals:
                totals[name] += float(sums[name])
        self.train(was_training)
        return {name: float(value) for name, value in perplexities(
            {name: torch.tensor(value, dtype=torch.float64) for name, value in totals.items()}).items()}

    def configure_optimizers(self):
        fused = all(p.device.type in ("cpu", "cuda") for p in self.parameters())
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.learning_rate,
                                      weight_decay=self.hparams.weight_decay, fused=fused)
        if self.hparams.plateau_patience is None:
            return optimizer
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=0.5, patience=self.hparams.plateau_patience)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "monitor": "val_ppl", "interval": "epoch"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["tokenizer"] = self.tokenizer.to_dict()
        checkpoint["bilm_config"] = self.bilm_config()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.tokenizer = Tokenizer.from_dict(checkpoint["tokenizer"])


def perplexities(totals: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """exp of the mean NLL over real tokens: both directions (``val_ppl``) and each one."""
    count = totals["count"].clamp(min=1)
    forward, backward = totals["nll_forward"] / count, totals["nll_backward"] / count
    return {"val_ppl": torch.exp((forward + backward) / 2),
            "val_ppl_fwd": torch.exp(forward), "val_ppl_bwd": torch.exp(backward)}

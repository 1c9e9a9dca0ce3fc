"""Callbacks of the pretraining run: LM samples, and the encoder export at the end of fit."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytorch_lightning as pl
import torch

from harness.atomic import atomic_torch_save
from harness.digests import record_digest
from harness.training.checkpoints import read_best
from pretrain.encoders.checkpoints import slim_checkpoint
from pretrain.encoders.loading import CHECKPOINT_ARTIFACT


class LanguageModelSamples(pl.Callback):
    """Every ``every_n_steps`` training steps, write target / forward / backward predictions
    for a few held-out sentences as a text artifact ``samples/step_XXXXXX.txt`` (and print the
    first), the way the seed tutorial showed what the biLM had learned."""

    def __init__(self, every_n_steps: int = 500, sentences: int = 3):
        self.every_n_steps = every_n_steps
        self.sentences = sentences

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_index):
        step = trainer.global_step
        if self.every_n_steps <= 0 or step % self.every_n_steps or not trainer.is_global_zero:
            return
        self.write(trainer, pl_module, step)

    def on_train_end(self, trainer, pl_module):
        if self.every_n_steps > 0 and trainer.is_global_zero:
            self.write(trainer, pl_module, trainer.global_step)

    @staticmethod
    def render(tokenizer, token_ids: torch.Tensor, forward: torch.Tensor, backward: torch.Tensor | None) -> str:
        """Three aligned lines for one sentence of ``length`` real tokens: the targets, the
        forward prediction of each (from the state before it) and the backward prediction of
        each (from the state after it)."""
        words = tokenizer.decode(token_ids.tolist())
        lines = ["tgt: " + " ".join(words), "fwd: " + " ".join(["·", *tokenizer.decode(forward[:-1].tolist())])]
        if backward is not None:
            lines.append("bwd: " + " ".join([*tokenizer.decode(backward[1:].tolist()), "·"]))
        return "\n".join(lines)

    def write(self, trainer, pl_module, step: int) -> None:
        datamodule = trainer.datamodule
        if datamodule is None or pl_module.tokenizer is None:
            return
        sequences = datamodule.validation_ids[: self.sentences]
        lengths = torch.tensor([len(s) for s in sequences], device=pl_module.device)
        token_ids = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True).to(pl_module.device)
        was_training = pl_module.training
        pl_module.eval()
        predicted = pl_module.model.predict(token_ids, lengths)  # (B, T) per direction
        predicted = predicted if isinstance(predicted, tuple) else (predicted,)
        forward, backward = predicted[0], predicted[1] if len(predicted) > 1 else None
        pl_module.train(was_training)
        blocks = [
            self.render(
                pl_module.tokenizer, token_ids[b, :n], forward[b, :n], None if backward is None else backward[b, :n]
            )
            for b, n in enumerate(lengths.tolist())
        ]
        text = f"step {step}\n\n" + "\n\n".join(blocks) + "\n"
        logger = trainer.logger
        if logger is not None and hasattr(logger, "run_id"):
            logger.experiment.log_text(logger.run_id, text, f"samples/step_{step:06d}.txt")


def best_metrics(results: dict[str, float]) -> dict[str, float]:
    """The best checkpoint's numbers under their own keys: ``val_ppl*`` → ``best_val_ppl*`` (the
    ``val_ppl`` curve keeps only the per-epoch values, so it never ends in a re-logged spike)."""
    return {f"best_{key}" if key.startswith("val_ppl") else key: value for key, value in results.items()}


class ExportEncoder(pl.Callback):
    """At the end of fit (before the run is closed): reload the best checkpoint, recompute the
    held-out perplexities on it and log them as ``best_val_ppl*`` (at the best checkpoint's step),
    then log a slim self-describing checkpoint (``checkpoint/encoder.ckpt``: family, config,
    tokenizer, weights, no optimiser state) with its sha256 as the param ``checkpoint_sha256``, and
    ``vocab.txt``. The slim file is written to the run's own checkpoint folder ``directory``; the
    best checkpoint is read from there only, without running pickled code (``weights_only``). Any
    failure here fails the run."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.started = time.perf_counter()
        self.results: dict[str, float] = {}
        self.best_path: str | None = None

    def on_fit_start(self, trainer, pl_module):
        self.started = time.perf_counter()

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        seconds = time.perf_counter() - self.started
        checkpoint_callback = trainer.checkpoint_callback
        best = checkpoint_callback.best_model_path if checkpoint_callback else ""
        if best:
            checkpoint = read_best(best, Path(checkpoint_callback.dirpath or self.directory))
            pl_module.load_state_dict(checkpoint["state_dict"])
        else:  # no validation ran: export the last weights
            checkpoint = {
                "state_dict": pl_module.state_dict(),
                "hyper_parameters": dict(pl_module.hparams),
                "epoch": trainer.current_epoch,
                "global_step": trainer.global_step,
            }
            pl_module.on_save_checkpoint(checkpoint)
        self.results = pl_module.evaluate(trainer.datamodule.val_dataloader())
        self.results.update(train_seconds=seconds, best_epoch=float(checkpoint.get("epoch", trainer.current_epoch)))
        logger = trainer.logger
        logger.log_metrics(best_metrics(self.results), step=int(checkpoint.get("global_step", trainer.global_step)))
        self.directory.mkdir(parents=True, exist_ok=True)
        slim_path = self.directory / os.path.basename(CHECKPOINT_ARTIFACT)
        atomic_torch_save(slim_checkpoint(checkpoint, best or "the trained model"), slim_path)
        self.best_path = str(slim_path)
        record_digest(logger.experiment, logger.run_id, slim_path)  # what every later download is checked against
        logger.experiment.log_artifact(logger.run_id, str(slim_path), os.path.dirname(CHECKPOINT_ARTIFACT))
        vocab = "\n".join(pl_module.tokenizer.vocab) + "\n"
        logger.experiment.log_text(logger.run_id, vocab, "vocab.txt")

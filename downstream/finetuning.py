"""Fine-tuning schedule pieces that live outside the LightningModule: gradual unfreezing, and
reloading a finetune checkpoint on its own."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch

from harness.training_checkpoints import RESUME_STATE_KEY
from harness.digests import check_run_checkpoint
from harness.errors import UserError


class GradualUnfreezing(pl.Callback):
    """ULMFiT's gradual unfreezing (Howard & Ruder 2018, §3.3): the first epoch trains the head
    only; each later epoch unfreezes the next encoder parameter group from the top, until all
    are trainable. Frozen groups get no gradient (``requires_grad=False``); the optimiser holds
    every group from the start and skips those without gradients."""

    def on_train_epoch_start(self, trainer, pl_module):
        groups = pl_module.encoder.parameter_groups()  # input → top
        unfrozen = min(len(groups), trainer.current_epoch)
        for depth, group in enumerate(reversed(groups)):  # depth 0 = the top group
            for parameter in group:
                parameter.requires_grad_(depth < unfrozen)
        pl_module.log("unfrozen_groups", float(unfrozen), on_step=False, on_epoch=True)


def load_classifier(path: str | Path, map_location: str = "cpu"):
    """A finetune checkpoint, reloaded on its own: the encoder it recorded is rebuilt — from the
    checkpoint's own weights when the encoder was fine-tuned, else from the recorded pretrain run
    (or the random twin's seed), checked by fingerprint — then the classifier's weights. A run's
    ``best.ckpt`` must match the sha256 its run recorded (when the store has that run).

    Returns:
        ``LitPairClassifier`` in eval mode.
    """
    from downstream.lit_pair import LitPairClassifier
    from pretrain.runs import encoder_from_record

    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        record, finetune = checkpoint["encoder"], checkpoint["hyper_parameters"]["finetune"]
    except (OSError, RuntimeError, KeyError, TypeError) as error:
        raise UserError(f"{path}: not a finetune checkpoint of `python -m downstream` ({type(error).__name__})") from None
    state = (checkpoint.get("callbacks") or {}).get(RESUME_STATE_KEY)
    check_run_checkpoint(path, state.get("run_id") if isinstance(state, dict) else None)
    encoder = encoder_from_record(record, weights=finetune == "frozen")
    model = LitPairClassifier.load_from_checkpoint(path, map_location=map_location, weights_only=True, encoder=encoder)
    return model.eval()

"""Reloading a finetune checkpoint on its own: the encoder it recorded, then the classifier."""

from __future__ import annotations

from pathlib import Path

import torch

from downstream.run.lit_pair import LitPairClassifier
from harness.digests import check_run_checkpoint
from harness.errors import UserError
from harness.training.checkpoints import RESUME_STATE_KEY
from pretrain.encoders.loading import encoder_from_record


def load_classifier(path: str | Path, map_location: str = "cpu") -> LitPairClassifier:
    """A finetune checkpoint, reloaded on its own: the encoder it recorded is rebuilt — from the
    checkpoint's own weights when the encoder was fine-tuned, else from the recorded pretrain run
    (or the random twin's seed), checked by fingerprint — then the classifier's weights. A run's
    ``best.ckpt`` must match the sha256 its run recorded (when the store has that run).

    Returns:
        ``LitPairClassifier`` in eval mode.
    """
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        record, finetune = checkpoint["encoder"], checkpoint["hyper_parameters"]["finetune"]
    except (OSError, RuntimeError, KeyError, TypeError) as error:
        raise UserError(
            f"{path}: not a finetune checkpoint of `python -m downstream` ({type(error).__name__})"
        ) from None
    state = (checkpoint.get("callbacks") or {}).get(RESUME_STATE_KEY)
    check_run_checkpoint(path, state.get("run_id") if isinstance(state, dict) else None)
    encoder = encoder_from_record(record, weights=finetune == "frozen")
    try:
        model = LitPairClassifier.load_from_checkpoint(
            path, map_location=map_location, weights_only=True, encoder=encoder
        )
    except (TypeError, RuntimeError) as error:  # arguments or weights of another version of the classifier
        raise UserError(
            f"{path}: a finetune checkpoint this version cannot rebuild ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:160]}); fine-tune again with this version"
        ) from None
    return model.eval()

"""ULMFiT's gradual unfreezing as a Lightning callback."""

from __future__ import annotations

import pytorch_lightning as pl


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

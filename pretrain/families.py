"""The language-model families: one :class:`Family` entry each, stating what the family is and
what it can do. Checkpoints, encoder loading, the CLIs, the benchmarks and the tests read this
registry; a new family is its own model file, its LightningModule, its configs and one entry here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from harness.errors import UserError
from pretrain import hf_model
from pretrain.models import awd_lstm, bilm, transformer
from pretrain.models.objectives import Objective


@dataclass(frozen=True)
class Family:
    """One language-model family.

    Args:
        name: the ``family`` tag, the checkpoint's family and ``latest:<name>``'s.
        short_name: the pretrain run's ``model`` tag.
        model: the torch-only ``nn.Module`` (see ``pretrain.models``); its ``objective`` says what
            it predicts.
        tokenizer: the tokenizer kind it is built for (``word`` or ``subword``).
        lightning_module: the class path of its LightningModule, as a config's
            ``model: class_path:`` names it.
        flops: ``flops(model, token_ids, lengths)`` → the useful forward FLOPs of a batch.
        tiny: constructor arguments of a test-size model (``vocab_size`` comes from the tokenizer).
        joint_pair_input: whether the model reads a sentence pair as one joint sequence
            (``hidden_states``; ``next_token_nll`` for GPT's auxiliary LM loss; the model's
            ``pair_input`` says which joint input, GPT's by default), the ``cls`` head.
        pretrained_here: whether this harness pretrains it (``python -m pretrain``); ``hf`` loads
            published models instead (``--model.encoder=hf:<folder>``, ``pretrain.hf_encoder``).
    """

    name: str
    short_name: str
    model: type[nn.Module]
    tokenizer: str
    lightning_module: str
    flops: Callable[[nn.Module, Tensor, Tensor], float]
    tiny: dict[str, Any] = field(default_factory=dict)
    joint_pair_input: bool = False
    pretrained_here: bool = True

    @property
    def objective(self) -> Objective:
        return self.model.objective

    def lightning_class(self) -> type:
        """The LightningModule class (imported on use: LightningModules sit above this registry)."""
        module_name, _, name = self.lightning_module.rpartition(".")
        return getattr(importlib.import_module(module_name), name)


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add a family to the registry (a name may be registered once)."""
    if family.name in FAMILIES:
        raise ValueError(f"family {family.name!r} is already registered")
    FAMILIES[family.name] = family
    return family


def family_of(name: str) -> Family:
    """The registered family called ``name``; a one-line error naming the known ones otherwise."""
    if name not in FAMILIES:
        raise UserError(f"unknown family {name!r}; this version knows {', '.join(FAMILIES)}")
    return FAMILIES[name]


def family_names() -> list[str]:
    return list(FAMILIES)


def pretrained_families() -> list[str]:
    """The families ``python -m pretrain`` trains (every one but ``hf``)."""
    return [name for name, family in FAMILIES.items() if family.pretrained_here]


def family_of_lightning_module(class_path: str) -> Family:
    """The family whose LightningModule is ``class_path`` (a config's ``model: class_path:``)."""
    for family in FAMILIES.values():
        if family.lightning_module == class_path:
            return family
    raise UserError(f"model: class_path: {class_path}: not the LightningModule of a registered family "
                    f"({', '.join(f.lightning_module for f in FAMILIES.values())})")


register(Family("elmo", "bilm", bilm.BiLM, "word", "pretrain.lit_bilm.LitBiLM", bilm.forward_flops,
                tiny={"hidden_size": 6, "num_layers": 2, "dropout": 0.0}))
register(Family("ulmfit", "awd", awd_lstm.AWDLSTM, "word", "pretrain.lit_awd_lstm.LitAWDLSTM", awd_lstm.forward_flops,
                tiny={"embedding_size": 6, "hidden_size": 10, "num_layers": 2}))
register(Family("gpt", "gpt", transformer.TransformerLM, "subword", "pretrain.lit_gpt.LitGPT",
                transformer.forward_flops, joint_pair_input=True,
                tiny={"num_layers": 2, "hidden_size": 8, "num_heads": 2, "max_positions": 64}))
register(Family("hf", "hf", hf_model.HFModel, "hf", "", hf_model.forward_flops, joint_pair_input=True,
                pretrained_here=False))

"""The language-model families: one :class:`Family` entry each, stating what the family is and
what it can do. Checkpoints, encoder loading, the CLIs, the benchmarks and the tests read this
registry; a new family is its own model file, its LightningModule, its configs and one entry here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from torch import nn

from harness.errors import UserError
from pretrain.models import awd_lstm, bilm, transformer
from pretrain.models import hf as hf_model
from pretrain.models.config import ModelConfig
from pretrain.models.objectives import Objective

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "pretrain"  # a shipped family's <name>.yaml
FIRST_FORMAT_FAMILY = "elmo"  # of the runs and checkpoints made before families (no family tag, bilm.ckpt)


@dataclass(frozen=True)
class Family:
    """One language-model family.

    Args:
        name: the ``family`` tag, the checkpoint's family and ``latest:<name>``'s.
        short_name: the pretrain run's ``model`` tag.
        model: the torch-only ``nn.Module`` (see ``pretrain.models``), built from one ``config``;
            its ``objective`` says what it predicts.
        config: its config dataclass (a :class:`ModelConfig`): the model's, the LightningModule's
            arguments and the checkpoint's ``model_config`` (None for ``hf``: a published model
            brings its own).
        tokenizer: the tokenizer kind it is built for (``word`` or ``subword``).
        lightning_module: the class path of its LightningModule, as a config's
            ``model: class_path:`` names it.
        flops: ``flops(model, token_ids, lengths, softmax=True)`` → the useful forward FLOPs of a
            batch (``softmax=False``: of its per-layer features alone, without the LM's output layer).
        tiny: a test-size config (``vocab_size`` comes from the tokenizer).
        joint_pair_input: whether the model reads a sentence pair as one joint sequence
            (``hidden_states``; ``next_token_nll`` for GPT's auxiliary LM loss; the model's
            ``pair_input`` says which joint input, GPT's by default), the ``cls`` head.
        pretrained_here: whether this harness pretrains it (``python -m pretrain``); ``hf`` loads
            published models instead (``--model.encoder=hf:<folder>``, ``pretrain.encoders.hf.encoder``).
        config_file: its CPU pretrain config, whose ``model: class_path:`` is its LightningModule
            (the speed probes build it from there); default ``configs/pretrain/<name>.yaml``.
    """

    name: str
    short_name: str
    model: type[nn.Module]
    tokenizer: str
    lightning_module: str
    flops: Callable[..., float]  # (model, token_ids, lengths, softmax=True)
    config: type[ModelConfig] | None = None
    tiny: ModelConfig | None = None
    joint_pair_input: bool = False
    pretrained_here: bool = True
    config_file: Path | None = None

    @property
    def objective(self) -> Objective:
        return self.model.objective

    def build(self, config: ModelConfig | dict[str, Any]) -> nn.Module:
        """The model of a config, or of a checkpoint's ``model_config`` dict."""
        return self.model(config if isinstance(config, ModelConfig) else self.config.from_dict(config))

    @property
    def pretrain_config(self) -> Path:
        return self.config_file or CONFIGS / f"{self.name}.yaml"

    def tiny_config(self, vocab_size: int) -> ModelConfig:
        return replace(self.tiny, vocab_size=vocab_size)

    def config_from(self, arguments: dict[str, Any], vocab_size: int) -> ModelConfig:
        """The config in a LightningModule's arguments (the rest, e.g. the optimiser's, is left)."""
        names = {field.name for field in fields(self.config)}
        return self.config.from_dict({**{k: v for k, v in arguments.items() if k in names}, "vocab_size": vocab_size})

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


def family_of_config(config: dict[str, Any], default: str) -> tuple[Family, dict[str, Any]]:
    """The family a pretrain YAML config trains (its ``model: class_path:``, else ``default``) and
    the LightningModule's arguments there (under ``init_args`` or directly under ``model``)."""
    section = dict(config.get("model") or {})
    class_path = section.pop("class_path", None)
    family = family_of_lightning_module(class_path) if class_path else family_of(default)
    return family, {**section.pop("init_args", {}), **section}


def family_of_lightning_module(class_path: str) -> Family:
    """The family whose LightningModule is ``class_path`` (a config's ``model: class_path:``)."""
    for family in FAMILIES.values():
        if family.lightning_module == class_path:
            return family
    raise UserError(
        f"model: class_path: {class_path}: not the LightningModule of a registered family "
        f"({', '.join(f.lightning_module for f in FAMILIES.values())})"
    )


register(
    Family(
        name="elmo",
        short_name="bilm",
        model=bilm.BiLM,
        config=bilm.BiLMConfig,
        tokenizer="word",
        lightning_module="pretrain.lit_bilm.LitBiLM",
        flops=bilm.forward_flops,
        tiny=bilm.BiLMConfig(hidden_size=6, num_layers=2, dropout=0.0),
    )
)
register(
    Family(
        name="ulmfit",
        short_name="awd",
        model=awd_lstm.AWDLSTM,
        config=awd_lstm.AWDLSTMConfig,
        tokenizer="word",
        lightning_module="pretrain.lit_awd_lstm.LitAWDLSTM",
        flops=awd_lstm.forward_flops,
        tiny=awd_lstm.AWDLSTMConfig(embedding_size=6, hidden_size=10, num_layers=2),
    )
)
register(
    Family(
        name="gpt",
        short_name="gpt",
        model=transformer.TransformerLM,
        config=transformer.TransformerConfig,
        tokenizer="subword",
        lightning_module="pretrain.lit_gpt.LitGPT",
        flops=transformer.forward_flops,
        tiny=transformer.TransformerConfig(num_layers=2, hidden_size=8, num_heads=2, max_positions=64),
        joint_pair_input=True,
    )
)
register(
    Family(
        name="hf",
        short_name="hf",
        model=hf_model.HFModel,
        tokenizer="hf",
        lightning_module="",
        flops=hf_model.forward_flops,
        joint_pair_input=True,
        pretrained_here=False,
    )
)

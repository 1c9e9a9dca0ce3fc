"""The base of every family's model config: one frozen dataclass per family (as nanoGPT's
``GPTConfig``) that the ``nn.Module`` is built from, its LightningModule takes as arguments and
its checkpoint stores as ``model_config``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

ConfigType = TypeVar("ConfigType", bound="ModelConfig")


@dataclass(frozen=True)
class ModelConfig:
    """A model's architecture as plain JSON values.

    Args:
        vocab_size: linked from the data module's tokenizer.
    """

    vocab_size: int = 0

    @classmethod
    def from_dict(cls: type[ConfigType], values: dict[str, Any]) -> ConfigType:
        """The config a checkpoint stored (lists back to tuples); keys it lacks take their defaults.

        Raises:
            ValueError: naming keys this config does not have.
        """
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{cls.__name__} has no {', '.join(unknown)} (it has {', '.join(sorted(known))})")
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in values.items()})

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON values (tuples as lists), as checkpoints and run params hold it."""
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}

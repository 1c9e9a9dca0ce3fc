"""The values of the transfer stage's settings, each parsed in one place: the flags
(``--model.mix``, ``--model.head``, ``--model.finetune``) and a benchmark matrix's ``mixes:``,
``heads:`` and transfers go through these types, so a typo is refused where it is written.

``Head`` and ``Finetune`` are ``Literal``s, so ``--help`` lists their choices; ``Mix`` parses
``layer:K`` too (the CLI registers it with jsonargparse) and prints back as the flag value.
"""

from __future__ import annotations

from typing import Literal, get_args

from downstream.model.heads import HEADS

JOINT_HEAD = "cls"  # GPT's own classifier over the joint pair sequence (downstream.model.joint_classifiers)
HEAD_NAMES = (*HEADS, JOINT_HEAD)
Head = Literal[HEAD_NAMES]
Finetune = Literal["frozen", "full", "gradual"]
FINETUNE_MODES = get_args(Finetune)
MIX_KINDS = ("average", "scalar", "top")  # and layer:K


def _shown(value) -> str:
    """``value`` as it can appear inside a one-line message."""
    text = str(value)
    return text if text.isprintable() else repr(text)


class Mix:
    """A layer mix: ``average`` (fixed equal weights), ``scalar`` (learned), ``top`` (the last
    layer) or ``layer:K`` (layer K alone; 0 = the token embedding).

    ``str(mix)`` is the flag value; :meth:`layer_index` checks it against an encoder's L layers.
    """

    __slots__ = ("kind", "layer")

    def __init__(self, kind: Literal["average", "scalar", "top", "layer"], layer: int | None = None):
        if (kind == "layer") != (layer is not None) or kind not in (*MIX_KINDS, "layer"):
            raise ValueError(f"not a mix: kind={kind!r}, layer={layer!r}")
        self.kind, self.layer = kind, layer

    @classmethod
    def parse(cls, text: str | Mix) -> Mix:
        """``average``, ``scalar``, ``top`` or ``layer:K`` (K a whole number ≥ 0) → :class:`Mix`.

        Raises:
            ValueError: naming the text and what would work.
        """
        if isinstance(text, Mix):
            return text
        name = text.strip() if isinstance(text, str) else text
        if name in MIX_KINDS:
            return cls(name)
        if isinstance(name, str) and name.startswith("layer:"):
            index = name[len("layer:") :]
            if not index.isdigit():
                raise ValueError(
                    f"mix={_shown(text)}: K in layer:K must be a whole number ≥ 0 (layer:0 is the token embedding)"
                )
            return cls("layer", int(index))
        raise ValueError(f"mix={_shown(text)}: unknown mix; choose average, scalar, top or layer:K")

    def layer_index(self, num_layers: int) -> int | None:
        """The one layer this mix takes from an encoder of L = ``num_layers`` layers (``top``:
        L - 1), or None for a mix of all layers.

        Raises:
            ValueError: for ``layer:K`` with K ≥ L, naming the layers there are.
        """
        if self.kind == "top":
            return num_layers - 1
        if self.kind == "layer" and self.layer >= num_layers:
            last = num_layers - 1
            raise ValueError(
                f"mix={self}: the encoder has layers 0..{last} (L={num_layers}); use layer:0 .. layer:{last}"
            )
        return self.layer

    @property
    def trainable(self) -> bool:
        """Whether the layer weights and γ are learned (only ``scalar``)."""
        return self.kind == "scalar"

    @property
    def single_layer(self) -> bool:
        return self.kind in ("top", "layer")

    def __str__(self) -> str:
        return f"layer:{self.layer}" if self.kind == "layer" else self.kind

    def __repr__(self) -> str:
        return f"Mix({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Mix) and (self.kind, self.layer) == (other.kind, other.layer)

    def __hash__(self) -> int:
        return hash((self.kind, self.layer))


def parse_head(name: str) -> str:
    """A ``--model.head`` value, checked. Raises ValueError naming the choices."""
    if name not in HEAD_NAMES:
        raise ValueError(f"head={_shown(name)}: unknown head; choose one of {', '.join(HEAD_NAMES)}")
    return name


def parse_finetune(mode: str) -> str:
    """A ``--model.finetune`` value, checked. Raises ValueError naming the choices."""
    if mode not in FINETUNE_MODES:
        raise ValueError(f"finetune={_shown(mode)}: choose one of {', '.join(FINETUNE_MODES)}")
    return mode

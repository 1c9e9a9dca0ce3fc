"""What a language model is trained to predict, and so which context each of its features may see.

A family's model names its :class:`Objective`; the pretraining loop, the memory probe and the
encoder protocol read it instead of assuming directions. ``forward`` returns one NLL sum per
term (``nll_<term>``) and ``count``, the predictions per term.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Objective:
    """A language-model objective.

    Args:
        name: ``left-to-right``, ``bidirectional-lm``; other kinds (``masked``) name their own.
        directions: the encoder protocol's feature halves, in feature order: ``forward`` sees
            tokens up to t, ``backward`` tokens from t on (a masked LM would say ``bidirectional``).
        terms: the prediction tasks ``forward`` sums, each as ``nll_<term>``.
        metric_names: each term's short name in the perplexity metrics (``val_ppl_<name>``).
    """

    name: str
    directions: tuple[str, ...]
    terms: tuple[str, ...]
    metric_names: tuple[str, ...]

    @property
    def nll_keys(self) -> tuple[str, ...]:
        return tuple(f"nll_{term}" for term in self.terms)

    def mean_nll(self, sums: dict[str, torch.Tensor]) -> torch.Tensor:
        """The mean NLL per prediction over every term (the training loss before regularisation)."""
        total = sum(sums[key] for key in self.nll_keys)
        return total / (len(self.terms) * sums["count"].clamp(min=1))


LEFT_TO_RIGHT = Objective("left-to-right", directions=("forward",), terms=("forward",), metric_names=("fwd",))
BIDIRECTIONAL_LM = Objective(
    "bidirectional-lm", directions=("forward", "backward"), terms=("forward", "backward"), metric_names=("fwd", "bwd")
)

"""The joint pair classifiers: the pair read as one sequence by the encoder itself.

- ``JointClassifier``, GPT's (Radford et al. 2018, §3.3): ``<s> s1 <delim> s2 <cls>`` in both
  orders for a symmetric task; the top states at the two ``<cls>`` tokens are added and a linear
  layer classifies them. The same pass gives the language-model loss of both sequences, which
  fine-tuning adds with weight λ (``--model.lm_weight``).
- ``FirstTokenClassifier``, BERT's (Devlin et al. 2019, §4.1): ``[CLS] s1 [SEP] s2 [SEP]`` with
  segment ids, one order, a linear layer on the top state of the first token
  (``downstream.joint_segments`` makes its batches).

Shapes: B batch, T tokens of the joint sequence, H hidden, C classes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class JointClassifier(nn.Module):
    """Dropout + linear on the sum of the two orders' final ``<cls>`` states."""

    def __init__(self, hidden_size: int, dropout: float = 0.1, num_classes: int = 2):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, num_classes)

    def forward(self, language_model: nn.Module, ids_ab: Tensor, lengths_ab: Tensor, ids_ba: Tensor,
                lengths_ba: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Args: the transformer LM; (B, T) ids and (B,) lengths of ``s1 → s2`` and ``s2 → s1``.

        Returns:
            (B, C) logits, and the LM loss sums of both sequences (``nll_forward``, ``count``); None
            for a model without a language-model head (a published decoder loaded as ``AutoModel``).
        """
        has_lm = hasattr(language_model, "next_token_nll")
        cls_states, lm = [], {"nll_forward": 0.0, "count": 0}
        for ids, lengths in ((ids_ab, lengths_ab), (ids_ba, lengths_ba)):
            hidden = language_model.hidden_states(ids, lengths)  # (B, T, H)
            last = (lengths - 1).to(hidden.device)  # (B,): the <cls> token closes every sequence
            cls_states.append(hidden[torch.arange(len(lengths), device=hidden.device), last])  # (B, H)
            if has_lm:
                sums = language_model.next_token_nll(hidden, ids, lengths)
                lm = {name: lm[name] + sums[name] for name in lm}
        logits = self.linear(self.dropout(cls_states[0] + cls_states[1]))  # (B, H) -> (B, C)
        return logits, lm if has_lm else None


class FirstTokenClassifier(nn.Module):
    """Dropout + linear on the top state of the joint sequence's first token (``[CLS]``)."""

    def __init__(self, hidden_size: int, dropout: float = 0.1, num_classes: int = 2):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, num_classes)

    def forward(self, model: nn.Module, ids: Tensor, lengths: Tensor, segments: Tensor,
                _lengths: Tensor | None = None) -> tuple[Tensor, None]:
        """Args: the encoder's model, (B, T) ids, (B,) lengths, (B, T) segment ids.

        Returns:
            (B, C) logits, and None (no language-model loss).
        """
        hidden = model.hidden_states(ids, lengths, segments)  # (B, T, H)
        return self.linear(self.dropout(hidden[:, 0])), None  # (B, H) -> (B, C)

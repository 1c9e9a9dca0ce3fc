"""GPT's pair classifier (Radford et al. 2018, §3.3): both sentences in one sequence,
``<s> s1 <delim> s2 <cls>``, in both orders for a symmetric task; the top states at the two
``<cls>`` tokens are added and a linear layer classifies them. The same pass gives the language
-model loss of both sequences, which fine-tuning adds with weight λ (``--model.lm_weight``).

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

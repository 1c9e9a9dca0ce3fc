"""The joint pair classifiers: the pair read as one sequence by the encoder itself.

- ``JointClassifier``, GPT's (Radford et al. 2018, §3.3): ``<s> s1 <delim> s2 <cls>`` in both
  orders for a symmetric task; the top states at the two ``<cls>`` tokens are added and a linear
  layer classifies them. The same pass gives the language-model loss of both sequences, which
  fine-tuning adds with weight λ (``--model.lm_weight``).
- ``FirstTokenClassifier``, BERT's (Devlin et al. 2019, §4.1): ``[CLS] s1 [SEP] s2 [SEP]`` with
  segment ids, one order, a linear layer on the top state of the first token
  (``downstream.data.joint_segments`` makes its batches).

Without dropout (evaluation: the dev pass of every epoch, the final dev and test predictions) both
orders of a batch run as one batch of 2B sequences, one pass through the model whose top states
give both the ``<cls>`` states and the LM loss; same logits and loss as one pass per order, at
float rounding (``tests/downstream/test_joint.py``). In training each order keeps its own pass,
so that dropout draws the same masks and a seeded run takes the same steps (a training step
is bound by its matmuls, so one batched pass would not save time there).

Shapes: B batch, T tokens of the joint sequence, H hidden, C outputs (one per class, or 1 for a
graded score).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class JointClassifier(nn.Module):
    """Dropout + linear on the sum of the two orders' final ``<cls>`` states."""

    def __init__(self, hidden_size: int, dropout: float = 0.1, outputs: int = 2):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, outputs)

    def forward(
        self,
        language_model: nn.Module,
        ids_ab: Tensor,
        lengths_ab: Tensor,
        ids_ba: Tensor,
        lengths_ba: Tensor,
        language_modelling: bool = True,
    ) -> tuple[Tensor, dict[str, Tensor] | None]:
        """Args: the transformer LM; (B, T) ids and (B,) lengths of ``s1 → s2`` and ``s2 → s1``;
        ``language_modelling=False`` skips the LM loss and its softmax over the vocabulary (a dev or
        test pass needs only the logits).

        Returns:
            (B, C) outputs, and the LM loss sums of both sequences (``nll_forward``, ``count``); None
            for a model without a language-model head (a published decoder loaded as ``AutoModel``)
            or without ``language_modelling``.
        """
        batch = ids_ab.size(0)
        if language_model.training:  # dropout: one pass per order, each drawing its masks in turn
            passes = [(ids_ab, lengths_ab), (ids_ba, lengths_ba)]
        else:
            passes = [both_orders(ids_ab, lengths_ab, ids_ba, lengths_ba)]  # (2B, T), (2B,)
        has_lm = language_modelling and hasattr(language_model, "next_token_nll")
        cls_states, lm = [], {"nll_forward": 0.0, "count": 0}
        for ids, lengths in passes:
            hidden = language_model.hidden_states(ids, lengths)  # (B or 2B, T, H)
            last = (lengths - 1).to(hidden.device)  # the <cls> token closes every sequence
            cls_states.append(hidden[torch.arange(len(lengths), device=hidden.device), last])  # (B or 2B, H)
            if has_lm:
                sums = language_model.next_token_nll(hidden, ids, lengths)
                lm = {name: lm[name] + sums[name] for name in lm}
        states = torch.cat(cls_states)  # (2B, H): s1 → s2 rows, then s2 → s1
        logits = self.linear(self.dropout(states[:batch] + states[batch:]))  # (B, H) -> (B, C)
        return logits, lm if has_lm else None


class FirstTokenClassifier(nn.Module):
    """Dropout + linear on the top state of the joint sequence's first token (``[CLS]``)."""

    def __init__(self, hidden_size: int, dropout: float = 0.1, outputs: int = 2):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, outputs)

    def forward(
        self,
        model: nn.Module,
        ids: Tensor,
        lengths: Tensor,
        segments: Tensor,
        _lengths: Tensor | None = None,
        language_modelling: bool = True,
    ) -> tuple[Tensor, None]:
        """Args: the encoder's model, (B, T) ids, (B,) lengths, (B, T) segment ids (``language_modelling``:
        the joint classifiers' common flag; this one has no LM loss).

        Returns:
            (B, C) outputs, and None (no language-model loss).
        """
        hidden = model.hidden_states(ids, lengths, segments)  # (B, T, H)
        return self.linear(self.dropout(hidden[:, 0])), None  # (B, H) -> (B, C)


def both_orders(ids_ab: Tensor, lengths_ab: Tensor, ids_ba: Tensor, lengths_ba: Tensor) -> tuple[Tensor, Tensor]:
    """The two orders as one batch: (B, Tab), (B,), (B, Tba), (B,) → (2B, T) ids right-padded with 0
    (T = max(Tab, Tba)) and (2B,) lengths; rows ``[:B]`` are ``s1 → s2``, ``[B:]`` ``s2 → s1``."""
    steps = max(ids_ab.size(1), ids_ba.size(1))
    padded = [torch.nn.functional.pad(ids, (0, steps - ids.size(1))) for ids in (ids_ab, ids_ba)]
    return torch.cat(padded), torch.cat([lengths_ab, lengths_ba])  # (2B, T), (2B,)

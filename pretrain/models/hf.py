"""A published model (``transformers.AutoModel``) with the surface of ``pretrain.models``: per-layer
features from ``output_hidden_states`` (the embedding output, then every block), top states for a
joint pair classifier, and parameter groups from input to top.

Direction kind, measured rather than read from the model's name: a model whose states at a
position never change when a later token changes is ``("forward",)`` (GPT-2, OPT, Llama-style
decoders); one whose states do is ``("bidirectional",)`` (BERT, RoBERTa, DistilBERT, ELECTRA).
The joint pair input follows from it: ``segments`` (``[CLS] s1 [SEP] s2 [SEP]``, classifier on the
first token) for bidirectional encoders, ``both-orders`` (GPT's, classifier on the last token) for
left-to-right ones.

Shapes: B batch, T tokens (special tokens included), H hidden (= D), L = layers + 1. Batches carry
trailing padding, masked through the attention mask.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pretrain.models.objectives import LEFT_TO_RIGHT, Objective

BIDIRECTIONAL = ("bidirectional",)
FORWARD = ("forward",)
PAIR_INPUTS = {BIDIRECTIONAL: "segments", FORWARD: "both-orders"}
# What a published model's features may see (it is not trained here: no terms). Left-to-right
# decoders share the GPT family's objective; encoders read the whole sentence.
READS_ALL = Objective("bidirectional", directions=BIDIRECTIONAL, terms=(), metric_names=())
OBJECTIVES = {BIDIRECTIONAL: READS_ALL, FORWARD: LEFT_TO_RIGHT}


def padding_mask(lengths: Tensor, steps: int) -> Tensor:
    """(B,) lengths → (B, T) bool, True at real tokens (trailing padding)."""
    return torch.arange(steps, device=lengths.device)[None, :] < lengths[:, None]


def _blocks(network: nn.Module, count: int) -> nn.ModuleList:
    """The model's stack of ``count`` blocks: the ModuleList of that length holding most parameters."""
    stacks = [module for module in network.modules() if isinstance(module, nn.ModuleList) and len(module) == count]
    if not stacks:
        raise ValueError(f"{type(network).__name__} has no list of {count} blocks")
    return max(stacks, key=lambda stack: sum(p.numel() for p in stack.parameters()))


class HFModel(nn.Module):
    """A ``transformers`` base model read as a stack of per-token layers.

    Args:
        network: the loaded (or freshly configured) ``PreTrainedModel``.
        directions: ``("bidirectional",)`` or ``("forward",)`` (see :func:`measure_directions`).
        uses_segments: pass segment ids (token type ids) with pair inputs.
        max_positions: the longest sequence it takes (special tokens included), or None.
    """

    objective = READS_ALL  # per model: set from the measured directions

    def __init__(
        self,
        network: nn.Module,
        directions: tuple[str, ...],
        uses_segments: bool = False,
        max_positions: int | None = None,
    ):
        super().__init__()
        config = network.config
        self.network = network
        self.num_layers = int(config.num_hidden_layers)
        self.hidden_size = self.feature_dim = int(config.hidden_size)
        self.objective = OBJECTIVES[tuple(directions)]
        self.directions = self.objective.directions
        self.pair_input = PAIR_INPUTS[self.directions]
        self.uses_segments = uses_segments
        self.max_positions = max_positions

    def layer_states(self, token_ids: Tensor, lengths: Tensor, segments: Tensor | None = None) -> tuple[Tensor, ...]:
        """L (B, T, H) states from ``output_hidden_states``; padded positions hold whatever padding computed."""
        if self.max_positions is not None and token_ids.shape[1] > self.max_positions:
            raise ValueError(
                f"a sequence of {token_ids.shape[1]} tokens is longer than the model's {self.max_positions} positions"
            )
        mask = padding_mask(lengths.to(token_ids.device), token_ids.shape[1])  # (B, T)
        inputs = {"input_ids": token_ids, "attention_mask": mask.long()}
        if segments is not None and self.uses_segments:
            inputs["token_type_ids"] = segments
        states = self.network(**inputs, output_hidden_states=True, return_dict=True).hidden_states
        if states is None or len(states) != self.num_layers + 1:
            raise ValueError(
                f"{type(self.network).__name__} returned {0 if states is None else len(states)} hidden "
                f"states, not {self.num_layers + 1} (embeddings + every layer)"
            )
        return states

    def layer_outputs(self, token_ids: Tensor, lengths: Tensor, segments: Tensor | None = None) -> Tensor:
        """Returns (L, B, T, D): layer 0 the embedding output, layer k block k's; zeros at padding."""
        mask = padding_mask(lengths.to(token_ids.device), token_ids.shape[1])  # (B, T)
        return torch.stack(self.layer_states(token_ids, lengths, segments)) * mask[None, :, :, None]  # (L, B, T, D)

    def hidden_states(self, token_ids: Tensor, lengths: Tensor, segments: Tensor | None = None) -> Tensor:
        """Returns (B, T, H): the top layer's states, zeros at padding."""
        mask = padding_mask(lengths.to(token_ids.device), token_ids.shape[1])  # (B, T)
        return self.layer_states(token_ids, lengths, segments)[-1] * mask[..., None]  # (B, T, H)

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """[everything before the blocks (embeddings), block 1, …, block N + everything after it
        (a final norm, a pooler)], in the order the model registers them."""
        blocks = _blocks(self.network, self.num_layers)
        in_block = {id(p): index for index, block in enumerate(blocks) for p in block.parameters()}
        groups: list[list[nn.Parameter]] = [[] for _ in range(self.num_layers + 1)]
        seen_block = False
        for parameter in self.network.parameters():
            if id(parameter) in in_block:
                seen_block = True
                groups[in_block[id(parameter)] + 1].append(parameter)
            else:
                groups[-1 if seen_block else 0].append(parameter)
        return groups


@torch.no_grad()
def measure_directions(network: nn.Module, vocab_size: int) -> tuple[str, ...]:
    """``("forward",)`` when no state at position t moves with the token at t + 1 (on a probe of
    random ids), else ``("bidirectional",)``."""
    generator = torch.Generator().manual_seed(0)
    probe = torch.randint(0, vocab_size, (1, 6), generator=generator)  # (1, 6)
    changed = probe.clone()
    changed[0, -1] = (changed[0, -1] + 1) % vocab_size
    mask = torch.ones_like(probe)
    was_training = network.training
    network.eval()
    try:
        before = network(input_ids=probe, attention_mask=mask, output_hidden_states=True).hidden_states
        after = network(input_ids=changed, attention_mask=mask, output_hidden_states=True).hidden_states
    finally:
        network.train(was_training)
    moved = max(float((b[:, :-1] - a[:, :-1]).abs().max()) for b, a in zip(before, after))
    return FORWARD if moved <= 1e-6 else BIDIRECTIONAL


def forward_flops(model: HFModel, token_ids: Tensor, lengths: Tensor, softmax: bool = True) -> float:
    """About 2 FLOPs per weight outside the embeddings per real token (Kaplan et al. 2020's
    approximation; attention's T² term left out); ``softmax`` is for the families' common
    signature (a published encoder here has no LM head)."""
    embeddings = sum(p.numel() for p in model.network.get_input_embeddings().parameters())
    weights = sum(p.numel() for p in model.network.parameters()) - embeddings
    return 2.0 * weights * float(lengths.sum())

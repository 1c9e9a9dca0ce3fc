"""The encoder protocol: one interface for every language-model family, used by everything
downstream (feature caches, fine-tuning, benchmarks, the hub-style Python API).

An :class:`Encoder` is a family's model with its tokenizer and what identifies them:

- ``tokenize(sentence)``: the tokens features align to (no boundary tokens);
- ``encode(sentences)`` → (B, T + 2) ids with boundaries and (B,) lengths; ``features(ids,
  lengths)`` → (L, B, T, D) per-layer features + (B, T) mask, differentiable (fine-tuning);
- ``embed_layers(sentences)`` / ``embed_sentences(sentences)``: the same, frozen (no grad, eval);
- ``num_layers`` (L = model layers + 1, layer 0 the token embedding), ``dim`` (D), ``directions``
  (``("forward", "backward")`` for the biLM, ``("forward",)`` for left-to-right LMs,
  ``("bidirectional",)`` for published encoders that read the whole sentence), ``spec`` (the
  family's registry entry: what it can do);
- ``fingerprint``: sha256 of the weights and the model code version (feature caches key on it);
- ``parameter_groups()``: the model's parameters from input to top (discriminative learning
  rates, gradual unfreezing);
- ``record()``: the resolved identity a finetune checkpoint stores (never ``latest``);
- ``pair_input``: the joint pair input the model takes, if any (``both-orders``: GPT's
  ``<s> s1 <delim> s2 <cls>`` in both orders; ``segments``: BERT's ``[CLS] s1 [SEP] s2 [SEP]``).

Shapes: B batch, T tokens, D feature width, L layers + 1.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.errors import UserError
from harness.training.batching import pad_batch
from pretrain.encoders.checkpoints import tokenizer_state
from pretrain.families import Family, family_of


class Encoder:
    """A family's language model as a feature extractor, frozen unless a fine-tuner unfreezes it.

    Args:
        model: the family's torch-only model (see ``pretrain.models``).
        tokenizer: its tokenizer (``pretrain.tokenization.words.Tokenizer`` or ``pretrain.tokenization.bpe``).
        family: a registered family's name (``pretrain.families``).
        config: the model's config as a dict (``model_config`` of its checkpoint).
        fingerprint: identifies weights + code (see ``pretrain.encoders.loading``).
        source: where it came from (``runs:/<id>``, a path, or ``random``).
        run_id: the pretrain run, or None for a file; for the random twin, the run it copies.
        random_seed: the seed of a random-init twin (None for trained weights).
        copies: the random twin's model of architecture and tokenizer (``runs:/<id>`` or a path).
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer,
        family: str,
        config: dict,
        fingerprint: str,
        source: str,
        run_id: str | None = None,
        random_seed: int | None = None,
        copies: str | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.family = family
        self.config = dict(config)
        self.fingerprint = fingerprint
        self.source = source
        self.run_id = run_id
        self.random_seed = random_seed
        self.copies = copies
        self.freeze()

    @property
    def is_random(self) -> bool:
        return self.random_seed is not None

    @property
    def num_layers(self) -> int:
        """L = model layers + 1 (layer 0 is the token embedding)."""
        return self.model.num_layers + 1

    @property
    def dim(self) -> int:
        """D, the width of every feature layer."""
        return self.model.feature_dim

    @property
    def spec(self) -> Family:
        """The family's registry entry: what this encoder's family can do (e.g. ``joint_pair_input``)."""
        return family_of(self.family)

    @property
    def directions(self) -> tuple[str, ...]:
        """The feature halves and the context each may see (the model's objective)."""
        return self.model.objective.directions

    @property
    def pair_input(self) -> str | None:
        """The joint pair input this encoder takes (the family's ``joint_pair_input``): ``both-orders``
        (GPT's) unless the model says ``segments`` (BERT's); None without one."""
        if not self.spec.joint_pair_input:
            return None
        return getattr(self.model, "pair_input", "both-orders")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def to(self, device: str | torch.device) -> Encoder:
        self.model.to(device)
        return self

    def freeze(self) -> Encoder:
        """No gradients, eval mode (dropout off): the frozen-feature setting."""
        self.model.requires_grad_(False).eval()
        return self

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """The model's parameters from input to top; every parameter in exactly one group."""
        return self.model.parameter_groups()

    def tokenize(self, sentence: str) -> list[str]:
        return self.tokenizer.tokenize(sentence)

    def boundary_tokens(self) -> int:
        """How many tokens the model adds around a sentence (our families: ``<s>`` and ``</s>``)."""
        return 2

    def max_positions(self) -> int | None:
        """The model's position table (boundaries included), or None for recurrent models."""
        return getattr(self.model, "max_positions", None)

    def max_tokens(self) -> int | None:
        """The longest sentence (in tokens, without boundaries) the model takes, or None."""
        positions = self.max_positions()
        return None if positions is None else positions - self.boundary_tokens()

    def encode_ids(self, sentence: str) -> torch.Tensor:
        """(T + boundary_tokens(),) ids of one sentence with its boundary tokens."""
        ids = self.tokenizer.encode(sentence)
        limit, words = self.max_tokens(), len(ids) - self.boundary_tokens()
        if limit is not None and words > limit:
            raise UserError(
                f"a sentence of {words} tokens is longer than this {self.family} encoder's "
                f"{limit} (max_positions {self.max_positions()}): {sentence[:60]!r}…"
            )
        return torch.tensor(ids, dtype=torch.long)

    def encode(self, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (B, T + 2) ids (boundaries included, trailing padding) and (B,) lengths."""
        return pad_batch([self.encode_ids(sentence) for sentence in sentences])

    def features(self, token_ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-layer features of encoded sentences, with the graph kept (fine-tuning backpropagates).

        Returns:
            layers (L, B, T, D), zero at padding, aligned to ``tokenize`` (boundaries dropped);
            mask (B, T) bool, True at real tokens.
        """
        layers = self.model.layer_outputs(token_ids, lengths)  # (L, B, T + 2, D)
        layers = layers[:, :, 1:-1]  # drop <S>; the last column is </S> or padding: (L, B, T, D)
        word_counts = lengths.to(layers.device) - 2  # (B,)
        mask = torch.arange(layers.shape[2], device=layers.device)[None, :] < word_counts[:, None]  # (B, T)
        return layers * mask[None, :, :, None], mask

    @torch.no_grad()
    def embed_layers(self, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Frozen per-layer features of a batch of sentences, computed in float32 even inside a
        bf16 autocast region (``--trainer.precision=bf16-mixed``), so cached features do not
        depend on the precision of the run that built them.

        Returns:
            layers (L, B, T, D) float32, zero at padding; mask (B, T) bool, True at real tokens.
            T is the longest sentence's token count.
        """
        token_ids, lengths = self.encode(sentences)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.autocast(self.device.type, enabled=False):
                return self.features(token_ids.to(self.device), lengths.to(self.device))
        finally:
            self.model.train(was_training)

    @torch.no_grad()
    def embed_sentences(self, sentences: list[str]) -> torch.Tensor:
        """Returns (B, D): the mean over real tokens and over layers."""
        layers, mask = self.embed_layers(sentences)
        per_token = layers.mean(dim=0)  # (B, T, D)
        counts = mask.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1)
        return per_token.sum(dim=1) / counts

    def record(self) -> dict:
        """The resolved identity (and architecture) a finetune checkpoint stores.

        ``run_id`` is the pretrain run (for the random twin: the run whose architecture and
        tokenizer it copies, named by ``copies``); ``random_seed`` is None for trained weights.
        """
        return {
            "family": self.family,
            "run_id": self.run_id,
            "source": self.source,
            "copies": self.copies,
            "fingerprint": self.fingerprint,
            "random_seed": self.random_seed,
            "model_config": self.config,
            "tokenizer": tokenizer_state(self.tokenizer),
        }

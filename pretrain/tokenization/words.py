"""Deterministic word tokenizer and frequency-ordered vocabulary.

Normalisation follows the seed tutorial: lower-case, every number becomes ``<NUM>``. Sentences
are wrapped in ``<S> … </S>`` for the language model; the boundary tokens are not part of
``Tokenizer.tokenize`` (features align to the words only, as in allennlp's ELMo).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

PAD, UNK, BOS, EOS, NUM = "<PAD>", "<UNK>", "<S>", "</S>", "<NUM>"
SPECIALS = (PAD, UNK, BOS, EOS, NUM)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

# A word (letters/digits/underscore, with inner hyphens, apostrophes, dots or commas between
# word characters, so "1,000.5", "don't" and "u.s" stay whole; a final "." is its own token)
# or any single other symbol.
_TOKEN = re.compile(r"\w+(?:[-'.,]\w+)*|[^\w\s]")
_NUMBER = re.compile(r"^\d[\d,.]*$|^\d+(?:st|nd|rd|th|s|m|bn|pct)?$")


class Tokenizer:
    """Words → ids over a vocabulary ordered by frequency (specials first).

    The order matters: ``torch.nn.AdaptiveLogSoftmaxWithLoss`` puts the frequent head first.
    """

    def __init__(self, vocab: list[str], lowercase: bool = True, numbers: bool = True):
        if tuple(vocab[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {SPECIALS}")
        self.vocab = list(vocab)
        self.lowercase = lowercase
        self.numbers = numbers
        self.index = {token: position for position, token in enumerate(self.vocab)}

    @classmethod
    def build(
        cls,
        sentences: Iterable[str],
        min_frequency: int = 1,
        max_size: int | None = None,
        lowercase: bool = True,
        numbers: bool = True,
    ) -> Tokenizer:
        """Build the vocabulary from ``sentences`` only (callers pass pretraining text only)."""
        probe = cls(list(SPECIALS), lowercase=lowercase, numbers=numbers)
        counts = Counter(token for sentence in sentences for token in probe.tokenize(sentence))
        for special in SPECIALS:
            counts.pop(special, None)
        # Sort by frequency, ties alphabetically, so the vocabulary is deterministic.
        words = sorted(
            (word for word, count in counts.items() if count >= min_frequency), key=lambda word: (-counts[word], word)
        )
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + words, lowercase=lowercase, numbers=numbers)

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def unk_id(self) -> int:
        return UNK_ID

    def tokenize(self, sentence: str) -> list[str]:
        """Returns the normalised words of ``sentence`` (no boundary tokens)."""
        text = sentence.lower() if self.lowercase else sentence
        tokens = _TOKEN.findall(text)
        if self.numbers:
            tokens = [NUM if _NUMBER.match(token) else token for token in tokens]
        return tokens

    def encode(self, sentence: str, boundaries: bool = True) -> list[int]:
        """Returns token ids, wrapped in ``<S> … </S>`` when ``boundaries``."""
        ids = [self.index.get(token, UNK_ID) for token in self.tokenize(sentence)]
        return [BOS_ID, *ids, EOS_ID] if boundaries else ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.vocab[i] for i in ids]

    def to_dict(self) -> dict:
        return {"vocab": self.vocab, "lowercase": self.lowercase, "numbers": self.numbers}

    @classmethod
    def from_dict(cls, state: dict) -> Tokenizer:
        return cls(state["vocab"], lowercase=state["lowercase"], numbers=state["numbers"])

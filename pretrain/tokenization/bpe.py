"""Byte-level BPE tokenizer for the GPT family, trained with the ``tokenizers`` library.

Same interface as the word ``Tokenizer`` (``pretrain.tokenization.words``): ``build`` from the pretraining
sentences only, ``tokenize``, ``encode`` wrapped in ``<s> … </s>``, ``decode``, ``vocab``,
``to_dict`` / ``from_dict`` (JSON, so a checkpoint carries it), pad id 0. Plus GPT's pair input
``encode_pair`` (``<s> s1 <delim> s2 <cls>``, Radford et al. 2018, §3.3) and ``count_words`` for
per-word perplexity.

Byte level: every UTF-8 byte is in the vocabulary, so any text encodes without an unknown token
(hence no ``<unk>``). Normalisation: Unicode NFC, lower-case by default (GPT-1's encoder lower-cased
its text), runs of whitespace collapsed to one space, ends stripped. Special-token strings that
appear in the text (a sentence containing "<cls>") are encoded as ordinary text, never as the
special ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from harness.errors import UserError

PAD, BOS, EOS, DELIM, CLS = "<pad>", "<s>", "</s>", "<delim>", "<cls>"
SPECIALS = (PAD, BOS, EOS, DELIM, CLS)
PAD_ID, BOS_ID, EOS_ID, DELIM_ID, CLS_ID = range(len(SPECIALS))
BYTE_ALPHABET = pre_tokenizers.ByteLevel.alphabet()  # the 256 printable stand-ins for the bytes
MIN_VOCAB_SIZE = len(SPECIALS) + len(BYTE_ALPHABET)
KIND = "byte_level_bpe"


class SubwordTokenizer:
    """Text → byte-level BPE token ids; specials fixed at ids 0–4 (``<pad>`` = 0)."""

    def __init__(self, tokenizer: Tokenizer):
        for expected_id, special in enumerate(SPECIALS):
            if tokenizer.token_to_id(special) != expected_id:
                raise ValueError(f"the BPE vocabulary must hold {special!r} at id {expected_id}")
        tokenizer.encode_special_tokens = True  # "<cls>" in a sentence is text, not CLS_ID
        self._tokenizer = tokenizer
        by_id = tokenizer.get_vocab(with_added_tokens=True)
        self.vocab = sorted(by_id, key=by_id.__getitem__)

    @classmethod
    def build(
        cls,
        sentences: Iterable[str],
        vocab_size: int = 8000,
        min_frequency: int = 2,
        lowercase: bool = True,
    ) -> SubwordTokenizer:
        """Train the merges on ``sentences`` only (callers pass pretraining text only).

        ``vocab_size`` counts the specials and the 256 byte symbols; the result is smaller when the
        text has fewer pairs seen ``min_frequency`` times. Training is deterministic: the same
        sentences give the same vocabulary and merges.
        """
        if vocab_size < MIN_VOCAB_SIZE:
            raise UserError(
                f"--data.max_vocab_size={vocab_size} is too small for byte-level BPE: use at least "
                f"{MIN_VOCAB_SIZE} ({len(SPECIALS)} special tokens + {len(BYTE_ALPHABET)} byte symbols)"
            )
        steps = [normalizers.NFC()] + ([normalizers.Lowercase()] if lowercase else [])
        steps += [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
        tokenizer = Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.Sequence(steps)
        # add_prefix_space: a sentence's first word is split like every other word (" the").
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.encode_special_tokens = True
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIALS),  # given first, so they take ids 0 … 4 in this order
            initial_alphabet=BYTE_ALPHABET,
            show_progress=False,
        )
        tokenizer.train_from_iterator(sentences, trainer)
        return cls(tokenizer)

    def __len__(self) -> int:
        return len(self.vocab)

    def normalize(self, sentence: str) -> str:
        """Returns the text the tokenizer actually segments (normalised as described above)."""
        return self._tokenizer.normalizer.normalize_str(sentence)

    def count_words(self, sentence: str) -> int:
        """Words of ``sentence``: the whitespace-separated pieces of its normalised text.

        Per-word perplexity is exp(Σ NLL / Σ words) over the same sentences, so that models with
        different tokenizers share one unit. The LM also predicts ``</s>``; callers that credit
        it as a word (as word-level LMs do) add 1 per sentence — state which in the metric's name.
        """
        return len(self.normalize(sentence).split())

    def tokenize(self, sentence: str) -> list[str]:
        """Returns the BPE tokens of ``sentence`` (no boundary tokens); "Ġ" marks a leading space."""
        return self._tokenizer.encode(sentence, add_special_tokens=False).tokens

    def encode(self, sentence: str, boundaries: bool = True) -> list[int]:
        """Returns token ids, wrapped in ``<s> … </s>`` when ``boundaries``."""
        ids = self._tokenizer.encode(sentence, add_special_tokens=False).ids
        return [BOS_ID, *ids, EOS_ID] if boundaries else ids

    def encode_pair(self, first: str, second: str) -> list[int]:
        """Returns GPT's pair input ``<s> first <delim> second <cls>`` as ids."""
        return [BOS_ID, *self.encode(first, boundaries=False), DELIM_ID, *self.encode(second, boundaries=False), CLS_ID]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Returns the token strings of ``ids`` (specials included)."""
        return [self.vocab[i] for i in ids]

    def decode_text(self, ids: Iterable[int]) -> str:
        """Returns the normalised text of ``ids``, specials dropped (bytes → UTF-8)."""
        text = self._tokenizer.decode(list(ids), skip_special_tokens=True)
        return text.removeprefix(" ")  # the prefix space the pre-tokenizer added

    def to_dict(self) -> dict:
        """JSON-serialisable state: the library's own tokenizer description (merges included)."""
        return {"kind": KIND, "tokenizer": json.loads(self._tokenizer.to_str())}

    @classmethod
    def from_dict(cls, state: dict) -> SubwordTokenizer:
        if state.get("kind") != KIND:
            raise ValueError(f"not a {KIND} tokenizer state: kind={state.get('kind')!r}")
        return cls(Tokenizer.from_str(json.dumps(state["tokenizer"])))

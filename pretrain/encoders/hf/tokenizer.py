"""The tokenizer of a published (Hugging Face) model, as the encoder protocol uses it.

Wraps the ``tokenizers`` backend that ``transformers.AutoTokenizer`` builds for the folder (its
post-processor adds the model's own special tokens: BERT's ``[CLS] … [SEP]``, RoBERTa's
``<s> … </s>``, nothing for GPT-2), with truncation and padding switched off, so a long sentence is
never cut silently. ``encode`` gives the ids the model reads; ``tokenize`` the tokens between the
special tokens, which features align to. The special tokens sit at fixed places: ``prefix`` before
the sentence, ``suffix`` after it (BERT 1 and 1, GPT-2 0 and 0), checked on every sentence.

Pairs (``encode_pair``): the tokenizer's own pair template when it separates the two sentences
(BERT: ``[CLS] s1 [SEP] s2 [SEP]`` with segment ids 0 … 0 1 … 1); otherwise (GPT-2) the two
sentences joined by the end-of-text token, which also closes the sequence.

The state (``to_dict``) is JSON: the backend's own description plus the few facts ``transformers``
adds, so a finetune checkpoint rebuilds the tokenizer without the folder.
"""

from __future__ import annotations

import json

from tokenizers import Encoding, Tokenizer

KIND = "hf"
PROBE = ("probe sentence", "second one")


def _edges(mask: list[int]) -> tuple[int, int]:
    """Leading and trailing special tokens of a special-tokens mask."""
    prefix = next((index for index, special in enumerate(mask) if not special), len(mask))
    suffix = next((index for index, special in enumerate(reversed(mask)) if not special), len(mask))
    return prefix, suffix


def _separates(sequence_ids: list[int | None]) -> bool:
    """Whether a pair encoding holds a special token between the first and the second sentence."""
    if 0 not in sequence_ids or 1 not in sequence_ids:
        return False
    last_first = len(sequence_ids) - 1 - sequence_ids[::-1].index(0)
    return None in sequence_ids[last_first + 1 : sequence_ids.index(1)]


class HFTokenizer:
    """Sentence → the ids a published model reads, and the tokens its features align to.

    Args:
        backend: the ``tokenizers.Tokenizer`` (``AutoTokenizer(...).backend_tokenizer``).
        separator_id: the id that joins a pair when the pair template does not (GPT-2: its
            end-of-text id); None when the template separates or no such token exists.
        uses_segments: the model reads segment (token type) ids (BERT: yes; GPT-2: no).
        model_max_length: the tokenizer's own length limit (None when it states none).
        split_special_tokens: special-token strings inside a sentence are text, not special ids
            (``transformers``' ``split_special_tokens``; the exported GPT family's tokenizers set it).
    """

    def __init__(
        self,
        backend: Tokenizer,
        separator_id: int | None = None,
        uses_segments: bool = False,
        model_max_length: int | None = None,
        split_special_tokens: bool = False,
    ):
        backend = Tokenizer.from_str(backend.to_str())  # a copy: the settings below are ours
        backend.no_truncation()
        backend.no_padding()
        backend.encode_special_tokens = split_special_tokens  # not part of the JSON: carried beside it
        self.split_special_tokens = split_special_tokens
        self._backend = backend
        self.separator_id = separator_id
        self.uses_segments = uses_segments
        self.model_max_length = model_max_length
        probe = backend.encode(PROBE[0])
        self.prefix, self.suffix = _edges(probe.special_tokens_mask)
        self.template_separates = _separates(backend.encode(*PROBE).sequence_ids)
        by_id = backend.get_vocab(with_added_tokens=True)
        self.vocab = sorted(by_id, key=by_id.__getitem__)

    @classmethod
    def from_transformers(cls, tokenizer) -> HFTokenizer:
        """From a loaded ``transformers`` tokenizer (it must be backed by ``tokenizers``)."""
        separator = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        limit = tokenizer.model_max_length
        return cls(
            tokenizer.backend_tokenizer,
            separator_id=separator,
            uses_segments="token_type_ids" in tokenizer.model_input_names,
            model_max_length=int(limit) if limit and limit < 1_000_000 else None,
            split_special_tokens=bool(getattr(tokenizer, "split_special_tokens", False)),
        )

    def __len__(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def boundaries(self) -> tuple[int, int]:
        """(special tokens before, special tokens after) a single sentence's tokens."""
        return self.prefix, self.suffix

    def _encoding(self, sentence: str) -> Encoding:
        encoding = self._backend.encode(sentence)
        if _edges(encoding.special_tokens_mask) != (self.prefix, self.suffix) and encoding.special_tokens_mask.count(0):
            raise ValueError(f"the tokenizer put its special tokens elsewhere for {sentence[:60]!r}")
        return encoding

    def tokenize(self, sentence: str) -> list[str]:
        """The tokens of ``sentence`` the features align to (the model's special tokens dropped)."""
        tokens = self._encoding(sentence).tokens
        return tokens[self.prefix : len(tokens) - self.suffix]

    def encode(self, sentence: str) -> list[int]:
        """The ids the model reads, its special tokens included."""
        return list(self._encoding(sentence).ids)

    def encode_pair(self, first: str, second: str) -> list[int]:
        """Both sentences as one sequence of ids (see :meth:`encode_pair_segments`)."""
        return self.encode_pair_segments(first, second)[0]

    def encode_pair_segments(self, first: str, second: str) -> tuple[list[int], list[int]]:
        """Both sentences as one sequence. Returns (ids, segment ids: 0 for the first, 1 for the second)."""
        if self.template_separates or self.separator_id is None:
            encoding = self._backend.encode(first, second)
            return list(encoding.ids), list(encoding.type_ids)
        ids_first, ids_second = self.encode(first), self.encode(second)
        ids = ids_first + [self.separator_id] + ids_second + [self.separator_id]
        return ids, [0] * (len(ids_first) + 1) + [1] * (len(ids_second) + 1)

    def to_dict(self) -> dict:
        return {
            "kind": KIND,
            "tokenizer": json.loads(self._backend.to_str()),
            "separator_id": self.separator_id,
            "uses_segments": self.uses_segments,
            "model_max_length": self.model_max_length,
            "split_special_tokens": self.split_special_tokens,
        }

    @classmethod
    def from_dict(cls, state: dict) -> HFTokenizer:
        if state.get("kind") != KIND:
            raise ValueError(f"not a {KIND} tokenizer state: kind={state.get('kind')!r}")
        return cls(
            Tokenizer.from_str(json.dumps(state["tokenizer"])),
            state.get("separator_id"),
            bool(state.get("uses_segments")),
            state.get("model_max_length"),
            bool(state.get("split_special_tokens")),
        )

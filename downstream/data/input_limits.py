"""How long a pair's inputs may be, checked before a finetune run exists.

A sentence's cost grows with its token count T: its frozen features are (L, T, D), a batch pads
every sentence to its longest, and an attention head or a transformer adds T². One pathological
line (a paragraph, a file without sentence breaks) would otherwise ask for gigabytes in one
allocation. So every sentence (and, for GPT's joint input, every pair sequence) must fit within
``--data.max_tokens`` and the encoder's position table; a longer one is refused, naming its file
and pair, never cut silently (a cut test sentence would be another test). With the cap raised,
the frozen features of a batch of the longest sentences must also fit in memory.

Shapes: B batch, T tokens, L layers + 1, D feature width.
"""

from __future__ import annotations

from harness.diskspace import size_text
from harness.errors import UserError

DEFAULT_MAX_TOKENS = 256  # 4x MRPC's longest sentence (41 word tokens, 62 BPE tokens; 125 for a joint pair)
FLAG = "--data.max_tokens"
FEATURE_BATCH = 64  # sentences per encoder call when features are cached (FeatureStore.build)
COPIES_PER_TOKEN = 3  # float32 copies of (L, D) per token at the peak: layers, a batch copy, the mix and its gradient


def token_limit(encoder, max_tokens: int) -> tuple[int, str]:
    """The longest input in tokens and what sets it: ``--data.max_tokens`` or the encoder's positions."""
    if max_tokens < 1:
        raise UserError(f"{FLAG}={max_tokens}: must be at least 1")
    positions = encoder.max_tokens()  # None for recurrent models
    if positions is not None and positions < max_tokens:
        return positions, f"this {encoder.family} encoder's max_positions {encoder.max_positions()}"
    return max_tokens, FLAG


def longest_input(named_pairs: dict[str, list], encoder, input_kind: str, max_tokens: int) -> int:
    """Check every pair of every split; returns the longest input in tokens.

    ``named_pairs``: ``{"--data.train=<file>": pairs, ...}``: how a split is named in the error.
    ``input_kind``: ``features`` or ``tokens`` (each sentence), ``joint`` (``<s> s1 <delim> s2 <cls>``).

    Raises:
        UserError naming the split, the pair and its length when one is longer than the limit.
    """
    limit, reason = token_limit(encoder, max_tokens)
    if input_kind == "joint":
        limit += encoder.boundary_tokens()  # the sequence's own boundaries count against the positions, not the cap
    lengths: dict[str, int] = {}
    longest = 0
    for where, pairs in named_pairs.items():
        for pair in pairs:
            if input_kind == "joint":
                measured = [("pair", len(encoder.tokenizer.encode_pair(pair.sentence1, pair.sentence2)))]
            else:
                measured = [
                    (role, lengths.setdefault(text, len(encoder.tokenize(text))))
                    for role, text in (("sentence1", pair.sentence1), ("sentence2", pair.sentence2))
                ]
            for role, length in measured:
                if length > limit:
                    text = pair.sentence1 if role != "sentence2" else pair.sentence2
                    raise UserError(
                        f"{where}: pair {'/'.join(pair.ids)} has a {role} of {length} tokens, more than "
                        f"{limit} ({reason}): {text[:40]!r}…; shorten or drop it, or raise {FLAG} "
                        f"(within the encoder's positions)"
                    )
                longest = max(longest, length)
    return longest


def frozen_batch_bytes(encoder, batch_size: int, longest: int) -> int:
    """About the peak bytes of the largest batch of frozen features: an encoder call over
    ``FEATURE_BATCH`` sentences, or a training batch of ``batch_size`` pairs (two sentences each),
    every sentence padded to ``longest`` tokens."""
    per_token = COPIES_PER_TOKEN * encoder.num_layers * encoder.dim * 4  # float32 (L, D)
    return per_token * longest * max(FEATURE_BATCH, 2 * batch_size)


def check_frozen_memory(encoder, batch_size: int, longest: int, max_tokens: int, free: int) -> None:
    """Refuse, in one line, frozen features of ``longest``-token sentences that cannot fit in ``free`` bytes."""
    needed = frozen_batch_bytes(encoder, batch_size, longest)
    if needed > free:
        raise UserError(
            f"{FLAG}={max_tokens}: frozen features of a batch of the longest sentences ({longest} tokens) "
            f"need about {size_text(needed)}, only {size_text(free)} of memory is free; lower {FLAG} "
            f"(or --data.batch_size, --data.eval_batch_size) or shorten those sentences"
        )

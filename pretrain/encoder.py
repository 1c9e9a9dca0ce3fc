"""``load_encoder``: a pretrained biLM as a frozen feature extractor (tokenizer + model).

Shapes: B batch, T words, H hidden per direction, D = 2H, L = layers + 1.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from pretrain.models.bilm import BiLM
from harness.errors import UserError
from pretrain.tokenize import Tokenizer
from harness.tracking import REPO_ROOT, tracking_uri

CHECKPOINT_ARTIFACT = "checkpoint/bilm.ckpt"
CHECKPOINT_KEYS = ("state_dict", "hyper_parameters", "tokenizer", "bilm_config", "epoch", "global_step",
                   "pytorch-lightning_version")


class Encoder:
    """A frozen biLM with its tokenizer. Features align to :meth:`tokenize` (no boundary tokens)."""

    def __init__(self, model: BiLM, tokenizer: Tokenizer, config: dict, fingerprint: str, source: str):
        self.model = model.requires_grad_(False).eval()
        self.tokenizer = tokenizer
        self.config = config
        self.fingerprint = fingerprint  # identifies the weights, for feature caches
        self.source = source

    @property
    def num_layers(self) -> int:
        """L = LSTM layers + 1 (layer 0 is the token embedding)."""
        return self.model.num_layers + 1

    @property
    def dim(self) -> int:
        """D = 2H."""
        return 2 * self.model.hidden_size

    @property
    def device(self) -> torch.device:
        return self.model.embedding.weight.device

    def to(self, device: str | torch.device) -> Encoder:
        self.model.to(device)
        return self

    def tokenize(self, sentence: str) -> list[str]:
        return self.tokenizer.tokenize(sentence)

    @torch.no_grad()
    def embed_layers(self, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-layer features of a batch of sentences.

        Returns:
            layers (L, B, T, D) float, zero at padding; mask (B, T) bool, True at real words.
            T is the longest sentence's word count.
        """
        encoded = [torch.tensor(self.tokenizer.encode(s)) for s in sentences]
        lengths = torch.tensor([len(ids) for ids in encoded], device=self.device)  # words + 2
        token_ids = torch.nn.utils.rnn.pad_sequence(encoded, batch_first=True).to(self.device)  # (B, T + 2)
        self.model.eval()
        layers = self.model.layer_outputs(token_ids, lengths)  # (L, B, T + 2, D)
        layers = layers[:, :, 1:-1]  # drop <S>; the last column is </S> or padding: (L, B, T, D)
        word_counts = lengths - 2
        mask = torch.arange(layers.shape[2], device=self.device)[None, :] < word_counts[:, None]  # (B, T)
        return layers * mask[None, :, :, None], mask

    @torch.no_grad()
    def embed_sentences(self, sentences: list[str]) -> torch.Tensor:
        """Returns (B, D): the mean over real words and over layers."""
        layers, mask = self.embed_layers(sentences)
        per_token = layers.mean(dim=0)  # (B, T, D)
        counts = mask.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1)
        return per_token.sum(dim=1) / counts


def encoder_from_checkpoint(checkpoint: dict, fingerprint: str, source: str) -> Encoder:
    config = dict(checkpoint["bilm_config"])
    model = BiLM(**{**config, "adaptive_cutoffs": tuple(config["adaptive_cutoffs"])})
    weights = {key[len("model."):]: value for key, value in checkpoint["state_dict"].items()
               if key.startswith("model.")}
    model.load_state_dict(weights)
    return Encoder(model, Tokenizer.from_dict(checkpoint["tokenizer"]), config, fingerprint, source)


def read_checkpoint(path: str | Path, source: str) -> tuple[dict, str]:
    """Returns the checkpoint dict and the sha256 of the file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{source}: checkpoint file not found: {path}")
    data = path.read_bytes()
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise UserError(f"{source}: not a readable checkpoint ({type(error).__name__})") from None
    if not isinstance(checkpoint, dict) or "bilm_config" not in checkpoint or "tokenizer" not in checkpoint:
        raise UserError(f"{source}: not a biLM checkpoint from `python -m pretrain` (no config/vocab inside)")
    return checkpoint, hashlib.sha256(data).hexdigest()


def latest_pretrain_run() -> str:
    """Returns the id of the newest FINISHED run tagged ``stage=pretrain`` that a benchmark did not
    make for itself (those carry a ``benchmark`` tag: a quick benchmark's toy encoder must not
    become everyone's default)."""
    client = MlflowClient(tracking_uri())
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, "tags.stage = 'pretrain' and attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=200) if experiments else []
    runs = [run for run in runs if "benchmark" not in run.data.tags]
    if not runs:
        raise UserError(f"encoder=latest: no finished pretrain run in {tracking_uri()}; run `make pretrain` first")
    return runs[0].info.run_id


def resolve_run_id(source: str) -> str | None:
    """``runs:/<id>`` or ``latest`` → run id; a path → None."""
    if source == "latest":
        return latest_pretrain_run()
    if source.startswith("runs:/"):
        return source[len("runs:/"):].strip("/").split("/")[0]
    return None


def checkpoint_of_run(run_id: str, source: str) -> Path:
    """Download the pretrain run's checkpoint artifact; a missing or wrong run is a UserError."""
    client = MlflowClient(tracking_uri())
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise UserError(f"{source}: no run {run_id} in {tracking_uri()}") from None
    stage = run.data.tags.get("stage")
    if stage != "pretrain":
        raise UserError(f"{source}: run {run_id} is a {stage or 'untagged'} run, not a pretrain run")
    if run.info.status != "FINISHED":
        raise UserError(f"{source}: pretrain run {run_id} is {run.info.status}, not FINISHED")
    # Artifacts of a FINISHED run do not change: download once per run.
    directory = REPO_ROOT / ".cache" / "encoders" / run_id
    local = directory / Path(CHECKPOINT_ARTIFACT).name  # where download_artifacts puts a single file
    if local.is_file():
        return local
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return Path(client.download_artifacts(run_id, CHECKPOINT_ARTIFACT, str(directory)))
    except (MlflowException, OSError):
        raise UserError(f"{source}: run {run_id} has no {CHECKPOINT_ARTIFACT} artifact") from None


def load_encoder(source: str | os.PathLike, device: str = "cpu") -> Encoder:
    """Rebuild a frozen encoder from ``runs:/<run_id>``, ``latest`` or a checkpoint path.

    Returns:
        :class:`Encoder` in eval mode, parameters with ``requires_grad=False``.
    """
    source = str(source)
    run_id = resolve_run_id(source)
    path = checkpoint_of_run(run_id, source) if run_id else Path(source)
    checkpoint, digest = read_checkpoint(path, source)
    encoder = encoder_from_checkpoint(checkpoint, digest, f"runs:/{run_id}" if run_id else str(path))
    return encoder.to(device)


def random_encoder(like: Encoder, seed: int = 0) -> Encoder:
    """The control: ``like``'s architecture and tokenizer with untrained weights (seeded)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BiLM(**{**like.config, "adaptive_cutoffs": tuple(like.config["adaptive_cutoffs"])})
    fingerprint = hashlib.sha256(f"random:{seed}:{like.fingerprint}".encode()).hexdigest()
    return Encoder(model, like.tokenizer, like.config, fingerprint, "random").to(like.device)


def slim_checkpoint(checkpoint: dict) -> dict:
    """Keep what rebuilding the model needs (no optimiser state), as plain containers."""
    slim = {key: checkpoint[key] for key in CHECKPOINT_KEYS if key in checkpoint}
    slim["hyper_parameters"] = dict(slim.get("hyper_parameters", {}))
    slim["state_dict"] = {key: value for key, value in checkpoint["state_dict"].items() if key.startswith("model.")}
    return slim

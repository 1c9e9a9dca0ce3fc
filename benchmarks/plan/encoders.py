"""A benchmark's encoders: each is a given run or a chain of pretraining stages (ULMFiT: general
LM, then the task LM, linked by ``--model.init_from``). A stage is found again by a hash of its
settings, the data's and corpus files' content, the stage before it and the protocol version, so a
re-run pretrains nothing that already finished; once the last stage has a run, the encoder is read
back from it.

An encoder's identity (what its cells' hashes hold) is what decides its outputs: the last stage's
hash for an encoder pretrained here (known before it runs, so finished cells are found without
pretraining again), the checkpoint's sha256 for a given run, the model files' sha256 for a
published encoder. The checkpoint's own sha256 (``digest``) is recorded beside it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from mlflow.tracking import MlflowClient

from benchmarks.cell.definition import file_digests, portable_args
from benchmarks.plan.matrix import repo_path
from harness.digests import DIGEST_PARAM
from harness.errors import UserError
from harness.protocol import settings_hash
from harness.tracking.runs import REPO_ROOT, tracking_uri
from pretrain.corpus.corpora import SENTENCES_FILE, SHARED_FOLDERS, default_corpora_dir, entries
from pretrain.encoders.hf.encoder import folder_digest, is_hf_source, resolve_folder
from pretrain.encoders.loading import load_encoder, resolve
from pretrain.encoders.references import Source
from pretrain.families import FIRST_FORMAT_FAMILY

PRETRAIN_EXPERIMENT = "pretrain"


@dataclass
class Stage:
    """One pretraining stage of an encoder: its config file and flags (without ``init_from``)."""

    encoder: str
    number: int  # 1-based
    config: str
    args: list[str] = field(default_factory=list)
    last: bool = True

    def flags(self, previous_run_id: str | None) -> list[str]:
        """The stage's flags; a later stage continues the previous stage's run."""
        return [*self.args, *([f"--model.init_from=runs:/{previous_run_id}"] if previous_run_id else [])]

    def config_text(self) -> str:
        return Path(self.config).read_text() if Path(self.config).is_file() else ""

    def settings_hash(
        self,
        previous_hash: str | None,
        data_digest: str,
        corpora: dict[str, str] | None = None,
        version: str | None = None,
    ) -> str:
        """The stage's identity: its settings and text, and the identity of the stage it continues.
        ``corpora``: recorded digests of the shared corpora (a results folder's), read in place of
        the corpus files, which a clone of the repository alone does not have; ``version``: the
        protocol version to hash under (this code's when None), as a results file records it."""
        config_text = self.config_text()
        files = file_digests(self.args)
        named = (
            named_corpus_digests(self.args, config_text, self.config)
            if corpora is None
            else {
                name: corpora[name]
                for name in shared_corpus_names(self.args, config_text, self.config)
                if name in corpora
            }
        )
        return settings_hash(
            {
                "config": portable_path(self.config),
                "args": portable_args(self.args),
                "config_text": config_text,
                "data": data_digest,
                "previous": previous_hash,
                "files": {Path(path).name: digest for path, digest in files.items()},
                "corpora": named,
            },
            version,
        )

    def log_name(self) -> str:
        return f"pretrain-{self.encoder}-{self.number}.log"


def pretrain_stages(encoder: dict) -> list[dict]:
    """The encoder's ``pretrain:`` as a list of stages (``config`` + ``args``); one stage unless it
    is a list."""
    stages = encoder.get("pretrain", [])
    return [dict(stage) for stage in (stages if isinstance(stages, list) else [stages])]


def stages_of(encoder: dict) -> list[Stage]:
    """The encoder's stages with absolute config paths."""
    specs = pretrain_stages(encoder)
    return [
        Stage(
            encoder["name"],
            number,
            str(repo_path(spec["config"])),
            list(spec.get("args", [])),
            last=number == len(specs),
        )
        for number, spec in enumerate(specs, start=1)
    ]


def given_run(encoder: dict) -> str | None:
    """The run an encoder names (``run: latest | runs:/<id> | models:/…``; a published encoder's
    source as it is), None when it names none or (with a ``pretrain:`` fallback) none is found."""
    if not encoder.get("run"):
        return None
    if is_published(encoder):
        return str(encoder["run"])
    try:
        return resolve(Source.parse(str(encoder["run"]))).target  # runs:/<id>, latest…, models:/… → the run id
    except UserError:
        if "pretrain" not in encoder:
            raise
        return None


def portable_path(path: str) -> str:
    """A path inside the repository as written relative to its root (the same on every machine)."""
    try:
        return Path(path).resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path


_CORPUS_DIGESTS: dict[tuple[str, float, int], str] = {}


def shared_corpus_names(args: list[str], config_text: str, where: str = "the stage's config") -> list[str]:
    """The shared corpora (``reuters``, ``brown``, ``sotu``) the stage's ``--data.corpus`` (else
    its config's ``corpus:``, ``where`` naming the file) names, in order."""
    from harness.unique_keys import load_yaml_text  # only where a stage is hashed

    flags = [argument.partition("=")[2] for argument in args if argument.startswith("--data.corpus=")]
    if flags:
        corpus = load_yaml_text(flags[-1], "--data.corpus")
    else:
        config = load_yaml_text(config_text, where)
        corpus = ((config if isinstance(config, dict) else {}).get("data") or {}).get("corpus")
    try:
        names = entries(corpus) if corpus else []
    except UserError:
        return []
    return [name for name in names if name in SHARED_FOLDERS]


def corpora_root(args: list[str]) -> Path:
    """The folder of the shared corpora a stage reads: its ``--data.corpora_dir``, else the default."""
    folders = [argument.partition("=")[2] for argument in args if argument.startswith("--data.corpora_dir=")]
    return Path(folders[-1]) if folders else default_corpora_dir()


def named_corpus_digests(args: list[str], config_text: str, where: str = "the stage's config") -> dict[str, str]:
    """sha256 of each shared corpus the stage names (:func:`shared_corpus_names`) that is there:
    the same name over other text is another stage."""
    root = corpora_root(args)
    digests = {}
    for name in shared_corpus_names(args, config_text, where):
        path = root / SHARED_FOLDERS[name] / SENTENCES_FILE
        if not path.is_file():
            continue
        status = path.stat()
        key = (str(path), status.st_mtime, status.st_size)
        if key not in _CORPUS_DIGESTS:
            _CORPUS_DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        digests[name] = _CORPUS_DIGESTS[key]
    return digests


def stage_hashes(
    stages: list[Stage], data_digest: str, corpora: dict[str, str] | None = None, version: str | None = None
) -> list[str]:
    """Each stage's identity, in order: a stage's hash holds the one before it (``corpora`` and
    ``version`` as :meth:`Stage.settings_hash` takes them)."""
    hashes: list[str] = []
    for stage in stages:
        hashes.append(stage.settings_hash(hashes[-1] if hashes else None, data_digest, corpora, version))
    return hashes


def corpus_digests(encoders: list[dict]) -> dict[str, str]:
    """sha256 of every shared corpus the encoders' pretraining stages read, by name: recorded with
    a study so that its stage hashes recompute where the corpora are not."""
    digests: dict[str, str] = {}
    for stage in (stage for encoder in encoders for stage in stages_of(encoder)):
        digests.update(named_corpus_digests(stage.args, stage.config_text()))
    return dict(sorted(digests.items()))


def is_published(encoder: dict) -> bool:
    """``run: hf:<folder>`` or ``reference:<name>``: an encoder pretrained elsewhere."""
    return is_hf_source(str(encoder.get("run", "")))


def published_encoder(encoder: dict) -> dict:
    """A published encoder: loaded once here for its layers and fingerprint; its cells pass the
    source itself to ``--model.encoder``."""
    try:
        loaded = load_encoder(encoder["run"])
    except UserError as error:
        raise UserError(f"encoder '{encoder['name']}': {error}") from None
    digest = folder_digest(resolve_folder(str(encoder["run"])))
    return {
        "name": encoder["name"],
        "run_id": loaded.source,
        "family": loaded.family,
        "num_layers": loaded.num_layers,
        "identity": f"files:{digest}",
        "digest": digest,
        "published": True,
        "reference": str(encoder["run"]).startswith("reference:"),
        "val_ppl": None,
        "train_tokens": 0,
        "train_words": 0,
        "corpus": "published",
        "config": encoder["run"],
    }


def describe_encoder(encoder: dict, run_id: str, identity: str | None = None) -> dict:
    """The encoder as the plan and the report use it; ``identity``: its last stage's hash when it
    was pretrained here (else its checkpoint's sha256 stands for it).

    Returns:
        name, run id, identity, checkpoint digest, family, layers (L), held-out perplexity, the
        corpora and their size over all its stages (:func:`pretraining_figures`), config.
    """
    if is_published(encoder):
        return published_encoder(encoder)
    client = MlflowClient(tracking_uri())
    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - an unknown id is the user's to fix
        raise UserError(f"encoder '{encoder['name']}': no run {run_id} in {tracking_uri()}") from None
    if run.data.tags.get("stage") != "pretrain":
        raise UserError(f"encoder '{encoder['name']}': run {run_id} is not a pretrain run")
    params = run.data.params
    stages = pretrain_stages(encoder)
    digest = params.get(DIGEST_PARAM, "")
    return {
        "name": encoder["name"],
        "run_id": run_id,
        "identity": identity or f"checkpoint:{digest or run_id}",
        "digest": digest,
        "family": run.data.tags.get("family", FIRST_FORMAT_FAMILY),
        "num_layers": int(params["model.num_layers"]) + 1,
        **pretraining_figures(stage_runs(client, run)),
        "config": stages[-1]["config"] if stages else params.get("config", ""),
    }


def stage_runs(client: MlflowClient, run) -> list:
    """The pretraining runs that made the encoder of ``run``, first stage first: each later stage
    names the run it continued (its ``init_run_id`` tag); a stage whose run this store lacks, or a
    run met twice (a store edited by hand), ends the chain there."""
    chain = [run]
    while (previous := chain[0].data.tags.get("init_run_id")) and previous not in {
        stage.info.run_id for stage in chain
    }:
        try:
            chain.insert(0, client.get_run(previous))
        except Exception:  # noqa: BLE001 - a continued run from another store: describe what is here
            break
    return chain


def pretraining_figures(runs: list) -> dict:
    """What the encoder learned from, over all its stages (ULMFiT: general LM, then the task LM):
    the corpora in order (``mrpc+reuters → mrpc``), tokens and whitespace words summed over the
    stages (a text read in two stages counts twice), the last stage's held-out perplexity (its
    best checkpoint's; runs made before ``best_val_ppl``: the last logged), and each stage's own."""
    stages = [
        {
            "run_id": run.info.run_id,
            "corpus": run.data.params.get("data.corpus", "mrpc"),
            "train_tokens": int(run.data.params.get("train_tokens", 0)),
            "train_words": int(run.data.params.get("train_words", 0)),
            "val_ppl": run.data.metrics.get("best_val_ppl", run.data.metrics.get("val_ppl")),
        }
        for run in runs
    ]
    return {
        "val_ppl": stages[-1]["val_ppl"],
        "train_tokens": sum(stage["train_tokens"] for stage in stages),
        "train_words": sum(stage["train_words"] for stage in stages),
        "corpus": " → ".join(stage["corpus"] for stage in stages),
        "stages": stages,
    }


def with_stages(described: dict | None, client: MlflowClient) -> dict | None:
    """An encoder described before its stages were (its last stage's figures only), completed from
    the store when its pretraining runs are there; any other description as it is."""
    if not described or "stages" in described or described.get("published") or not described.get("run_id"):
        return described
    try:
        run = client.get_run(described["run_id"])
    except Exception:  # noqa: BLE001 - a run of another store: the record stays as written
        return described
    if run.data.tags.get("stage") != "pretrain":
        return described
    return {**described, **pretraining_figures(stage_runs(client, run))}

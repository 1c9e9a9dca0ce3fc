"""Loading encoders: a reference (``pretrain.encoders.references``: ``runs:/<id>``, ``latest[:<family>]``,
``models:/…``, a checkpoint path, a random twin) → an :class:`Encoder`;
``random_encoder`` builds any family's untrained twin; ``encoder_from_record`` rebuilds the exact
encoder a finetune checkpoint recorded.

Fingerprints: a trained encoder's is sha256(checkpoint file bytes' sha256, model code version);
a random twin's is sha256("random", seed, the copied encoder's fingerprint, torch version). Any
change to the weights, the model code (its initialisation included) or the RNG changes them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.atomic import move_into_place
from harness.digests import check_digest, matches_record
from harness.errors import UserError
from harness.tracking.runs import REPO_ROOT, tracking_uri
from pretrain.encoders.checkpoints import build_tokenizer, code_version, read_checkpoint
from pretrain.encoders.hf.encoder import FAMILY as HF_FAMILY
from pretrain.encoders.hf.encoder import HFEncoder, hf_encoder_from_record, load_hf_encoder
from pretrain.encoders.protocol import Encoder
from pretrain.encoders.provenance import is_smoke
from pretrain.encoders.reference_hints import NoSuchEncoder
from pretrain.encoders.references import EncoderReference, Source, reference_of_record
from pretrain.encoders.registry import run_of_model
from pretrain.encoders.trusted import check_trusted, note_untrusted, trusted_experiment_ids, trusted_names
from pretrain.families import FIRST_FORMAT_FAMILY, family_of

CHECKPOINT_ARTIFACT = "checkpoint/encoder.ckpt"
LEGACY_ARTIFACT = "checkpoint/bilm.ckpt"  # pretrain runs made before families existed
ENCODER_CACHE = REPO_ROOT / ".cache" / "encoders"


SEARCH_PAGE = 500  # runs per search request while looking for `latest`


def latest_pretrain_run(family: str | None = None, lm_stage: str | None = None) -> str:
    """The newest FINISHED ``stage=pretrain`` run (of ``family`` and ``lm_stage`` — ``general`` or
    ``task`` — if given) that a benchmark did not make for itself (those carry a ``benchmark`` tag:
    a quick benchmark's toy encoder must not become everyone's default), in the trusted experiments
    only (:mod:`pretrain.encoders.trusted`), and not a smoke run (``smoke=true``) while any other
    qualifies: when only smoke runs do, the newest of them, with a note saying so. Pages through
    the store."""
    client = MlflowClient(tracking_uri())
    experiments = trusted_experiment_ids(client)
    if experiments is None:
        experiments = [e.experiment_id for e in client.search_experiments()]
    query = "tags.stage = 'pretrain' and attributes.status = 'FINISHED'"
    token, smoke = None, None
    while experiments:
        page = client.search_runs(
            experiments, query, order_by=["attributes.start_time DESC"], max_results=SEARCH_PAGE, page_token=token
        )
        for run in page:
            tags = run.data.tags
            if (
                "benchmark" in tags
                or (family and tags.get("family", FIRST_FORMAT_FAMILY) != family)
                or (lm_stage and tags.get("lm_stage", "general") != lm_stage)
            ):
                continue
            if not is_smoke(run):
                return run.info.run_id
            smoke = smoke or run.info.run_id
        token = page.token
        if not token:
            break
    which = " ".join(filter(None, [family, lm_stage]))
    if smoke:
        print(
            f"note: latest: only smoke {which + ' ' if which else ''}pretrain runs are finished in "
            f"{tracking_uri()}; using the newest, {smoke} (a toy that tests the pipeline: `make pretrain` "
            f"makes a real encoder)"
        )
        return smoke
    names = trusted_names()
    inside = f" (experiments {', '.join(names)}; ENCODER_EXPERIMENTS adds more)" if names else ""
    raise UserError(
        f"no finished {which + ' ' if which else ''}pretrain run in {tracking_uri()}{inside}; run `make pretrain` first"
    )


def resolve(source: Source) -> Source:
    """``latest…`` and ``models:/…`` → the run they name now (``runs:/<id>``: what a run records);
    a run, a file or a published model as it is. Errors name the source as written (``<source>: …``)."""
    if source.kind == "model":
        run_id = run_of_model(str(source))
        check_trusted(MlflowClient(tracking_uri()), run_id, str(source))
        return Source("run", run_id)
    if source.kind == "latest":
        try:
            return Source("run", latest_pretrain_run(source.family, source.lm_stage))
        except UserError as error:
            raise UserError(f"{source}: {error}") from None
    return source


def _download(client: MlflowClient, run_id: str, target: Path) -> Path:
    """Download the run's encoder checkpoint into a temporary folder, then move it into place
    (:func:`harness.atomic.move_into_place`), so an interrupted download never leaves a file that
    looks complete."""
    temporary = target.parent.parent / f".{run_id}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        for artifact in (CHECKPOINT_ARTIFACT, LEGACY_ARTIFACT):
            try:
                downloaded = Path(client.download_artifacts(run_id, artifact, str(temporary)))
                break
            except (MlflowException, OSError):
                continue
        else:
            raise UserError(f"run {run_id} has no {CHECKPOINT_ARTIFACT} artifact")
        target.parent.mkdir(parents=True, exist_ok=True)
        move_into_place(downloaded, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return target


def checkpoint_of_run(run_id: str, source: str) -> tuple[dict, str]:
    """The pretrain run's encoder checkpoint (downloaded once per run; a cached copy that is
    unreadable or no longer matches the run's recorded sha256 is downloaded again, once), checked
    against that digest (:mod:`harness.digests`). Returns the normalised checkpoint and its file digest."""
    client = MlflowClient(tracking_uri())
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise NoSuchEncoder(f"{source}: no run {run_id} in {tracking_uri()}") from None
    if "deleted" in (run.info.lifecycle_stage, client.get_experiment(run.info.experiment_id).lifecycle_stage):
        raise UserError(
            f"{source}: run {run_id} is deleted (in the trash of {tracking_uri()}); restore it "
            f"(mlflow runs restore --run-id {run_id}, or its experiment) or choose another run"
        )
    stage = run.data.tags.get("stage")
    if stage != "pretrain":
        raise UserError(f"{source}: run {run_id} is a {stage or 'untagged'} run, not a pretrain run")
    if run.info.status != "FINISHED":
        raise UserError(f"{source}: pretrain run {run_id} is {run.info.status}, not FINISHED")
    note_untrusted(client, run, source)
    local = ENCODER_CACHE / run_id / Path(CHECKPOINT_ARTIFACT).name
    if not local.is_file() or not matches_record(run, local):
        _download(client, run_id, local)
    try:
        check_digest(run, local, CHECKPOINT_ARTIFACT, source)
        return read_checkpoint(local, source)
    except UserError:  # a damaged or replaced cached copy: fetch it again, once
        local.unlink(missing_ok=True)
        _download(client, run_id, local)
        try:
            check_digest(run, local, CHECKPOINT_ARTIFACT, source)
        except UserError:
            local.unlink(missing_ok=True)  # never keep a refused file where the next load would find it
            raise
        try:
            return read_checkpoint(local, source)
        except UserError:
            raise UserError(
                f"{source}: the downloaded checkpoint {local} is unreadable twice; delete it and "
                f"check run {run_id}'s {CHECKPOINT_ARTIFACT} artifact"
            ) from None


def fingerprint_of(file_digest: str, family: str, tokenizer: dict) -> str:
    version = code_version(family, tokenizer.get("type", "word"))
    return hashlib.sha256(f"{file_digest}\n{version}".encode()).hexdigest()


def encoder_from_checkpoint(checkpoint: dict, file_digest: str, source: str, run_id: str | None) -> Encoder:
    """An :class:`Encoder` from a normalised checkpoint (see ``pretrain.encoders.checkpoints.normalise``)."""
    family, config = checkpoint["family"], checkpoint["model_config"]
    model = family_of(family).build(config)
    try:
        model.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as error:
        first = str(error).strip().splitlines()[0]
        raise UserError(f"{source}: weights do not fit the {family} model in its config ({first})") from None
    tokenizer = build_tokenizer(checkpoint["tokenizer"])
    return Encoder(
        model,
        tokenizer,
        family,
        config,
        fingerprint_of(file_digest, family, checkpoint["tokenizer"]),
        source,
        run_id=run_id,
    )


def load_encoder(reference: str | os.PathLike | EncoderReference, device: str = "cpu") -> Encoder:
    """Rebuild a frozen encoder from any reference (``pretrain.encoders.references``): ``runs:/<run_id>``,
    ``models:/…``, ``latest[:<family>]``, a checkpoint path, a published model (``hf:<folder>``,
    ``hf:<owner>/<name>``, ``reference:<name>``: ``pretrain.encoders.hf.encoder``), or
    ``random:<one of those>@<seed>`` (its random-init twin; seed 0 when none is given).

    Loading draws nothing from the global random stream (building a model before its weights are
    loaded would), so a seeded run's head starts alike whether its process loaded the encoder or
    reused one it had loaded before (``downstream.run.encoder_reuse``).

    Returns:
        :class:`Encoder` in eval mode, parameters with ``requires_grad=False``.
    """
    if not isinstance(reference, EncoderReference):  # the Python API's text, parsed here once
        reference = EncoderReference.parse(str(reference))
    with torch.random.fork_rng(devices=[]):
        return _load_encoder(reference, device)


def _load_encoder(reference: EncoderReference, device: str) -> Encoder:
    shown = str(reference.source)  # errors name the source as the caller wrote it
    source = resolve(reference.source)
    if source.kind == "published":
        encoder = load_hf_encoder(source.target, device)
    elif source.kind == "run":
        checkpoint, digest = checkpoint_of_run(source.target, shown)
        encoder = encoder_from_checkpoint(checkpoint, digest, str(source), source.target)
    else:
        checkpoint, digest = read_checkpoint(Path(source.target), shown)
        encoder = encoder_from_checkpoint(checkpoint, digest, str(Path(source.target)), None)
    encoder = encoder.to(device)
    return random_encoder(encoder, reference.seed or 0) if reference.random else encoder


def random_encoder(like: Encoder, seed: int = 0) -> Encoder:
    """The control: ``like``'s family, architecture and tokenizer with untrained weights drawn from
    ``seed`` by the family's own initialisation."""
    if isinstance(like, HFEncoder):
        return like.random_twin(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = family_of(like.family).build(like.config)
    fingerprint = hashlib.sha256(f"random\n{seed}\n{like.fingerprint}\n{torch.__version__}".encode()).hexdigest()
    return Encoder(
        model,
        like.tokenizer,
        like.family,
        like.config,
        fingerprint,
        "random",
        run_id=like.run_id,
        random_seed=seed,
        copies=like.source,
    ).to(like.device)


def encoder_from_record(record: dict, weights: bool = True) -> Encoder:
    """The encoder a finetune checkpoint recorded (``Encoder.record()``).

    ``weights=True``: the pretrain run (or file) it names, or that run's random twin with the
    recorded seed, checked by fingerprint. ``weights=False``: only the architecture and tokenizer
    (the fine-tuned weights are in the finetune checkpoint itself).
    """
    if record["family"] == HF_FAMILY:
        return hf_encoder_from_record(record, weights)
    if not weights:
        model = family_of(record["family"]).build(record["model_config"])
        return Encoder(
            model,
            build_tokenizer(record["tokenizer"]),
            record["family"],
            record["model_config"],
            record["fingerprint"],
            record["source"],
            record.get("run_id"),
            record.get("random_seed"),
            record.get("copies"),
        )
    reference = reference_of_record(record)
    source = reference.source
    encoder = load_encoder(reference)
    if encoder.fingerprint != record["fingerprint"]:
        raise UserError(
            f"{source}: the encoder there is not the one this checkpoint was trained on "
            f"(fingerprint {encoder.fingerprint[:12]} ≠ recorded {record['fingerprint'][:12]}: "
            f"other weights or other model code)"
        )
    return encoder


def init_checkpoint(source: str, family: str | None = None, tokenizer: str | None = None) -> dict:
    """The checkpoint ``--model.init_from`` names (a pretrain run or a file) for a model of
    ``family`` whose data module asked for a ``tokenizer`` kind (any, when None) to continue from.
    Returns the normalised checkpoint plus ``source`` (``runs:/<id>`` or the path) and ``run_id``."""
    flag = f"--model.init_from={source}"
    try:
        reference = EncoderReference.parse(source)
        if reference.random:
            raise UserError(f"{source}: a random-init twin has no trained weights to continue from")
        resolved = resolve(reference.source)
        run_id = resolved.target if resolved.kind == "run" else None
        checkpoint, _ = checkpoint_of_run(run_id, source) if run_id else read_checkpoint(Path(source), source)
    except UserError as error:
        raise UserError(f"{flag}: {str(error).removeprefix(f'{source}: ')}") from None
    theirs = checkpoint["family"]
    if family and theirs != family:
        article = "an" if theirs[0] in "aeiou" else "a"
        raise UserError(
            f"{flag}: that is {article} {theirs} encoder; this model is {family} (continue a {family} "
            f"run, e.g. latest:{family}:general, or use a {theirs} config)"
        )
    kind = checkpoint["tokenizer"].get("type", "word")
    if tokenizer and kind != tokenizer:
        raise UserError(
            f"{flag}: that run's tokenizer is {kind}, not --data.tokenizer={tokenizer}; a continued run "
            f"keeps its tokenizer: set --data.tokenizer={kind}"
        )
    return {**checkpoint, "source": f"runs:/{run_id}" if run_id else source, "run_id": run_id}

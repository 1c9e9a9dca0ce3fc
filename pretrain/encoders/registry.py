"""Encoders in the MLflow model registry: each finished pretrain run (not a benchmark's own) is a
version of ``<family>-encoder`` (``<family>-task-encoder`` for a target-task LM), whose source
is the run's ``checkpoint/`` artifact folder, and the alias ``newest`` follows the newest one. A
smoke run (a toy that tests the pipeline, tag ``smoke=true``) is a version of a model of its own,
``<family>-encoder-smoke``, so that a real encoder's name and its ``newest`` never point at a toy.

``--model.encoder=models:/elmo-encoder@newest`` (or ``models:/<name>/<version>``,
``models:/<name>/latest``) resolves to the version's run, then loads it like ``runs:/<id>``.
MLflow reserves the alias ``latest`` (``models:/<name>/latest`` already means the highest
version), hence ``newest``. No ``mlflow.pytorch.log_model``: the checkpoint is the model.
"""

from __future__ import annotations

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.tracking.runs import tracking_uri
from pretrain.encoders.reference_hints import NoSuchEncoder

ALIAS = "newest"
CHECKPOINT_FOLDER = "checkpoint"


def model_name(family: str, lm_stage: str = "general", smoke: bool = False) -> str:
    """``elmo-encoder``, ``ulmfit-task-encoder``; a smoke run's ``elmo-encoder-smoke``."""
    name = f"{family}-task-encoder" if lm_stage == "task" else f"{family}-encoder"
    return f"{name}-smoke" if smoke else name


def model_description(family: str, lm_stage: str = "general", smoke: bool = False) -> str:
    if smoke:
        return f"toy {family} encoders ({lm_stage} LM) of smoke runs: they test the pipeline, not transfer"
    return f"{family} encoders ({lm_stage} LM): checkpoint/encoder.ckpt of each pretrain run"


def register_encoder(
    client: MlflowClient, run_id: str, family: str, lm_stage: str = "general", smoke: bool = False
) -> str:
    """Register the run's checkpoint folder as a new version of :func:`model_name` (a smoke run's
    own model when ``smoke``) and point ``@newest`` at it. Returns ``models:/<name>/<version>``."""
    name = model_name(family, lm_stage, smoke)
    try:
        client.create_registered_model(name, description=model_description(family, lm_stage, smoke))
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    source = f"{client.get_run(run_id).info.artifact_uri.rstrip('/')}/{CHECKPOINT_FOLDER}"
    tags = {"family": family, "lm_stage": lm_stage, **({"smoke": "true"} if smoke else {})}
    version = client.create_model_version(name, source, run_id=run_id, tags=tags)
    client.set_registered_model_alias(name, ALIAS, version.version)
    return f"models:/{name}/{version.version}"


def run_of_model(uri: str) -> str:
    """The pretrain run behind ``models:/<name>@<alias>``, ``models:/<name>/<version>`` or
    ``models:/<name>/latest``."""
    reference = uri.removeprefix("models:/").strip("/")
    client = MlflowClient(tracking_uri())
    try:
        if "@" in reference:
            name, alias = reference.split("@", 1)
            version = client.get_model_version_by_alias(name, alias)
        elif "/" in reference:
            name, number = reference.split("/", 1)
            if number == "latest":
                versions = client.search_model_versions(
                    f"name = '{name}'", order_by=["version_number DESC"], max_results=1
                )
                if not versions:
                    raise UserError(f"{uri}: model {name!r} has no versions")
                version = versions[0]
            else:
                version = client.get_model_version(name, number)
        else:
            raise UserError(f"{uri}: name a version or an alias: models:/<name>/<version> or models:/<name>@<alias>")
    except MlflowException as error:
        first = str(error.message).splitlines()[0]
        raise NoSuchEncoder(f"{uri}: not in the model registry of {tracking_uri()} ({first})") from None
    if not version.run_id:
        raise UserError(f"{uri}: version {version.version} of {version.name} names no pretrain run")
    return version.run_id

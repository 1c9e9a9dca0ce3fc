"""MLflow plumbing shared by every stage: where runs go, how they are named and tagged, and a
LightningCLI base that checks the store first, resumes a run faithfully from its checkpoint,
never leaves a run RUNNING, and turns user mistakes into one line."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.entities import Param
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from pytorch_lightning.cli import LightningCLI, SaveConfigCallback
from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_only

from harness.checkpoints import LAST, ResumePoint, resume_point
from harness.errors import UserError
from harness.liveness import ENDED_TAG, mark_dead_runs, process_tags
from harness.params import comparable_params
from harness.precision import check_precision
from harness.resume import ResumeState
from harness.runtime import retain_freed_memory
from harness.store import (EXPERIMENT_KIND, REPO_ROOT, SERVER_SCHEMES, artifact_location,  # noqa: F401 - re-exported
                           ensure_experiment, prepare_store, scheme_of, server_problem, tracking_uri)

PARAM_LIMIT = 6000  # characters MLflow 3 keeps per param value
CHANGED_PARAMS_TAG = "harness.changed_params"  # params a resumed fit was given other values for
RESUMED_TAG = "harness.resumed_from"


@dataclass
class OpenRun:
    """A run this process started (or resumed), and where its local checkpoints go."""

    logger: MLFlowLogger
    checkpoint_dir: Path | None = None


# Runs of this process, so a crash anywhere can mark them FAILED (or say where their checkpoints are).
_OPEN_RUNS: list[OpenRun] = []


def make_logger(experiment: str, run_name: str, tags: dict[str, str], run_id: str | None = None) -> MLFlowLogger:
    """An MLFlowLogger on :func:`tracking_uri`. A new run (created on first use) carries ``tags``
    and the process tags of :mod:`harness.liveness`; with ``run_id`` the logger continues that
    run, which is set RUNNING again under this process."""
    uri = tracking_uri()
    if run_id is None:
        ensure_experiment(experiment, uri)
        logger = MLFlowLogger(experiment_name=experiment, run_name=run_name, tracking_uri=uri,
                              tags={**{key: str(value) for key, value in tags.items()}, **process_tags()})
    else:
        logger = MLFlowLogger(tracking_uri=uri, run_id=run_id)
        if rank_zero_only.rank == 0:
            client = logger.experiment
            client.update_run(run_id, status="RUNNING")
            for key, value in {**tags, **process_tags()}.items():
                client.set_tag(run_id, key, str(value))
            if ENDED_TAG in client.get_run(run_id).data.tags:
                client.delete_tag(run_id, ENDED_TAG)
    _OPEN_RUNS.append(OpenRun(logger))
    return logger


def log_params(logger: MLFlowLogger, params: dict[str, Any]) -> None:
    """Log the flat params a user compares (:mod:`harness.params`) in full (Lightning's own
    logger cuts values at 250 characters).

    A resumed run has its params already, and MLflow refuses to change one: keys it has are
    skipped, and those given another value are listed in the tag ``harness.changed_params``.
    """
    if rank_zero_only.rank != 0:
        return
    client, run_id = logger.experiment, logger.run_id
    values = {key: str(value)[:PARAM_LIMIT] for key, value in comparable_params(flatten(params)).items()}
    run = client.get_run(run_id)
    existing = run.data.params
    items = [Param(key, value) for key, value in values.items() if key not in existing]
    for start in range(0, len(items), 100):
        client.log_batch(run_id, params=items[start:start + 100])
    changed = {key for key, value in values.items() if key in existing and existing[key] != value}
    if changed:
        changed |= set(filter(None, run.data.tags.get(CHANGED_PARAMS_TAG, "").split(",")))
        client.set_tag(run_id, CHANGED_PARAMS_TAG, ",".join(sorted(changed))[:5000])


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def fail_open_runs(status: str = "FAILED") -> None:
    """Mark every run this process started and left RUNNING as ``status`` (best effort: a store
    that cannot be reached is left as it is)."""
    for open_run in _OPEN_RUNS:
        logger = open_run.logger
        if not (logger._initialized and logger.run_id):  # noqa: SLF001 - only look, never create a run
            continue
        try:
            client = logger.experiment
            if client.get_run(logger.run_id).info.status == "RUNNING":
                client.set_terminated(logger.run_id, status)
        except Exception:  # noqa: BLE001 - the store is gone; its next start marks the run (liveness)
            pass
    _OPEN_RUNS.clear()


def server_lost() -> str | None:
    """When the tracking URI is a server that no longer answers: one line saying so, what became
    of the run and how to continue it. None otherwise."""
    uri = tracking_uri()
    if scheme_of(uri) not in SERVER_SCHEMES:
        return None
    problem = server_problem(uri, timeout=(2.0, 3.0))
    if problem is None:
        return None
    message = f"tracking server {uri} stopped answering during the run ({problem})"
    for open_run in _OPEN_RUNS:
        run_id = open_run.logger._run_id  # noqa: SLF001 - the id alone, no request to the dead server
        if not run_id:
            continue
        last = open_run.checkpoint_dir / LAST if open_run.checkpoint_dir else None
        if last is not None and last.is_file():
            message += (f"; run {run_id} stays RUNNING there; local checkpoints are kept in {last.parent}; "
                        f"once the server is back, continue the same run with --ckpt_path={last}")
        else:
            message += f"; run {run_id} had written no checkpoint yet: start it again once the server is back"
    return message


def ui_hint() -> str:
    uri = tracking_uri()
    return f"make ui  (or: mlflow ui --backend-store-uri {uri})"


class MLflowConfig(SaveConfigCallback):
    """Log the resolved config as ``config.yaml`` and as flat ``params`` of the run.

    The stock callback writes into the logger's log_dir, which a non-file store lacks.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "save_to_log_dir": False})

    def save_config(self, trainer, pl_module, stage) -> None:
        logger = trainer.logger
        if not isinstance(logger, MLFlowLogger):
            return
        text = self.parser.dump(self.config, skip_none=False)
        # a resumed fit keeps the config the run started with and adds its own beside it
        name = f"config-resumed-{time.strftime('%Y%m%d-%H%M%S')}.yaml" if self.config.get("ckpt_path") else "config.yaml"
        logger.experiment.log_text(logger.run_id, text, name)
        config = self.config.as_dict()
        for key in ("config", "_instantiator"):
            config.pop(key, None)
        config.get("trainer", {}).pop("callbacks", None)
        config.get("trainer", {}).pop("logger", None)
        model = config.get("model")
        if isinstance(model, dict) and "class_path" in model:  # a family's module: model.<arg> as before
            config["model"] = {"class": model["class_path"], **(model.get("init_args") or {})}
        built = getattr(pl_module, "built_config", None)  # what was built (init_from's architecture wins)
        if isinstance(config.get("model"), dict) and built:
            config["model"].update(built)
        log_params(logger, config)


class TrackedCLI(LightningCLI):
    """LightningCLI whose runs go to MLflow with a readable name and the stage's tags.

    Subclasses set ``stage`` and ``experiment`` and implement :meth:`run_name` and
    :meth:`run_tags`; they may add callbacks through :meth:`stage_callbacks`.
    """

    stage = "stage"
    experiment = "lm-transfer-bench"
    resume_point: ResumePoint | None = None  # set by prepare_run when --ckpt_path resumes a run

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("save_config_callback", MLflowConfig)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("auto_configure_optimizers", False)
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument("--experiment_name", type=str | None, default=self.experiment,
                            help="MLflow experiment that receives the run")
        parser.add_argument("--run_name", type=str | None, default=None,
                            help="MLflow run name (default: made from the config)")
        parser.add_argument("--tags", type=dict[str, str], default={},
                            help="extra MLflow run tags, e.g. --tags='{\"note\": \"try\"}'")

    def setting(self, key: str, default: Any = None) -> Any:
        """A value of the parsed config of the current subcommand, by dotted key."""
        node = self.config.get(str(self.subcommand), self.config)
        for part in key.split("."):
            node = node.get(part, default) if hasattr(node, "get") else default
        return node

    def experiment_name(self) -> str:
        """``--experiment_name``, else :meth:`default_experiment`."""
        return self.setting("experiment_name") or self.default_experiment()

    def default_experiment(self) -> str:
        return self.experiment

    def run_name(self) -> str:
        return self.stage

    def run_tags(self) -> dict[str, str]:
        return {"stage": self.stage}

    def stage_callbacks(self, run_id: str) -> list:
        return []

    def check_settings(self) -> None:
        """Refuse settings that cannot give a useful run, before anything is read or created."""
        batch_size = self.setting("data.batch_size")
        if isinstance(batch_size, int) and batch_size < 1:
            raise UserError(f"--data.batch_size={batch_size}: must be at least 1")
        for flag in ("max_epochs", "max_steps"):
            if self.setting(f"trainer.{flag}") == 0:
                raise UserError(f"--trainer.{flag}=0: nothing would be trained, yet the run would count as "
                                f"finished; use at least 1 (or -1 for no limit)")
        check_precision(self.setting("trainer.precision"), self.setting("trainer.accelerator"))

    def check_before_run(self) -> None:
        """Stage checks that need the instantiated model and data, before the run is created."""

    def parse_arguments(self, parser, args) -> None:
        """After parsing, and before Lightning reads ``--ckpt_path`` (it loads the checkpoint's
        hyper-parameters into the config) or instantiates anything: :meth:`prepare_run`."""
        super().parse_arguments(parser, args)
        self.subcommand = self.config.get("subcommand")
        self.prepare_run()

    def prepare_run(self) -> None:
        """Check the settings, prepare the store (created once, under a lock), mark KILLED the
        runs whose process died, then check the checkpoint to resume from, if any: a readable
        training checkpoint of a run of this stage in this store."""
        self.resume_point = None
        self.check_settings()
        uri = tracking_uri()
        prepare_store(uri)
        client = MlflowClient(uri)
        if rank_zero_only.rank == 0:
            mark_dead_runs(client)
        ckpt_path = self.setting("ckpt_path") if self.subcommand == "fit" else None
        if not ckpt_path:
            return
        self.resume_point = resume_point(str(ckpt_path), self.checkpoint_root())
        run_id = self.resume_point.run_id
        try:
            run = client.get_run(run_id)
        except MlflowException:
            raise UserError(f"--ckpt_path={ckpt_path}: its run {run_id} is not in {uri}; resume against the "
                            f"store it was logged to (MLFLOW_TRACKING_URI)") from None
        if run.data.tags.get("stage") != self.stage:
            raise UserError(f"--ckpt_path={ckpt_path}: run {run_id} is a {run.data.tags.get('stage')} run, "
                            f"not a {self.stage} run")
        self.config[self.subcommand]["ckpt_path"] = str(self.resume_point.path)

    def instantiate_trainer(self, **kwargs):
        self.check_before_run()
        tags = {**self.run_tags(), **(self.setting("tags") or {})}
        if self.resume_point:
            tags[RESUMED_TAG] = str(self.resume_point.path)
        logger = make_logger(self.experiment_name(), self.setting("run_name") or self.run_name(), tags,
                             run_id=self.resume_point.run_id if self.resume_point else None)
        run_id = logger.run_id
        _OPEN_RUNS[-1].checkpoint_dir = self.checkpoint_dir(run_id)
        trainer_config = self._get(self.config_init, "trainer")
        trainer_config["callbacks"] = [*(trainer_config.get("callbacks") or []), *self.stage_callbacks(run_id),
                                       ResumeState(run_id)]
        return super().instantiate_trainer(logger=logger, **kwargs)

    def checkpoint_root(self) -> Path:
        """``<default_root_dir>/checkpoints/<stage>``: one folder per run below it."""
        return Path(self.setting("trainer.default_root_dir") or os.getcwd()) / "checkpoints" / self.stage

    def checkpoint_dir(self, run_id: str | None) -> Path:
        """``<default_root_dir>/checkpoints/<stage>/<run_id>`` (a resumed run keeps the folder of
        its checkpoint). Under DDP only rank 0 has the run id; ModelCheckpoint broadcasts rank 0's
        folder at setup, so the others' is a placeholder."""
        if self.resume_point:
            return self.resume_point.directory
        return self.checkpoint_root() / (run_id or "rank-placeholder")


def run_cli(cli_class: type[TrackedCLI], args: list[str] | None = None) -> int:
    """Run a CLI. Returns the exit status: 2 after a :class:`UserError` (one line), 1 when the
    tracking server went away during the run (one line); any other failure marks the run FAILED
    (KILLED for Ctrl-C) and raises."""
    retain_freed_memory()
    try:
        cli_class(args=args)
    except UserError as error:
        fail_open_runs()
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BaseException as error:
        lost = server_lost() if _OPEN_RUNS else None
        if lost:
            _OPEN_RUNS.clear()
            print(f"error: {lost}", file=sys.stderr)
            return 1
        fail_open_runs("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
        raise
    return 0

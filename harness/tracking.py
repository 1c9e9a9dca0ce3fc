"""MLflow plumbing shared by every stage: where runs go, how they are named and tagged, and a
LightningCLI base that never leaves a run RUNNING and turns user mistakes into one line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from pytorch_lightning.cli import LightningCLI, SaveConfigCallback
from pytorch_lightning.loggers import MLFlowLogger

from harness.errors import UserError
from harness.precision import check_precision
from harness.runtime import retain_freed_memory

REPO_ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
PARAM_LIMIT = 6000  # characters MLflow 3 keeps per param value

# Loggers created by this process, so a crash anywhere can mark their runs FAILED.
_OPEN_LOGGERS: list[MLFlowLogger] = []


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else ``sqlite:///<repo root>/mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO_ROOT / 'mlflow.db'}"


def artifact_location(uri: str) -> str | None:
    """Artifacts of a local SQLite store live beside the database file (not in the cwd)."""
    if uri.startswith("sqlite:///"):
        database = Path(uri[len("sqlite:///"):])
        return (database.parent / "mlartifacts").resolve().as_uri()
    return None


def ensure_experiment(name: str, uri: str | None = None) -> str:
    """Returns the id of experiment ``name``, creating it (tagged for the "Model training" view)."""
    uri = uri or tracking_uri()
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        experiment_id = client.create_experiment(name, artifact_location=artifact_location(uri), tags=EXPERIMENT_KIND)
    else:
        experiment_id = experiment.experiment_id
        if experiment.tags.get("mlflow.experimentKind") != EXPERIMENT_KIND["mlflow.experimentKind"]:
            client.set_experiment_tag(experiment_id, *next(iter(EXPERIMENT_KIND.items())))
    return experiment_id


def make_logger(experiment: str, run_name: str, tags: dict[str, str]) -> MLFlowLogger:
    """An MLFlowLogger on :func:`tracking_uri`; the run is created on first use."""
    uri = tracking_uri()
    ensure_experiment(experiment, uri)
    logger = MLFlowLogger(experiment_name=experiment, run_name=run_name, tracking_uri=uri,
                          tags={key: str(value) for key, value in tags.items()})
    _OPEN_LOGGERS.append(logger)
    return logger


def log_params(logger: MLFlowLogger, params: dict[str, Any]) -> None:
    """Log flat params in full (Lightning's own logger cuts values at 250 characters)."""
    items = [Param(key, str(value)[:PARAM_LIMIT]) for key, value in flatten(params).items()]
    for start in range(0, len(items), 100):
        logger.experiment.log_batch(logger.run_id, params=items[start:start + 100])


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def fail_open_runs() -> None:
    """Mark every run this process started and left RUNNING as FAILED."""
    for logger in _OPEN_LOGGERS:
        if logger._initialized and logger.run_id:  # noqa: SLF001 - only look, never create a run
            client = logger.experiment
            if client.get_run(logger.run_id).info.status == "RUNNING":
                client.set_terminated(logger.run_id, "FAILED")
    _OPEN_LOGGERS.clear()


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
        logger.experiment.log_text(logger.run_id, text, "config.yaml")
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

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("save_config_callback", MLflowConfig)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("auto_configure_optimizers", False)
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument("--experiment_name", type=str, default=self.experiment,
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

    def run_name(self) -> str:
        return self.stage

    def run_tags(self) -> dict[str, str]:
        return {"stage": self.stage}

    def stage_callbacks(self, run_id: str) -> list:
        return []

    def instantiate_trainer(self, **kwargs):
        check_precision(self.setting("trainer.precision"), self.setting("trainer.accelerator"))  # before any run exists
        tags = {**self.run_tags(), **(self.setting("tags") or {})}
        logger = make_logger(self.setting("experiment_name"), self.setting("run_name") or self.run_name(), tags)
        trainer_config = self._get(self.config_init, "trainer")
        trainer_config["callbacks"] = [*(trainer_config.get("callbacks") or []), *self.stage_callbacks(logger.run_id)]
        return super().instantiate_trainer(logger=logger, **kwargs)

    def checkpoint_dir(self, run_id: str | None) -> Path:
        """``<default_root_dir>/checkpoints/<stage>/<run_id>``. Under DDP only rank 0 has the run
        id; ModelCheckpoint broadcasts rank 0's folder at setup, so the others' is a placeholder."""
        root = Path(self.setting("trainer.default_root_dir") or os.getcwd())
        return root / "checkpoints" / self.stage / (run_id or "rank-placeholder")


def run_cli(cli_class: type[TrackedCLI], args: list[str] | None = None) -> int:
    """Run a CLI; a :class:`UserError` prints one line and exits 2, any failure marks the
    MLflow run FAILED. Returns the exit status."""
    retain_freed_memory()
    try:
        cli_class(args=args)
    except UserError as error:
        fail_open_runs()
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BaseException:
        fail_open_runs()
        raise
    return 0

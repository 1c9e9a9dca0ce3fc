"""The LightningCLI base of every stage: checks the settings and the store first, names and tags
the stage's MLflow run, resumes a run faithfully from its checkpoint, and turns user mistakes
into one line (:func:`run_cli`)."""

from __future__ import annotations

import os
import sys
from argparse import ArgumentError
from pathlib import Path
from typing import Any

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from pytorch_lightning.cli import LightningCLI
from pytorch_lightning.utilities import rank_zero_only

from harness.cli.console import console_callbacks, quiet_libraries
from harness.cli.flag_errors import flag_error
from harness.cli.precision import FLOAT32, check_precision, default_precision
from harness.cli.runtime import leave_new_memory_unfilled, retain_freed_memory
from harness.diskspace import disk_problem
from harness.errors import UserError
from harness.interruption import EXIT_CODES, interruption, sigterm_as_interrupt
from harness.tracking.experiment_names import experiment_name as checked_experiment_name
from harness.tracking.liveness import mark_dead_runs
from harness.tracking.run_config import MLflowConfig
from harness.tracking.runs import fail_open_runs, keep_checkpoints_in, kill_open_runs, make_logger, server_lost
from harness.tracking.store import auth_denial, check_can_log, prepare_store, tracking_uri
from harness.training.checkpoints import (
    ResumePoint,
    check_checkpoint_room,
    load_weights_only,
    resume_point,
    with_atomic_checkpoints,
)
from harness.training.resume import ResumeState
from harness.unique_keys import install_jsonargparse_loader

RESUMED_TAG = "harness.resumed_from"


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
        kwargs.setdefault("save_config_kwargs", {"overwrite": True, "resolved_params": self.resolved_model_params})
        kwargs.setdefault("auto_configure_optimizers", False)
        super().__init__(*args, **kwargs)

    def init_parser(self, **kwargs):
        # a bad flag: one line (run_cli); a flag in full, as the check before the imports wants (cli_preflight)
        install_jsonargparse_loader()  # a key given twice in a config: one line, not the last value
        return super().init_parser(**{**kwargs, "exit_on_error": False, "allow_abbrev": False})

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument(
            "--experiment_name",
            type=str | None,
            default=self.experiment,
            help="MLflow experiment that receives the run",
        )
        parser.add_argument(
            "--run_name", type=str | None, default=None, help="MLflow run name (default: made from the config)"
        )
        parser.add_argument(
            "--tags", type=dict[str, str], default={}, help='extra MLflow run tags, e.g. --tags=\'{"note": "try"}\''
        )

    def setting(self, key: str, default: Any = None) -> Any:
        """A value of the parsed config of the current subcommand, by dotted key."""
        node = self.config.get(str(self.subcommand), self.config)
        for part in key.split("."):
            node = node.get(part, default) if hasattr(node, "get") else default
        return node

    def experiment_name(self) -> str:
        """``--experiment_name``, else :meth:`default_experiment`; normalised and checked
        (:mod:`harness.tracking.experiment_names`)."""
        name = self.setting("experiment_name")
        return checked_experiment_name(self.default_experiment() if name is None else name, "--experiment_name")

    def default_experiment(self) -> str:
        return self.experiment

    def planned_experiment(self) -> str | None:
        """The experiment the run will go to, as far as the config alone tells (None: not before
        the data is read); checked for write permission before anything is instantiated."""
        name = self.setting("experiment_name")
        return checked_experiment_name(self.experiment if name is None else name, "--experiment_name")

    def run_name(self) -> str:
        return self.stage

    def run_tags(self) -> dict[str, str]:
        return {"stage": self.stage}

    def resolved_model_params(self) -> dict[str, Any]:
        """Model params logged in place of the flags' values (what was resolved or built from them)."""
        return {}

    def stage_callbacks(self, run_id: str) -> list:
        return []

    def check_settings(self) -> None:
        """Refuse settings that cannot give a useful run, before anything is read or created."""
        batch_size = self.setting("data.batch_size")
        if isinstance(batch_size, int) and batch_size < 1:
            raise UserError(f"--data.batch_size={batch_size}: must be at least 1")
        for flag in ("max_epochs", "max_steps"):
            if self.setting(f"trainer.{flag}") == 0:
                raise UserError(
                    f"--trainer.{flag}=0: nothing would be trained, yet the run would count as "
                    f"finished; use at least 1 (or -1 for no limit)"
                )
        check_precision(self.setting("trainer.precision"), self.setting("trainer.accelerator"))

    def resolve_precision(self, resumed_params: dict[str, str] | None = None) -> None:
        """Without ``--trainer.precision``: the precision of the run being resumed (its param; a run
        that recorded none ran Lightning's float32), else this hardware's default
        (``harness.cli.precision``), written into the config, so the Trainer runs it and the run's
        params record it."""
        if self.setting("trainer.precision") is not None:
            return
        trainer = self.config.get(str(self.subcommand), self.config).get("trainer")
        if trainer is None:
            return
        if resumed_params is not None:
            trainer["precision"] = resumed_params.get("trainer.precision", FLOAT32)
        else:
            trainer["precision"] = default_precision(self.setting("trainer.accelerator"))

    def check_before_run(self) -> None:
        """Stage checks that need the instantiated model and data, before the run is created."""

    def parse_arguments(self, parser, args) -> None:
        """After parsing, and before Lightning reads ``--ckpt_path`` (it loads the checkpoint's
        hyper-parameters into the config) or instantiates anything: :meth:`prepare_run`."""
        super().parse_arguments(parser, args)
        self.subcommand = self.config.get("subcommand")
        self.prepare_run()

    def _parse_ckpt_path(self) -> None:
        """The hyper-parameters of the checkpoint ``--ckpt_path`` resumes, put into ``--model`` (as
        LightningCLI does) under the config's own class: Lightning hands them over as a bare dict,
        which jsonargparse checks against the parser's default class (the biLM), so a GPT or
        AWD-LSTM run could not be resumed at all."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return
        hparams = dict(load_weights_only(Path(ckpt_path), f"--ckpt_path={ckpt_path}").get("hyper_parameters") or {})
        hparams.pop("_instantiator", None)
        if not hparams:
            return
        model = self.config[subcommand].get("model")
        class_path = hparams.pop("_class_path", None) or getattr(model, "class_path", None)
        given = {"class_path": class_path, "init_args": hparams} if class_path else hparams
        self.config = self.parser.parse_object({subcommand: {"model": given}}, self.config)

    def prepare_run(self) -> None:
        """Check the settings, prepare the store (created once, under a lock; a server's
        credentials checked), check that this user may log runs into the planned experiment, mark
        KILLED the runs whose process died, then check the checkpoint to resume from, if any: a
        readable training checkpoint of a run of this stage in this store."""
        self.resume_point = None
        self.check_settings()
        uri = tracking_uri()
        prepare_store(uri)
        planned = self.planned_experiment()
        if planned:
            check_can_log(uri, planned)
        client = MlflowClient(uri)
        if rank_zero_only.rank == 0:
            mark_dead_runs(client)
        ckpt_path = self.setting("ckpt_path") if self.subcommand == "fit" else None
        if not ckpt_path:
            self.resolve_precision()
            return
        self.resume_point = resume_point(str(ckpt_path), self.checkpoint_root())
        run_id = self.resume_point.run_id
        try:
            run = client.get_run(run_id)
        except MlflowException:
            raise UserError(
                f"--ckpt_path={ckpt_path}: its run {run_id} is not in {uri}; resume against the "
                f"store it was logged to (MLFLOW_TRACKING_URI)"
            ) from None
        if run.data.tags.get("stage") != self.stage:
            raise UserError(
                f"--ckpt_path={ckpt_path}: run {run_id} is a {run.data.tags.get('stage')} run, not a {self.stage} run"
            )
        check_can_log(uri, client.get_experiment(run.info.experiment_id).name)
        self.config[self.subcommand]["ckpt_path"] = str(self.resume_point.path)
        self.resolve_precision(run.data.params)

    def instantiate_trainer(self, **kwargs):
        self.check_before_run()
        check_checkpoint_room(self.resume_point.directory if self.resume_point else self.checkpoint_root(), self.model)
        tags = {**self.run_tags(), **(self.setting("tags") or {})}
        if self.resume_point:
            tags[RESUMED_TAG] = str(self.resume_point.path)
        logger = make_logger(
            self.experiment_name(),
            self.setting("run_name") or self.run_name(),
            tags,
            run_id=self.resume_point.run_id if self.resume_point else None,
        )
        run_id = logger.run_id
        keep_checkpoints_in(logger, self.checkpoint_dir(run_id))
        trainer_config = self._get(self.config_init, "trainer")
        console, settings = console_callbacks(trainer_config)
        kwargs.update(settings)
        trainer_config["callbacks"] = [
            *(trainer_config.get("callbacks") or []),
            *self.stage_callbacks(run_id),
            ResumeState(run_id),
            *console,
        ]
        plugins = with_atomic_checkpoints(kwargs.pop("plugins", trainer_config.get("plugins")))
        return super().instantiate_trainer(logger=logger, plugins=plugins, **kwargs)

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


def run_cli(cli_class: type[TrackedCLI], args: list[str] | None = None, reraise_interrupt: bool = False) -> int:
    """Run a CLI. Returns the exit status: 2 after a :class:`UserError`, a request the tracking
    server refused (401/403) or a full, read-only or unwritable disk (one line), 1 when the
    tracking server went away during the run (one line), 130 after Ctrl-C and 143 after SIGTERM
    (the runs KILLED, one line saying how to continue them; ``reraise_interrupt``: the
    interruption is raised again instead, for a caller that runs CLIs in its own process); any
    other failure marks the run FAILED and raises."""
    retain_freed_memory()
    leave_new_memory_unfilled()
    quiet_libraries()
    try:
        with sigterm_as_interrupt(only_if_unhandled=True):
            cli_class(args=args)
    except (UserError, ArgumentError) as error:
        fail_open_runs()
        message = (
            flag_error(str(error), args if args is not None else sys.argv[1:])
            if isinstance(error, ArgumentError)
            else error
        )
        print(f"error: {message}", file=sys.stderr)
        return 2
    except BaseException as error:
        denied = auth_denial(error)
        if denied:
            fail_open_runs()
            print(f"error: {denied}", file=sys.stderr)
            return 2
        lost = server_lost()
        if lost:
            print(f"error: {lost}", file=sys.stderr)
            return 1
        signal_name = interruption(error)
        if signal_name:
            print(f"error: interrupted ({signal_name}): {kill_open_runs(signal_name)}", file=sys.stderr)
            if reraise_interrupt:
                raise (error if isinstance(error, KeyboardInterrupt) else KeyboardInterrupt()) from None
            return EXIT_CODES[signal_name]
        fail_open_runs()
        disk = disk_problem(error, f"the run store {tracking_uri()}")
        if disk:
            print(
                f"error: {disk}; free space there or point the run elsewhere (--trainer.default_root_dir, "
                f"--data.cache_dir, MLFLOW_TRACKING_URI)",
                file=sys.stderr,
            )
            return 2
        raise
    return 0

"""LightningCLI of the pretraining stage (``python -m pretrain fit --config ...``)."""

from __future__ import annotations

from datetime import timedelta

from mlflow.exceptions import MlflowException
from pytorch_lightning.callbacks import LearningRateMonitor
from pytorch_lightning.utilities import rank_zero_only

from harness.cli.tracked_cli import TrackedCLI
from harness.datasets.registry import split_title
from harness.datasets.spec import given_flags
from harness.errors import UserError
from harness.tracking.links import summary_lines
from harness.tracking.naming import encoder_label, pretrain_run_name
from harness.tracking.params import log_params
from harness.tracking.seen_text import log_seen_text
from harness.tracking.system_metrics import SystemMetrics
from harness.tracking.views import COMPARE_VIEW
from harness.training.checkpoints import run_checkpoints
from pretrain.callbacks import ExportEncoder, LanguageModelSamples
from pretrain.corpus.corpora import GROUPS, PAIR_TRAIN, SHARED_FOLDERS, entries, log_corpora
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.corpus.evaluation_text import contamination_line
from pretrain.encoders.loading import init_checkpoint
from pretrain.encoders.provenance import SMOKE_TAG, origin_of
from pretrain.encoders.registry import ALIAS, model_name, register_encoder
from pretrain.families import family_of, family_of_lightning_module, pretrained_families
from pretrain.lit_lm import LitLanguageModel
from pretrain.memory import GIB, available_bytes, step_bytes, training_device

DEFAULT_FAMILY = "elmo"
FINETUNE_SMOKE = "configs/downstream/smoke.yaml"  # the finetuning a smoke run's summary suggests
SMOKE_HEADER = "── pretrain finished: a smoke run, a toy that tests the pipeline, not an encoder to transfer ──"


class PretrainCLI(TrackedCLI):
    """``--model`` is a family's LightningModule (default the biLM, ``LitBiLM``); a config picks
    another with ``model: class_path: pretrain.lit_awd_lstm.LitAWDLSTM``."""

    stage = "pretrain"
    experiment = "pretrain"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("subclass_mode_model", True)
        for name in pretrained_families():  # imported, so that --model=LitGPT finds the class by its name
            family_of(name).lightning_class()
        super().__init__(LitLanguageModel, CorpusDataModule, *args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        super().add_arguments_to_parser(parser)
        parser.set_defaults({"model": {"class_path": family_of(DEFAULT_FAMILY).lightning_module}})
        parser.link_arguments("data.vocab_size", "model.init_args.vocab_size", apply_on="instantiate")
        parser.link_arguments("model.init_args.init_from", "data.init_from")
        parser.add_argument(
            "--samples_every_n_steps",
            type=int,
            default=500,
            help="log target/forward/backward LM samples every N steps (0: never)",
        )
        parser.add_argument(
            "--smoke",
            type=bool,
            default=False,
            help="a toy run that tests the pipeline, not an encoder to transfer: tagged smoke=true, "
            "named …·smoke·s0; `latest` takes one only when no other finished run exists",
        )
        parser.add_argument(
            "--checkpoint_every_minutes",
            type=float | None,
            default=10.0,
            help="also write last.ckpt during an epoch, after the first batch that ends this "
            "many minutes after the previous save (null: only at validations; 0: every batch); "
            "--ckpt_path resumes it at the next batch exactly",
        )

    def prepare_run(self) -> None:
        """After the store is ready and before anything is built: the run ``--model.init_from``
        continues, checked once for the model's family and the data's tokenizer kind, then handed
        to both as the run it resolved to (``runs:/<id>``, never ``latest``)."""
        super().prepare_run()
        source = self.setting("model.init_args.init_from")
        if not source:
            return
        family = family_of_lightning_module(str(self.setting("model.class_path"))).name
        resolved = init_checkpoint(str(source), family, self.setting("data.tokenizer"))["source"]
        config = self.config[self.subcommand]
        config["model.init_args.init_from"] = config["data.init_from"] = resolved

    def corpus_label(self) -> str:
        """The pretraining text in a run name: the data set's name for its train sentences, set
        names, ``text`` for files (``mrpc``, ``mrpc+reuters``, ``all-shared``, ``text``)."""
        names = entries(self.setting("data.corpus"))
        if names == list(GROUPS["all-shared"]):
            return "all-shared"
        labels = [
            self.datamodule.pair_data.name if name == PAIR_TRAIN else name if name in SHARED_FOLDERS else "text"
            for name in names
        ]
        return "+".join(dict.fromkeys(labels))

    def run_name(self) -> str:
        """``elmo·2x256·full·mrpc·s0``: family and size first (the runs table shows ~14 characters)."""
        model = self.model
        corpus = self.corpus_label()
        if self.setting("data.extra_corpus"):
            corpus += "+extra"
        return pretrain_run_name(
            model.family,
            model.built_config,
            model.built_config.get("softmax"),
            corpus,
            bool(model.init_source),
            self.setting("seed_everything"),
            bool(self.setting("smoke")),
        )

    def resolved_model_params(self) -> dict:
        """The architecture that was built (a continued run's, with init_from) in place of the flags."""
        return dict(self.model.built_config)

    def run_tags(self) -> dict[str, str]:
        model = self.model
        tags = {
            "stage": self.stage,
            "family": model.family,
            "model": family_of(model.family).short_name,
            "lm_stage": "task" if model.init_source else "general",
            "seed": str(self.setting("seed_everything")),
            "dataset": self.datamodule.pair_data.name,
            "transductive": str(self.setting("data.transductive")).lower(),
        }
        if self.setting("smoke"):
            tags[SMOKE_TAG] = "true"
        if model.init_source:  # ULMFiT stage 2: the run it continues
            tags["init_from"] = model.init_source["source"]
            if model.init_source["run_id"]:
                tags["init_run_id"] = model.init_source["run_id"]
        return tags

    def check_before_run(self) -> None:
        """Refuse, before the run exists, a batch of the longest training sequences that would
        not fit in the memory of the device (see :mod:`pretrain.memory`). A run that continues
        another names it first."""
        if self.model.init_source and rank_zero_only.rank == 0:
            origin = origin_of(self.model.init_source["run_id"])
            print(f"continues: {origin.describe() if origin else self.model.init_source['source']}", flush=True)
        data = self.datamodule
        longest = max(len(ids) for ids in data.train_ids)  # T of the longest batch, boundaries included
        batch_size = min(data.hparams.batch_size, len(data.train_ids))
        device = training_device(self.setting("trainer.accelerator"))
        self.step_memory = step_bytes(self.model.model, data.vocab_size, batch_size, longest)
        free = available_bytes(device)
        if self.step_memory > free:
            raise UserError(
                f"--data.batch_size={data.hparams.batch_size}, --data.max_tokens={data.hparams.max_tokens}:"
                f" a training step on {batch_size} sequences of {longest} tokens needs about "
                f"{self.step_memory / GIB:.1f} GiB, but only {free / GIB:.1f} GiB of {device} memory is "
                f"free; lower one of them"
            )

    def stage_callbacks(self, run_id: str) -> list:
        directory = self.checkpoint_dir(run_id)
        self.export = ExportEncoder(directory)
        return [
            *run_checkpoints(directory, monitor="val_ppl", mode="min", every=self.checkpoint_interval()),
            LearningRateMonitor(logging_interval="epoch"),
            LanguageModelSamples(every_n_steps=self.setting("samples_every_n_steps")),
            self.export,
            SystemMetrics(),
        ]

    def check_settings(self) -> None:
        super().check_settings()
        minutes = self.setting("checkpoint_every_minutes")
        if minutes is not None and minutes < 0:
            raise UserError(f"--checkpoint_every_minutes={minutes:g}: must be 0 or more (null: only at validations)")

    def checkpoint_interval(self) -> timedelta | None:
        minutes = self.setting("checkpoint_every_minutes")
        return None if minutes is None else timedelta(minutes=minutes)

    def before_fit(self) -> None:
        if self.model.tokenizer is None:
            self.model.tokenizer = self.datamodule.tokenizer
        parameters = sum(p.numel() for p in self.model.model.parameters())
        logger = self.trainer.logger
        log_params(
            logger,
            {
                **self.datamodule.summary,
                "parameters": parameters,
                "step_memory_estimate_gib": round(self.step_memory / GIB, 3),
            },
        )
        if self.trainer.is_global_zero:
            log_corpora(logger.experiment, logger.run_id, self.datamodule.corpora)
            continued = self.model.init_source["run_id"] if self.model.init_source else None
            log_seen_text(logger.experiment, logger.run_id, self.datamodule.train_sentences, continued)

    def register(self, run_id: str) -> str | None:
        """Tag the run's ``encoder`` label and register its checkpoint as ``<family>-encoder``, a
        smoke run's as ``<family>-encoder-smoke`` (not a benchmark's own encoder: ``latest`` skips
        those too). Returns the model URI."""
        client, model = self.trainer.logger.experiment, self.model
        client.set_tag(run_id, "encoder", encoder_label(model.family, model.built_config, run_id))
        if "benchmark" in (self.setting("tags") or {}):
            return None
        lm_stage, smoke = "task" if model.init_source else "general", bool(self.setting("smoke"))
        try:
            uri = register_encoder(client, run_id, model.family, lm_stage, smoke)
        except MlflowException as error:  # the run and its checkpoint stand without the registry
            print(f"warning: encoder not registered ({str(error.message).splitlines()[0]})")
            return None
        return f"{uri}  (= models:/{model_name(model.family, lm_stage, smoke)}@{ALIAS})"

    def finetune_flags(self, run_id: str) -> list[str]:
        """The flags of the summary's ``make finetune`` command: this run's encoder on the pair data
        set it read (its ``--data.*`` flags: without them the command would read MRPC), smoke-sized
        after a smoke run (``configs/downstream/smoke.yaml``)."""
        smoke = ["--config", FINETUNE_SMOKE] if self.setting("smoke") else []
        return [*smoke, f"--model.encoder=runs:/{run_id}", *given_flags(self.setting("data") or {})]

    def after_fit(self) -> None:
        if not self.trainer.is_global_zero:
            return
        results, summary = self.export.results, self.datamodule.summary
        data = self.datamodule.pair_data
        held_out = split_title(data, "dev")
        corpora = ", ".join(f"{name} {count}" for name, count in summary["corpus_sentences"].items())
        run_id = self.trainer.logger.run_id
        config = self.model.built_config
        registered = self.register(run_id)
        shape = ", ".join(
            f"{key} {value}"
            for key, value in config.items()
            if key != "vocab_size" and isinstance(value, (int, str)) and not isinstance(value, bool)
        )
        lines = [
            "",
            SMOKE_HEADER if self.setting("smoke") else "── pretrain finished " + "─" * 50,
            f"  model      {self.model.family}: {shape}; vocab {summary['vocab_size']}",
            f"  corpus     {summary['train_sentences']} sentences, {summary['train_tokens']} tokens"
            f"  (held out: {summary['validation_sentences']} {held_out} sentences)",
            f"  sources    {corpora} sentences",
            f"  evaluation {contamination_line(summary)}",
            *([f"  cut        {self.datamodule.cut_note}"] if self.datamodule.cut_note else []),
            f"  val_ppl    {results.get('val_ppl', float('nan')):.2f}  ("
            + ", ".join(
                f"{key.removeprefix('val_ppl_')} {results[key]:.2f}"
                for key in ("val_ppl_fwd", "val_ppl_bwd", "val_ppl_word")
                if key in results
            )
            + f"; best epoch {int(results.get('best_epoch', 0)) + 1})",  # stored 0-based, shown as the log counts
            f"  time       {results.get('train_seconds', 0):.0f} s",
            f"  run        {run_id}  (experiment '{self.experiment_name()}')",
            *(
                [f"  continues  {self.model.init_source['source']}  (its vocabulary and architecture; lm_stage=task)"]
                if self.model.init_source
                else []
            ),
            f"  checkpoint {self.export.best_path}",
            *([f"  registered {registered}"] if registered else []),
            f'  use it     make finetune ARGS="{" ".join(self.finetune_flags(run_id))}"',
            *summary_lines(self.trainer.logger.experiment_id, run_id, view=COMPARE_VIEW),
        ]
        print("\n".join(lines))

"""LightningCLI of the transfer stage (``python -m downstream fit --config configs/downstream/mrpc.yaml``)."""

from __future__ import annotations

import functools
import inspect
import sys

import torch
from jsonargparse.typing import register_type
from pytorch_lightning.callbacks import EarlyStopping, LearningRateMonitor
from pytorch_lightning.cli import LightningCLI
from pytorch_lightning.utilities import rank_zero_only

from downstream.data.pair_datamodule import PairDataModule
from downstream.data.validation_schedule import validation_schedule
from downstream.model.settings import Mix
from downstream.run import encoder_reuse, graded_summary, summary_comparisons
from downstream.run.evaluation import EvaluateBest
from downstream.run.item_intervals import interval_line
from downstream.run.lit_pair import LitPairClassifier
from downstream.run.ui_views import LogDatasets, LogPredictionViews
from harness.cli.tracked_cli import TrackedCLI
from harness.datasets.registry import DATASETS, dataset_name, run_name_prefix, split_title, task_tags
from harness.datasets.spec import SPEC_KEYS
from harness.digests import RecordBestDigest
from harness.errors import UserError
from harness.tracking.links import summary_lines
from harness.tracking.naming import cell_run_name, encoder_label, finetune_run_name
from harness.tracking.params import log_params
from harness.tracking.run_clock import RunTimes
from harness.tracking.seen_text import encoder_seen_text
from harness.tracking.system_metrics import SystemMetrics
from harness.tracking.views import COMPARE_VIEW
from harness.training.checkpoints import run_checkpoints
from harness.training.worker_reuse import reusing
from pretrain.encoders.protocol import Encoder
from pretrain.encoders.provenance import SMOKE_TAG, EncoderOrigin, encoder_summary, origin_of
from pretrain.encoders.references import RANDOM, BadReference, EncoderReference, reference_of

register_type(Mix, serializer=str, deserializer=Mix.parse)  # --model.mix=layer:2 → Mix, printed back as text
SMOKE_HEADER = "── finetune finished on a smoke encoder: a toy, these numbers test the pipeline, not transfer ──"


def resolve_encoder(encoder: str, random_like: str | None, seed: int) -> Encoder:
    """The encoder ``--model.encoder`` names (``pretrain.encoders.references``), parsed here once and
    resolved once: a trained one, or the control — ``random`` (the twin of ``random_like``, default
    the latest pretrain run) or ``random:<encoder>[@<seed>]`` — with untrained weights drawn from
    ``seed`` unless it names one. Errors name the flag whose value is at fault."""
    flag = f"--model.encoder={encoder}"
    try:
        reference = EncoderReference.parse(encoder, random_like).seeded(seed)
    except BadReference as error:
        if encoder == RANDOM and random_like is not None and error.text == random_like:
            flag = f"--model.random_like={random_like}"
        raise UserError(f"{flag}: {error.reason}") from None
    try:
        return encoder_reuse.loaded(reference)
    except UserError as error:  # loading names the source as written: the flag's value, or random_like's
        message = str(error).removeprefix(f"{reference.source}: ").removeprefix(f"{encoder}: ")
        raise UserError(f"{flag}: {message}") from None


def pair_classifier(encoder: str = "latest", random_like: str | None = None, **kwargs) -> LitPairClassifier:
    """The classifier around the encoder ``encoder`` names, resolved here, once per run: the
    model gets the encoder object and the data module is handed the same one (``before_fit``).

    Args:
        encoder: ``runs:/<id>``, ``models:/<name>@<alias>``, ``latest`` (newest finished pretrain
            run), ``latest:<family>``, a checkpoint path, a published model (``hf:<folder>``,
            ``hf:<owner>/<name>``, ``reference:<name>``), or the random-init control: ``random`` or
            ``random:<encoder>[@<seed>]``.
        random_like: with ``encoder=random``, the encoder whose family/architecture/tokenizer to copy.
        **kwargs: the classifier's settings (:class:`LitPairClassifier`).
    """
    resolved = resolve_encoder(encoder, random_like, torch.initial_seed() % 2**31)
    if kwargs.get("finetune", "frozen") != "frozen":  # trained in place: never a benchmark worker's kept one
        resolved = encoder_reuse.own_copy(resolved)
    try:
        return LitPairClassifier(resolved, **kwargs)
    except ValueError as error:  # the classifier's modules name the argument: mix=layer:9: …
        argument = str(error).split("=", 1)[0]
        if argument in inspect.signature(LitPairClassifier).parameters and argument != "encoder":
            raise UserError(f"--model.{error}") from None
        raise


def encoder_kind(encoder: Encoder) -> str:
    """``random`` for the twin, else the family: what a method and a run name start with."""
    return "random" if encoder.is_random else encoder.family


def pretrain_run_tag(encoder: Encoder) -> str:
    """The ``pretrain_run_id`` tag: the run, ``file:<path>``, a published model's source
    (``hf:…``, ``reference:…``), or ``random`` for the control."""
    if encoder.is_random:
        return "random"
    return encoder.run_id or (encoder.source if not encoder.spec.pretrained_here else f"file:{encoder.source}")


class FinetuneCLI(TrackedCLI):
    stage = "finetune"

    def __init__(self, *args, **kwargs):
        super().__init__(pair_classifier, PairDataModule, *args, **kwargs)

    def subcommands(self) -> dict[str, set[str]]:
        """Every LightningCLI subcommand; a benchmark worker's cells only ``fit``, so there the
        parser is built for that one alone (building all four cost ~1–2 s of every cell)."""
        commands = LightningCLI.subcommands()
        return {"fit": commands["fit"]} if reusing() else commands

    def add_arguments_to_parser(self, parser) -> None:
        super().add_arguments_to_parser(parser)
        parser.add_argument(
            "--method", type=str | None, default=None, help="method tag for reports (default: <encoder>-<mix>-<head>)"
        )
        parser.add_argument(
            "--parent_run_id",
            type=str | None,
            default=None,
            help="make this run a child of that MLflow run (benchmarks set it)",
        )
        parser.set_defaults({"experiment_name": None})  # None: the data set's name
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")
        parser.link_arguments("data.positive_class", "model.positive_class", apply_on="instantiate")
        parser.link_arguments("data.target", "model.target", apply_on="instantiate")
        parser.link_arguments("data.score_range", "model.score_range", apply_on="instantiate")

    def default_experiment(self) -> str:
        """The experiment a run goes to without ``--experiment_name``: the data set's name."""
        return self.datamodule.pair_data.name

    def planned_experiment(self) -> str | None:
        """Before the data set is read: ``--experiment_name``, else the data set's name
        (``--data.name`` or its entry's default; None when the flags name no data set yet)."""
        if self.setting("experiment_name"):
            return self.setting("experiment_name")
        section = self.setting("data") or {}
        try:
            return dataset_name({key: section[key] for key in SPEC_KEYS if section.get(key) is not None})
        except UserError:
            return None

    def method(self) -> str:
        """``--method``, else ``<family or random>[-<mode>][-<mix>]-<head>``."""
        model = self.model
        mode = "" if model.hparams.finetune == "frozen" else f"-{model.hparams.finetune}"
        mix = "" if model.mix is None else f"-{model.hparams.mix}"
        return self.setting("method") or f"{encoder_kind(model.encoder)}{mode}{mix}-{model.hparams.head}"

    def run_name(self) -> str:
        """``elmo·scalar·pool-mlp·s0``: the family (or ``random``), mode, mix, head, fraction and
        seed; a benchmark's cell (``--method``): ``<method>·s0``, unique within the benchmark and
        led by its encoder's name (``elmo-reuters-gradual-attn@0.1·s0``). Another data set's name
        leads (``nli3-elmo·…``); a smoke encoder's runs say so (``elmo-smoke·…``, ``random-smoke·…``)."""
        model, seed = self.model, self.setting("seed_everything")
        if self.setting("method"):
            return run_name_prefix(self.datamodule.pair_data) + cell_run_name(self.setting("method"), seed)
        kind = encoder_kind(model.encoder) + ("-smoke" if self.smoke_encoder() else "")
        return run_name_prefix(self.datamodule.pair_data) + finetune_run_name(
            kind,
            model.hparams.finetune,
            None if model.mix is None else model.hparams.mix,
            model.hparams.head,
            self.setting("data.train_fraction"),
            seed,
        )

    def encoder_tag(self) -> str:
        encoder = self.model.encoder
        return encoder_label(
            encoder.family, encoder.config, encoder.run_id, encoder.is_random, getattr(encoder, "name", None)
        )

    def resolved_encoder(self) -> str:
        """What ``--model.encoder`` resolved to, for the params: a valid value of the flag that
        names this very encoder (``runs:/<id>``, a path, ``random:runs:/<id>@<seed>``; never ``latest``)."""
        return str(reference_of(self.model.encoder))

    def resolved_model_params(self) -> dict:
        """The encoder as resolved (never ``latest``) in place of ``model.encoder``/``random_like``,
        and ``standardize`` as applied (never ``auto``)."""
        return {"encoder": self.resolved_encoder(), "random_like": None, "standardize": self.model.hparams.standardize}

    def run_tags(self) -> dict[str, str]:
        model = self.model
        encoder = model.encoder
        tags = {
            "stage": self.stage,
            "method": self.method(),
            "seed": str(self.setting("seed_everything")),
            "pretrain_run_id": pretrain_run_tag(encoder),
            "encoder_source": encoder.copies or encoder.source,
            "family": encoder.family,
            "finetune_mode": model.hparams.finetune,
            "mix": model.hparams.mix,
            "head": model.hparams.head,
            "train_fraction": str(self.setting("data.train_fraction")),
            "dataset": self.datamodule.pair_data.name,
            **task_tags(self.datamodule.pair_data),
            "encoder": self.encoder_tag(),
        }
        if self.smoke_encoder():
            tags[SMOKE_TAG] = "true"
        if self.setting("parent_run_id"):
            tags["mlflow.parentRunId"] = self.setting("parent_run_id")
        return tags

    def check_before_run(self) -> None:
        """The encoder named in the first lines; inputs too long for ``--data.max_tokens``, the
        encoder or the memory: refused before the run exists."""
        if rank_zero_only.rank == 0:
            print(f"encoder: {encoder_summary(self.model.encoder, self.encoder_origin)}", flush=True)
        self.datamodule.check_inputs(self.model.encoder, self.model.input_kind)

    @functools.cached_property
    def encoder_origin(self) -> EncoderOrigin | None:
        """The pretrain run behind the encoder (the twin's: the run it copies), when this store has it."""
        return origin_of(self.model.encoder.run_id)

    def smoke_encoder(self) -> bool:
        return bool(self.encoder_origin and self.encoder_origin.smoke)

    def instantiate_trainer(self, **kwargs):
        """Dev scored ``--data.validations_per_epoch`` times an epoch at every fraction
        (``downstream.data.validation_schedule``), unless ``--trainer.val_check_interval`` says otherwise."""
        if self.setting("trainer.val_check_interval") is None:
            kwargs.update(validation_schedule(self.datamodule.hparams.validations_per_epoch))
        return super().instantiate_trainer(**kwargs)

    def stage_callbacks(self, run_id: str) -> list:
        self.evaluation = EvaluateBest()
        callbacks = [
            *run_checkpoints(self.checkpoint_dir(run_id), monitor=self.model.task.monitor, mode="max"),
            self.evaluation,
            LogPredictionViews(self.evaluation),
            LogDatasets(),
            SystemMetrics(),
            RecordBestDigest(),  # after EvaluateBest: a run that failed there records nothing
            RunTimes(),  # last: time_eval_s covers every output above
        ]
        if self.model.hparams.finetune != "frozen":  # the encoder's per-group rates: lr-AdamW/<group>
            callbacks.append(LearningRateMonitor(logging_interval="step"))
        return callbacks

    def early_stopping_on_the_task(self) -> None:
        """Early stopping follows the task's main dev metric: a config's ``monitor`` that is another
        task's dev metric (``configs/downstream/mrpc.yaml``'s ``dev_acc`` on a graded task) becomes
        ``task.monitor``, said in one line; one the task logs is kept, and any other name is left to
        Lightning, which stops the run naming it (a typo is never silently replaced)."""
        task, name = self.model.task, self.datamodule.pair_data.name
        other_tasks = {metric for entry in DATASETS.values() for metric in entry.task.run_metrics(("dev",))}
        for callback in self.trainer.callbacks:
            mine = task.run_metrics(("dev",))
            if isinstance(callback, EarlyStopping) and callback.monitor in other_tasks - set(mine):
                if rank_zero_only.rank == 0:
                    print(f"early stopping on {task.monitor}: {name} logs no {callback.monitor}", file=sys.stderr)
                callback.monitor = task.monitor

    def before_fit(self) -> None:
        self.early_stopping_on_the_task()
        self.datamodule.attach(self.model.encoder, self.model.input_kind)
        encoder = self.model.encoder
        if self.trainer.is_global_zero:  # a twin: the pairs its pretrained twin read, the same items
            self.evaluation.seen = encoder_seen_text(
                self.trainer.logger.experiment, encoder.run_id, self.datamodule.pair_data.name
            )
        log_params(
            self.trainer.logger,
            {
                **self.datamodule.summary(),
                "encoder_fingerprint": encoder.fingerprint,
                "encoder_run_id": encoder.run_id,
                "encoder_random_seed": encoder.random_seed,
                "encoder_layers": encoder.num_layers,
                "encoder_dim": encoder.dim,
                "trainable_parameters": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            },
        )

    def after_fit(self) -> None:
        if not self.trainer.is_global_zero:
            return
        results = self.evaluation.results
        data = self.datamodule.pair_data
        dev_name, test_name = split_title(data, "dev"), split_title(data, "test")
        f1_kind = "" if data.f1_average == "binary" else " (macro)"
        mix = self.model.mix
        weights = (
            "none (the joint pair classifier)"
            if mix is None
            else "weights ["
            + " ".join(f"{results[f'mix_weight_{k}']:.2f}" for k in range(mix.num_layers))
            + f"]  γ {results['mix_gamma']:.2f}"
        )
        run_id = self.trainer.logger.run_id
        self.twin = summary_comparisons.twin_run(
            self.trainer.logger.experiment, self.trainer.logger.experiment_id, run_id, self.run_tags()
        )
        print(
            "\n".join(
                [
                    "",
                    SMOKE_HEADER if self.smoke_encoder() else "── finetune finished " + "─" * 50,
                    f"  method     {self.method()}  ({'smoke encoder' if self.smoke_encoder() else 'encoder'}"
                    f" {self.model.encoder.source},"
                    f" seed {self.setting('seed_everything')})",
                    f"  train      {len(self.datamodule.pairs['train'])} pairs"
                    f" (fraction {self.setting('data.train_fraction'):g}), {results['train_steps']:.0f} optimiser steps"
                    f" in {results['train_epochs']:.0f} epochs; best dev epoch selected",
                    *summary_comparisons.features_lines(self.model.hparams.finetune, self.model.hparams.standardize),
                    f"  dev        {self.scores_text(results, 'dev', f1_kind)}"
                    f"   ({dev_name}, {len(self.datamodule.pairs['dev'])} pairs)",
                    f"  test       {self.scores_text(results, 'test', f1_kind)}"
                    f"   ({test_name}, {len(self.datamodule.pairs['test'])} pairs)",
                    *self.seen_lines(results, f1_kind),
                    *self.context_lines(results, f1_kind, test_name),
                    f"  mix        {weights}",
                    f"  run        {run_id}  (experiment '{self.experiment_name()}')",
                    *summary_lines(
                        self.trainer.logger.experiment_id,
                        run_id,
                        view=COMPARE_VIEW,
                        compare=[run_id, self.twin.info.run_id] if self.twin else [],
                        compare_label="random twin" if not self.model.encoder.is_random else "pretrained twin",
                    ),
                ]
            )
        )

    def seen_lines(self, results: dict[str, float], f1_kind: str) -> list[str]:
        """The test pairs with a sentence the encoder was pretrained on (a twin: its pretrained
        twin), and the test scores without them; nothing where its pretraining text is unknown."""
        if "test_seen_pairs" not in results:
            return []
        seen, total = int(results["test_seen_pairs"]), len(self.datamodule.pairs["test"])
        reader = "its pretrained twin" if self.model.encoder.is_random else "the encoder"
        if not seen:
            return [f"  seen       no test pair holds a sentence {reader} read in pretraining"]
        unseen = {name.removesuffix("_unseen"): value for name, value in results.items() if name.endswith("_unseen")}
        without = f"; without them {self.scores_text(unseen, 'test', f1_kind)}" if unseen else ""
        return [f"  seen       {seen} of {total} test pairs hold a sentence {reader} read in pretraining{without}"]

    def scores_text(self, results: dict[str, float], split: str, f1_kind: str) -> str:
        """A split's scores in the summary: ``acc 0.735  F1 0.820`` (classes, as fractions), or a
        graded task's ``Pearson r 71.2  Spearman ρ 69.8`` (× 100)."""
        task = self.model.task
        if task.graded:
            return summary_comparisons.scores_text(results, task, split)
        return f"acc {results[f'{split}_acc']:.3f}  F1{f1_kind} {results[f'{split}_f1']:.3f}"

    def context_lines(self, results: dict[str, float], f1_kind: str, test_name: str) -> list[str]:
        """This run's test scores beside its task's baselines (not computed in a benchmark's cell:
        its own baseline cells hold them) and its other arm, ``self.twin``
        (``downstream.run.summary_comparisons``; a graded task's: ``downstream.run.graded_summary``)."""
        data = self.datamodule
        scores = (
            None
            if reusing()
            else summary_comparisons.baseline_scores(
                data.pair_data, data.pairs, None if data.hparams.cache_dir in (None, "none") else data.hparams.cache_dir
            )
        )
        if self.model.task.graded:
            return graded_summary.context_lines(
                results,
                self.evaluation.frames["test"],
                scores,
                self.twin,
                self.model.encoder.is_random,
                self.model.task,
                summary_comparisons.test_pairs_title(test_name, len(data.pairs["test"]), len(data.pair_data.test)),
                summary_comparisons.twin_flags(self.model.encoder),
            )
        return summary_comparisons.context_lines(
            results,
            scores,
            self.twin,
            self.model.encoder.is_random,
            f1_kind,
            test_name,
            summary_comparisons.twin_flags(self.model.encoder),
            collapsed=self.evaluation.frames["test"]["pred"].nunique() == 1,
            test_pairs=len(data.pairs["test"]),
            all_test_pairs=len(data.pair_data.split("test")),
            interval=interval_line(self.evaluation.frames["test"], data.pair_data.positive_label, f1_kind),
        )

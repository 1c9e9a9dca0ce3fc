"""LightningCLI of the transfer stage (``python -m downstream fit --config configs/downstream/mrpc.yaml``)."""

from __future__ import annotations

from downstream.evaluation import EvaluateBest
from downstream.lit_pair import LitPairClassifier
from downstream.mrpc import MRPCPairs
from harness.checkpoints import run_checkpoints
from harness.tracking import TrackedCLI, log_params, ui_hint


class FinetuneCLI(TrackedCLI):
    stage = "finetune"
    experiment = "mrpc"

    def __init__(self, *args, **kwargs):
        super().__init__(LitPairClassifier, MRPCPairs, *args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        super().add_arguments_to_parser(parser)
        parser.add_argument("--method", type=str | None, default=None,
                            help="method tag for reports (default: <encoder>-<mix>-<head>)")
        parser.add_argument("--parent_run_id", type=str | None, default=None,
                            help="make this run a child of that MLflow run (benchmarks set it)")

    def method(self) -> str:
        model = self.model
        return self.setting("method") or f"{model.encoder_kind}-{model.hparams.mix}-{model.hparams.head}"

    def run_name(self) -> str:
        fraction = self.setting("data.train_fraction")
        suffix = f"-frac{fraction:g}" if fraction < 1 else ""
        return f"finetune-{self.method()}{suffix}-seed{self.setting('seed_everything')}"

    def run_tags(self) -> dict[str, str]:
        model = self.model
        tags = {"stage": self.stage, "method": self.method(), "seed": str(self.setting("seed_everything")),
                "pretrain_run_id": model.pretrain_run_id, "encoder_source": model.encoder.source,
                "mix": model.hparams.mix, "head": model.hparams.head,
                "train_fraction": str(self.setting("data.train_fraction"))}
        if self.setting("parent_run_id"):
            tags["mlflow.parentRunId"] = self.setting("parent_run_id")
        return tags

    def stage_callbacks(self, run_id: str) -> list:
        self.evaluation = EvaluateBest()
        return [
            *run_checkpoints(self.checkpoint_dir(run_id), monitor="dev_acc", mode="max"),
            self.evaluation,
        ]

    def before_fit(self) -> None:
        self.datamodule.attach(self.model.encoder)
        encoder = self.model.encoder
        log_params(self.trainer.logger, {
            **self.datamodule.summary(), "encoder_fingerprint": encoder.fingerprint,
            "encoder_layers": encoder.num_layers, "encoder_dim": encoder.dim,
            "trainable_parameters": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
        })

    def after_fit(self) -> None:
        if not self.trainer.is_global_zero:
            return
        results = self.evaluation.results
        weights = " ".join(f"{results[f'mix_weight_{k}']:.2f}" for k in range(self.model.mix.num_layers))
        run_id = self.trainer.logger.run_id
        print("\n".join([
            "",
            "── finetune finished " + "─" * 50,
            f"  method     {self.method()}  (encoder {self.model.encoder.source}, seed {self.setting('seed_everything')})",
            f"  train      {len(self.datamodule.pairs['train'])} pairs"
            f" (fraction {self.setting('data.train_fraction'):g}); best dev epoch selected",
            f"  dev        acc {results['dev_acc']:.3f}  F1 {results['dev_f1']:.3f}"
            f"   (GLUE dev, {len(self.datamodule.pairs['dev'])} pairs)",
            f"  test       acc {results['test_acc']:.3f}  F1 {results['test_f1']:.3f}"
            f"   (MSR test, {len(self.datamodule.pairs['test'])} pairs)",
            f"  mix        weights [{weights}]  γ {results['mix_gamma']:.2f}",
            f"  run        {run_id}  (experiment '{self.setting('experiment_name')}')",
            f"  UI         {ui_hint()}",
        ]))

"""LightningCLI of the pretraining stage (``python -m pretrain fit --config ...``)."""

from __future__ import annotations

from pytorch_lightning.callbacks import LearningRateMonitor

from harness.checkpoints import run_checkpoints
from harness.errors import UserError
from harness.tracking import TrackedCLI, log_params, ui_hint
from pretrain.callbacks import ExportEncoder, LanguageModelSamples
from pretrain.corpus import BiLMDataModule
from pretrain.lit_bilm import LitBiLM
from pretrain.memory import GIB, available_bytes, step_bytes, training_device


class PretrainCLI(TrackedCLI):
    stage = "pretrain"
    experiment = "pretrain"

    def __init__(self, *args, **kwargs):
        super().__init__(LitBiLM, BiLMDataModule, *args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        super().add_arguments_to_parser(parser)
        parser.link_arguments("data.vocab_size", "model.vocab_size", apply_on="instantiate")
        parser.add_argument("--samples_every_n_steps", type=int, default=500,
                            help="log target/forward/backward LM samples every N steps (0: never)")

    def run_name(self) -> str:
        model = self.setting("model")
        corpus = self.setting("data.corpus")
        corpus = "mrpc" if corpus == "mrpc" else "text"
        if self.setting("data.extra_corpus"):
            corpus += "+extra"
        return (f"pretrain-bilm-{model.num_layers}x{model.hidden_size}-{model.softmax}-{corpus}"
                f"-seed{self.setting('seed_everything')}")

    def run_tags(self) -> dict[str, str]:
        return {"stage": self.stage, "model": "bilm", "seed": str(self.setting("seed_everything")),
                "transductive": str(self.setting("data.transductive")).lower()}

    def check_before_run(self) -> None:
        """Refuse, before the run exists, a batch of the longest training sequences that would
        not fit in the memory of the device (see :mod:`pretrain.memory`)."""
        data = self.datamodule
        longest = max(len(ids) for ids in data.train_ids)  # T of the longest batch, boundaries included
        batch_size = min(data.hparams.batch_size, len(data.train_ids))
        device = training_device(self.setting("trainer.accelerator"))
        self.step_memory = step_bytes(self.model.model, data.vocab_size, batch_size, longest)
        free = available_bytes(device)
        if self.step_memory > free:
            raise UserError(f"--data.batch_size={data.hparams.batch_size}, --data.max_tokens={data.hparams.max_tokens}:"
                            f" a training step on {batch_size} sequences of {longest} tokens needs about "
                            f"{self.step_memory / GIB:.1f} GiB, but only {free / GIB:.1f} GiB of {device} memory is "
                            f"free; lower one of them")

    def stage_callbacks(self, run_id: str) -> list:
        directory = self.checkpoint_dir(run_id)
        self.export = ExportEncoder(directory)
        return [
            *run_checkpoints(directory, monitor="val_ppl", mode="min"),
            LearningRateMonitor(logging_interval="epoch"),
            LanguageModelSamples(every_n_steps=self.setting("samples_every_n_steps")),
            self.export,
        ]

    def before_fit(self) -> None:
        self.model.tokenizer = self.datamodule.tokenizer
        parameters = sum(p.numel() for p in self.model.model.parameters())
        log_params(self.trainer.logger, {**self.datamodule.summary, "parameters": parameters,
                                         "step_memory_estimate_gib": round(self.step_memory / GIB, 3)})

    def after_fit(self) -> None:
        if not self.trainer.is_global_zero:
            return
        results, summary = self.export.results, self.datamodule.summary
        run_id = self.trainer.logger.run_id
        lines = [
            "",
            "── pretrain finished " + "─" * 50,
            f"  model      biLM {self.model.hparams.num_layers}×{self.model.hparams.hidden_size}, "
            f"{self.model.hparams.softmax} softmax, vocab {summary['vocab_size']}",
            f"  corpus     {summary['train_sentences']} sentences, {summary['train_tokens']} tokens"
            f"  (held out: {summary['validation_sentences']} GLUE dev sentences)",
            f"  val_ppl    {results.get('val_ppl', float('nan')):.2f}  (fwd {results.get('val_ppl_fwd', float('nan')):.2f},"
            f" bwd {results.get('val_ppl_bwd', float('nan')):.2f}; best epoch {int(results.get('best_epoch', 0))})",
            f"  time       {results.get('train_seconds', 0):.0f} s",
            f"  run        {run_id}  (experiment '{self.setting('experiment_name')}')",
            f"  checkpoint {self.export.best_path}",
            f"  use it     make finetune ARGS=\"--model.encoder=runs:/{run_id}\"",
            f"  UI         {ui_hint()}",
        ]
        print("\n".join(lines))

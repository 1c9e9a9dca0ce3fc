"""The LightningModule every language-model family pretrains with: loss, perplexities,
optimiser and schedule, and a checkpoint that describes itself (family, config, tokenizer).

A family subclasses :class:`LitLanguageModel` with its ``family`` name and its ``config_class``:
the subclass's constructor takes that config's fields, then the optimisation arguments below, so
``--model.hidden_size`` and ``--model.learning_rate`` sit side by side on the command line and
the architecture is written once, in the config dataclass. Perplexities are exp of the mean NLL
over real tokens: ``val_ppl`` (mean over the objective's terms), one per term (``val_ppl_fwd``
and, for the biLM, ``val_ppl_bwd``); ``val_ppl_word`` divides the same NLL by whitespace words
(+1 per sentence for its end) so families with different tokenizers compare.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import fields

import pytorch_lightning as pl
import torch
from torchmetrics import SumMetric

from harness.cli.precision import clip_gradients
from harness.errors import UserError
from harness.training.schedules import SCHEDULES, Schedule, discriminative_groups, scheduler_lambda
from pretrain.encoders.checkpoints import build_tokenizer, tokenizer_state
from pretrain.encoders.loading import init_checkpoint
from pretrain.families import family_of
from pretrain.models.config import ModelConfig
from pretrain.models.objectives import Objective


class LitLanguageModel(pl.LightningModule):
    """Pretrains one family's language model.

    Args:
        config: the family's model config (subclasses take its fields as arguments instead).
        learning_rate: AdamW's rate (the top group's with ``lr_decay``).
        weight_decay: AdamW's weight decay.
        schedule: ``constant``, ``plateau`` (halve the rate when ``val_ppl`` stalls for
            ``plateau_patience`` validations), ``cosine`` (linear warm-up, cosine decay) or ``stlr``
            (ULMFiT's slanted triangular rate, per step).
        plateau_patience: setting it selects ``plateau``.
        warmup_fraction: share of the steps that warm up (``cosine``) or rise (``stlr``'s cut_frac).
        stlr_ratio: ``stlr``'s lowest / highest rate ratio (ULMFiT: 32).
        lr_decay: discriminative rates, each lower parameter group's rate / ``lr_decay`` (1: off).
        init_from: continue from another pretrain run or checkpoint of the same family (ULMFiT's
            target-task LM fine-tuning): its architecture, tokenizer and weights are kept.
    """

    family = ""  # the registry name (pretrain.families)
    config_class: type[ModelConfig] | None = None  # the family's model config
    optimisation_defaults: dict = {}  # a family's own defaults for the arguments above

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "config_class" in cls.__dict__ and "__init__" not in cls.__dict__:
            cls.__init__ = config_constructor(cls)

    def __init__(
        self,
        config: ModelConfig,
        learning_rate: float = 2e-3,
        weight_decay: float = 0.01,
        schedule: Schedule = "constant",
        plateau_patience: int | None = None,
        warmup_fraction: float = 0.1,
        stlr_ratio: float = 32.0,
        lr_decay: float = 1.0,
        init_from: str | None = None,
    ):
        super().__init__()
        if schedule not in SCHEDULES:
            raise UserError(f"--model.schedule={schedule}: choose one of {', '.join(SCHEDULES)}")
        if learning_rate <= 0:
            raise UserError(f"--model.learning_rate={learning_rate}: must be > 0")
        spec = family_of(self.family)
        if not isinstance(config, spec.config):
            raise TypeError(f"{type(self).__name__} trains {spec.config.__name__}, not {type(config).__name__}")
        self.save_hyperparameters(
            {
                **config.to_dict(),
                "learning_rate": learning_rate,
                "weight_decay": weight_decay,
                "schedule": schedule,
                "plateau_patience": plateau_patience,
                "warmup_fraction": warmup_fraction,
                "stlr_ratio": stlr_ratio,
                "lr_decay": lr_decay,
                "init_from": init_from,
            },
            logger=False,
        )
        self.tokenizer = None
        self.init_source: dict | None = None  # the run/file this model continues (init_from)
        initial = None
        if init_from:
            initial = init_checkpoint(init_from, self.family)
            config = spec.config.from_dict(initial["model_config"])
            self.init_source = {"source": initial["source"], "run_id": initial["run_id"]}
        self.config = config
        self.model = spec.build(config)
        if initial is not None:
            self.model.load_state_dict(initial["state_dict"])
            self.tokenizer = build_tokenizer(initial["tokenizer"])
        names = [*self.model.objective.nll_keys, "count", "words"]
        self.validation_sums = torch.nn.ModuleDict({name: SumMetric() for name in names})

    @property
    def built_config(self) -> dict:
        """The built model's config (``init_from``'s architecture when it continues a run), as the
        ``model.*`` params of the run."""
        return self.config.to_dict()

    # --- steps ----------------------------------------------------------------------------

    def sums(self, batch) -> dict[str, torch.Tensor]:
        """The model's NLL sums and counts for a batch ``(ids, lengths[, words])``, plus ``words``
        (whitespace words + 1 per sentence; the token count when the batch does not say)."""
        token_ids, lengths = batch[0], batch[1]
        sums = self.model(token_ids, lengths)
        sums["words"] = batch[2].sum() if len(batch) > 2 else sums["count"]
        return sums

    def training_step(self, batch, batch_index):
        sums = self.sums(batch)
        loss = self.model.objective.mean_nll(sums)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch[1]))
        self.last_train_loss = loss.detach()
        if "regularization" in sums:
            loss = loss + sums["regularization"]
        return loss

    def on_train_epoch_end(self):
        # Steps reach the logger every `log_every_n_steps`; an epoch's last step always does,
        # so even a run shorter than that interval has its train_loss.
        if self.logger is not None and hasattr(self, "last_train_loss"):
            self.logger.log_metrics({"train_loss": float(self.last_train_loss)}, step=self.global_step - 1)

    def validation_step(self, batch, batch_index):
        sums = self.sums(batch)
        for name, metric in self.validation_sums.items():
            metric.update(sums[name].float())

    def on_validation_epoch_end(self):
        totals = {name: metric.compute() for name, metric in self.validation_sums.items()}
        for metric in self.validation_sums.values():
            metric.reset()
        self.log_dict(perplexities(totals, self.model.objective), prog_bar=True)

    @torch.no_grad()
    def evaluate(self, loader) -> dict[str, float]:
        """Perplexities of the current weights over ``loader`` (used on the best checkpoint)."""
        was_training = self.training
        self.eval()
        totals: dict[str, float] = {name: 0.0 for name in self.validation_sums}
        for batch in loader:
            batch = [tensor.to(self.device) for tensor in batch]
            sums = self.sums(batch)
            for name in totals:
                totals[name] += float(sums[name])
        self.train(was_training)
        tensors = {name: torch.tensor(value, dtype=torch.float64) for name, value in totals.items()}
        return {name: float(value) for name, value in perplexities(tensors, self.model.objective).items()}

    # --- optimisation ---------------------------------------------------------------------

    def configure_optimizers(self):
        hparams = self.hparams
        groups = (
            discriminative_groups(self.model.parameter_groups(), hparams.learning_rate, hparams.lr_decay)
            if hparams.lr_decay != 1.0
            else [{"params": list(self.model.parameters())}]
        )
        fused = all(p.device.type in ("cpu", "cuda") for p in self.parameters())
        optimizer = torch.optim.AdamW(groups, lr=hparams.learning_rate, weight_decay=hparams.weight_decay, fused=fused)
        schedule = "plateau" if hparams.plateau_patience is not None else hparams.schedule
        if schedule == "constant":
            return optimizer
        if schedule == "plateau":
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=0.5, patience=hparams.plateau_patience or 0
            )
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "monitor": "val_ppl", "interval": "epoch"},
            }
        total = max(1, int(self.trainer.estimated_stepping_batches))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, scheduler_lambda(schedule, total, hparams.warmup_fraction, hparams.stlr_ratio)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)  # fused AdamW under bf16 too

    # --- checkpoints ----------------------------------------------------------------------

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["family"] = self.family
        checkpoint["model_config"] = self.config.to_dict()
        checkpoint["tokenizer"] = tokenizer_state(self.tokenizer)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.tokenizer = build_tokenizer(checkpoint["tokenizer"])


def perplexities(totals: dict[str, torch.Tensor], objective: Objective) -> dict[str, torch.Tensor]:
    """exp of the mean NLL over real tokens: over the objective's terms (``val_ppl``), per term
    (``val_ppl_fwd``, ``val_ppl_bwd``) and per whitespace word (``val_ppl_word``)."""
    count = totals["count"].clamp(min=1)
    nll = {name: totals[key] for name, key in zip(objective.metric_names, objective.nll_keys)}
    mean_nll = sum(nll.values()) / len(nll)
    results = {"val_ppl": torch.exp(mean_nll / count)}
    for name, value in nll.items():
        results[f"val_ppl_{name}"] = torch.exp(value / count)
    if "words" in totals:
        results["val_ppl_word"] = torch.exp(mean_nll / totals["words"].clamp(min=1))
    return results


def config_constructor(cls: type[LitLanguageModel]):
    """``cls.__init__``: the fields of ``cls.config_class`` (keyword arguments), then those of
    :meth:`LitLanguageModel.__init__` after ``config`` (with ``cls.optimisation_defaults``). Its
    signature and docstring are what LightningCLI reads, so ``--help`` lists every argument."""
    config_class = cls.config_class
    config_names = [field.name for field in fields(config_class)]
    hints = typing.get_type_hints(config_class)
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [
        inspect.Parameter(field.name, keyword, default=field.default, annotation=hints[field.name])
        for field in fields(config_class)
    ]
    base = inspect.signature(LitLanguageModel.__init__).parameters
    base_hints = typing.get_type_hints(LitLanguageModel.__init__)
    parameters += [
        inspect.Parameter(
            name, keyword, annotation=base_hints[name], default=cls.optimisation_defaults.get(name, parameter.default)
        )
        for name, parameter in base.items()
        if name not in ("self", "config")
    ]
    defaults = {parameter.name: parameter.default for parameter in parameters[1:]}

    def __init__(self, **arguments):
        unknown = sorted(set(arguments) - set(defaults))
        if unknown:
            raise TypeError(f"{cls.__name__} got unexpected arguments {', '.join(unknown)}")
        values = {**defaults, **arguments}
        config = config_class.from_dict({name: values.pop(name) for name in config_names})
        LitLanguageModel.__init__(self, config, **values)

    __init__.__signature__ = inspect.Signature(parameters)
    __init__.__doc__ = config_class.__doc__
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__

"""The resolved CLI config of a run, in MLflow: ``config.yaml`` as an artifact and its values as
flat params (LightningCLI's own ``SaveConfigCallback`` writes into a log folder, which a
non-file tracking store lacks)."""

from __future__ import annotations

import time

from pytorch_lightning.cli import SaveConfigCallback
from pytorch_lightning.loggers import MLFlowLogger

from harness.tracking.params import log_params


class MLflowConfig(SaveConfigCallback):
    """Log the resolved config as ``config.yaml`` and as flat ``params`` of the run.

    ``resolved_params``: called at logging time, ``{model key: value}`` that replace the flags'
    values in the params (what the CLI resolved or built, e.g. the encoder a flag named).
    """

    def __init__(self, *args, resolved_params=dict, **kwargs):
        super().__init__(*args, **{**kwargs, "save_to_log_dir": False})
        self.resolved_params = resolved_params

    def save_config(self, trainer, pl_module, stage) -> None:
        logger = trainer.logger
        if not isinstance(logger, MLFlowLogger):
            return
        text = self.parser.dump(self.config, skip_none=False)
        # a resumed fit keeps the config the run started with and adds its own beside it
        name = (
            f"config-resumed-{time.strftime('%Y%m%d-%H%M%S')}.yaml" if self.config.get("ckpt_path") else "config.yaml"
        )
        logger.experiment.log_text(logger.run_id, text, name)
        config = self.config.as_dict()
        for key in ("config", "_instantiator"):
            config.pop(key, None)
        config.get("trainer", {}).pop("callbacks", None)
        config.get("trainer", {}).pop("logger", None)
        model = config.get("model")
        if isinstance(model, dict) and "class_path" in model:  # a family's module: its arguments as model.<arg>
            config["model"] = {"class": model["class_path"], **(model.get("init_args") or {})}
        resolved = self.resolved_params()
        if isinstance(config.get("model"), dict) and resolved:
            config["model"].update(resolved)
        log_params(logger, config)

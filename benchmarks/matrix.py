"""A benchmark's matrix file (``configs/benchmarks/*.yaml``): read, checked (one line per
mistake, naming the file and key), with paths relative to the repository root; the ``budget:``
section that makes the smaller study; the data set's flags for every cell."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks.cells import BASELINES
from benchmarks.plan import LAYERS, TRANSFER_KEYS
from downstream.values import Mix, parse_head
from harness.errors import UserError
from harness.datasets.registry import dataset_name
from harness.datasets.spec import PATH_KEYS, SPEC_KEYS
from harness.tracking import REPO_ROOT

KEYS = {"name", "experiment", "encoders", "finetune", "mixes", "heads", "seeds", "random_control", "baselines",
        "learning_curve", "mrpc_dir", "dataset", "transfers", "fractions", "budget", "linear_probe", "lr_grid",
        "smoke"}
DATASET_KEYS = set(SPEC_KEYS)  # a `dataset:` section holds the --data.* flags of the pair data set


def load_config(path: Path) -> dict:
    """Read and check a suite config; a mistake is one line naming the file and key."""
    if not path.is_file():
        raise UserError(f"--config={path}: no such file")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(config, dict) or not config.get("encoders"):
        raise UserError(f"{path}: needs a mapping with at least `encoders`")
    unknown = set(config) - KEYS
    if unknown:
        raise UserError(f"{path}: unknown key(s) {sorted(unknown)}; known: {sorted(KEYS)}")
    for encoder in config["encoders"]:
        if "name" not in encoder or not ({"run", "pretrain"} & set(encoder)):
            raise UserError(f"{path}: each encoder needs `name` and `run` (latest | runs:/<id> | hf:<folder> | "
                            f"reference:<name>) or `pretrain`")
        stages = encoder.get("pretrain", [])
        if not all(isinstance(stage, dict) and "config" in stage for stage in
                   (stages if isinstance(stages, list) else [stages])):
            raise UserError(f"{path}: encoder '{encoder['name']}': `pretrain` needs `config` (or a list of stages "
                            f"with `config` each)")
    check_matrix(config, path)
    for baseline_name in config.get("baselines", []):
        if baseline_name not in BASELINES:
            raise UserError(f"{path}: unknown baseline {baseline_name!r}; choose from {sorted(BASELINES)}")
    dataset = config.get("dataset")
    if dataset is not None:
        if not isinstance(dataset, dict):
            raise UserError(f"{path}: `dataset` must be a mapping of data flags, e.g. dataset: {{dataset: tsv, "
                            f"train: data/mine/train.tsv, dev: …, test: …}}")
        unknown = set(dataset) - DATASET_KEYS
        if unknown:
            raise UserError(f"{path}: unknown `dataset` key(s) {sorted(unknown)}; known: {sorted(DATASET_KEYS)}")
    config.setdefault("name", path.stem)
    config.setdefault("experiment", dataset_name(dataset_spec(config)))
    config.setdefault("finetune", {"config": "configs/downstream/mrpc.yaml"})
    return config


def check_matrix(config: dict, path: Path) -> None:
    """The matrix's shape and every mix and head in it, read by the flags' own parsers
    (``downstream.values``), so a typo stops the benchmark before anything is pretrained."""
    check_transfers(config.get("transfers"), path, [encoder.get("name") for encoder in config.get("encoders", [])])
    grids = [("lr_grid", config.get("lr_grid", []))] + [
        (f"transfers.{family}.{setting.get('name')}.lr_grid", setting["lr_grid"])
        for family, settings in (config.get("transfers") or {}).items()
        for setting in (settings if isinstance(settings, list) else [settings]) if "lr_grid" in setting]
    for key, grid in grids:
        if not isinstance(grid, list) or not all(isinstance(rate, (int, float)) and rate > 0 for rate in grid):
            raise UserError(f"{path}: `{key}` must be a list of learning rates > 0, e.g. [3.0e-4, 1.0e-3, 3.0e-3]")
    if not isinstance(config.get("smoke", False), bool):
        raise UserError(f"{path}: `smoke` must be true or false (true: tiny encoders that test the pipeline, "
                        f"not transfer; reports say so first)")
    if not isinstance(config.get("linear_probe", False), bool):
        raise UserError(f"{path}: `linear_probe` must be true or false (a probe per encoder and per twin)")
    for key in ("mixes", "heads", "baselines"):
        if not isinstance(config.get(key, []), list):
            raise UserError(f"{path}: `{key}` must be a list, e.g. {key}: [{config[key]}]")
    curve = config.get("learning_curve")
    if curve is not None and not (isinstance(curve, dict) and isinstance(curve.get("fractions"), list)):
        raise UserError(f"{path}: `learning_curve` needs `fractions`, e.g. fractions: [0.1, 0.25, 0.5, 1.0]")
    values = [("mixes", mix, Mix.parse) for mix in config.get("mixes", []) if mix != LAYERS]
    values += [("heads", head, parse_head) for head in config.get("heads", [])]
    if curve:
        values += [("learning_curve.mix", curve["mix"], Mix.parse)] if "mix" in curve else []
        values += [("learning_curve.head", curve["head"], parse_head)] if "head" in curve else []
    for family, settings in (config.get("transfers") or {}).items():
        for setting in settings if isinstance(settings, list) else [settings]:
            where = f"transfers.{family}.{setting['name']}"
            values += [(f"{where}.mix", setting["mix"], Mix.parse)] if "mix" in setting else []
            values += [(f"{where}.heads", head, parse_head) for head in setting.get("heads", [])]
    for where, value, parse in values:
        try:
            parse(value)
        except ValueError as error:
            raise UserError(f"{path}: `{where}`: {error}") from None


def check_transfers(transfers, path: Path, encoder_names: list[str]) -> None:
    """``transfers: {<family>: [{name, config, args, mix, heads}, ...]}``: one line per mistake."""
    if transfers is None:
        return
    if not isinstance(transfers, dict):
        raise UserError(f"{path}: `transfers` maps a family to its transfer settings, e.g. transfers: {{elmo: "
                        f"[{{name: frozen, heads: [attn]}}]}}")
    for family, settings in transfers.items():
        for setting in settings if isinstance(settings, list) else [settings]:
            if not isinstance(setting, dict) or "name" not in setting:
                raise UserError(f"{path}: transfers.{family}: each setting needs a `name`")
            unknown = set(setting) - TRANSFER_KEYS
            if unknown:
                raise UserError(f"{path}: transfers.{family}.{setting['name']}: unknown key(s) {sorted(unknown)}; "
                                f"known: {sorted(TRANSFER_KEYS)}")
            named = setting.get("encoders", [])
            if not isinstance(named, list):
                raise UserError(f"{path}: transfers.{family}.{setting['name']}.encoders must be a list of encoder "
                                f"names, e.g. encoders: [{named}]")
            missing = [name for name in named if name not in encoder_names]
            if missing:
                raise UserError(f"{path}: transfers.{family}.{setting['name']}.encoders: {missing} not in the "
                                f"config's encoders {encoder_names}")


def with_budget(config: dict, path: Path) -> dict:
    """The config with its ``budget:`` section's keys in place of the full study's (``--budget``)."""
    budget = config.get("budget")
    if not isinstance(budget, dict):
        raise UserError(f"--budget: {path} has no `budget:` section (the keys that make the smaller study)")
    unknown = set(budget) - KEYS
    if unknown:
        raise UserError(f"{path}: unknown `budget` key(s) {sorted(unknown)}; known: {sorted(KEYS)}")
    config = {**config, **budget, "name": budget.get("name", f"{config['name']}-budget")}
    check_matrix(config, path)
    return config


def repo_path(path: str) -> Path:
    """Config paths in a suite file are relative to the repository root."""
    return Path(path) if Path(path).is_absolute() else REPO_ROOT / path


def dataset_spec(config: dict) -> dict:
    """The config's ``dataset:`` keys (paths made absolute, relative to the repository root), with
    the older top-level ``mrpc_dir``; empty for the default (MRPC from ``$MRPC_DIR``)."""
    spec = dict(config.get("dataset") or {})
    if config.get("mrpc_dir") and "mrpc_dir" not in spec:
        spec["mrpc_dir"] = config["mrpc_dir"]
    for key in PATH_KEYS:
        if spec.get(key) is not None:
            spec[key] = str(repo_path(str(spec[key])))
    return spec


def data_flags(spec: dict) -> list[str]:
    """The ``--data.*`` flags every pretrain and finetune cell gets for ``spec``."""
    return [f"--data.{key}={str(value).lower() if isinstance(value, bool) else value}"
            for key, value in spec.items() if value is not None]

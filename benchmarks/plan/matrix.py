"""A benchmark's matrix file (``configs/benchmarks/*.yaml``) as a typed :class:`Matrix`: read and
checked once, before any work (one line per mistake, naming the file and key), every default in
this file; paths relative to the repository root; the ``budget:`` section that makes the smaller
study; the data set's flags for every cell."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.cell.method_names import BASELINE_NAMES
from benchmarks.plan.matrix_values import (
    flag_of,
    fractions_of,
    known_keys,
    list_of,
    mapping_of,
    name_of,
    rates_of,
    seeds_of,
    text_of,
)
from benchmarks.plan.pretraining_runs import method_encoder, pretraining_runs_of
from downstream.model.settings import Mix, parse_head
from harness.datasets.registry import DATASETS, dataset_name
from harness.datasets.spec import PATH_KEYS, SPEC_KEYS, PairDataSpec
from harness.errors import UserError
from harness.tracking.experiment_names import experiment_name
from harness.tracking.runs import REPO_ROOT
from harness.unique_keys import load_yaml

KEYS = {
    "name",
    "experiment",
    "encoders",
    "finetune",
    "mixes",
    "heads",
    "seeds",
    "random_control",
    "baselines",
    "learning_curve",
    "mrpc_dir",
    "dataset",
    "transfers",
    "fractions",
    "budget",
    "linear_probe",
    "lr_grid",
    "smoke",
    "comparisons",
    "precision",
}
TRANSFER_KEYS = {"name", "config", "args", "mix", "heads", "fractions", "seeds", "lr_grid", "encoders", "recipe_from"}
CURVE_KEYS = {"fractions", "mix", "head", "seeds"}
ENCODER_KEYS = {"name", "run", "pretrain", "pretraining_runs"}
FINETUNE_KEYS = {"config", "args"}
DATASET_KEYS = set(SPEC_KEYS)  # a `dataset:` section holds the --data.* flags of the pair data set
LAYERS = "layers"  # in `mixes:`, each single layer below the top
FINETUNE_CONFIG = "configs/downstream/mrpc.yaml"
SEEDS = 5
PRECISIONS = ("32-true", "bf16-mixed", "bf16-true", "16-mixed", "64-true")  # Lightning's, as `precision:` takes them
MIX, HEAD = "scalar", "pool-mlp"
PICKED_HEAD = "picked"  # in a transfer's `heads` with `recipe_from`: the head each arm chose on dev


@dataclass(frozen=True)
class Transfer:
    """One way an encoder's family transfers, with what it does not name taken from the matrix."""

    name: str
    fractions: tuple[float, ...]
    seeds: tuple[int, ...]
    lr_grid: tuple[float, ...]
    config: str = ""  # its own finetune config ("": the matrix's)
    args: tuple[str, ...] = ()
    mix: str = MIX
    heads: tuple[str, ...] = (HEAD,)
    encoders: tuple[str, ...] | None = None  # None: every encoder of the family
    recipe_from: str = ""  # a selection's results folder: each arm's rate (and picked head) chosen there on dev
    picks: dict | None = field(default=None, compare=False)  # (kind, encoder, fraction, head) → the
    # arm's pick, once read from recipe_from (benchmarks.plan.recipe_picks); None: not read yet


@dataclass(frozen=True)
class Curve:
    """The learning curve of the mixes × heads matrix: one mix and head at smaller fractions."""

    fractions: tuple[float, ...]
    seeds: tuple[int, ...]
    mix: str = MIX
    head: str = HEAD


@dataclass(frozen=True)
class Matrix:
    """A benchmark's matrix, checked. ``encoders`` are the file's entries (``name`` + ``run`` or
    ``pretrain``); ``source`` is the mapping as read with the defaults of ``name``, ``experiment``
    and ``finetune`` filled in: what the suite's hash and the parent run's params are made of."""

    name: str = "benchmark"
    experiment: str = "mrpc"
    encoders: tuple[dict, ...] = ()
    finetune_config: str = FINETUNE_CONFIG
    finetune_args: tuple[str, ...] = ()
    mixes: tuple[str, ...] = (MIX,)
    heads: tuple[str, ...] = (HEAD,)
    seeds: tuple[int, ...] = tuple(range(SEEDS))
    random_control: bool = True
    baselines: tuple[str, ...] = ()
    learning_curve: Curve | None = None
    fractions: tuple[float, ...] = (1.0,)
    transfers: dict[str, tuple[Transfer, ...]] = field(default_factory=dict)
    linear_probe: bool = False
    lr_grid: tuple[float, ...] = ()
    dataset: dict | None = None
    mrpc_dir: str | None = None
    budget: dict | None = None
    comparisons: tuple[str, ...] = ()  # the pre-registered family: methods whose gap to the twin Holm adjusts
    precision: str | None = None  # every stage's and cell's --trainer.precision (None: the machine's default)
    source: dict = field(default_factory=dict, repr=False, compare=False)


def load_config(path: Path) -> Matrix:
    """Read and check a suite config; a mistake is one line naming the file and key."""
    if not path.is_file():
        raise UserError(f"--config={path}: no such file")
    config = load_yaml(path)  # a syntax error or a key given twice: one line naming the file
    if not isinstance(config, dict) or not config.get("encoders"):
        raise UserError(f"{path}: needs a mapping with at least `encoders`")
    return parse_matrix(config, str(path), path.stem)


def with_budget(matrix: Matrix, path: Path) -> Matrix:
    """The matrix with its ``budget:`` section's keys in place of the full study's (``--budget``)."""
    budget = matrix.budget
    if not isinstance(budget, dict):
        raise UserError(f"--budget: {path} has no `budget:` section (the keys that make the smaller study)")
    source = {**matrix.source, **budget, "name": budget.get("name", f"{matrix.name}-budget")}
    return parse_matrix(source, str(path), matrix.name)


def parse_matrix(mapping: dict, where: str = "matrix", stem: str = "benchmark") -> Matrix:
    """The typed matrix of a mapping as YAML reads it; ``where`` names it in errors."""
    known_keys(mapping, KEYS, where)
    source = dict(mapping)
    source.setdefault("name", stem)
    encoders = encoders_of(source.get("encoders", []), where)
    encoder_names = list(dict.fromkeys(method_encoder(encoder) for encoder in encoders))
    seeds = seeds_of(source.get("seeds", SEEDS), where, "seeds")
    lr_grid = rates_of(source.get("lr_grid", []), where, "lr_grid")
    fractions = fractions_of(source.get("fractions", [1.0]), where, "fractions")
    dataset = source.get("dataset")
    if dataset is not None:
        mapping_of(dataset, where, "dataset", "dataset: {dataset: tsv, train: data/mine/train.tsv, dev: …, test: …}")
        known_keys(dataset, DATASET_KEYS, where, "`dataset`")
    baselines = list_of(source.get("baselines", []), where, "baselines", example="[majority, tfidf-lr]")
    for baseline_name in baselines:
        if baseline_name not in BASELINE_NAMES:
            raise UserError(f"{where}: unknown baseline {baseline_name!r}; choose from {sorted(BASELINE_NAMES)}")
    check_task_baselines(baselines, dataset_spec(source).get("dataset") or PairDataSpec().dataset, where)
    budget = source.get("budget")
    if budget is not None:
        known_keys(mapping_of(budget, where, "budget", "budget: {seeds: 3}"), KEYS, where, "`budget`")
    source.setdefault("experiment", dataset_name(dataset_spec(source)))
    finetune = mapping_of(
        source.setdefault("finetune", {"config": FINETUNE_CONFIG}),
        where,
        "finetune",
        f"finetune: {{config: {FINETUNE_CONFIG}}}",
    )
    known_keys(finetune, FINETUNE_KEYS, where, "`finetune`")
    matrix = Matrix(
        name=name_of(source["name"], where, "name"),
        experiment=experiment_name(source["experiment"], f"{where}: `experiment`"),
        encoders=encoders,
        finetune_config=text_of(finetune.get("config"), where, "finetune.config"),
        finetune_args=list_of(finetune.get("args", []), where, "finetune.args", example='["--trainer.max_epochs=3"]'),
        mixes=list_of(source.get("mixes", [MIX]), where, "mixes", example="[scalar, top]"),
        heads=list_of(source.get("heads", [HEAD]), where, "heads", example="[pool-mlp]"),
        seeds=seeds,
        random_control=flag_of(
            source.get("random_control", True), where, "random_control", "a random-init twin beside every cell"
        ),
        baselines=baselines,
        learning_curve=curve_of(source.get("learning_curve"), where, seeds),
        fractions=fractions,
        transfers=transfers_of(source.get("transfers"), where, encoder_names, seeds, fractions, lr_grid),
        linear_probe=flag_of(
            source.get("linear_probe", False), where, "linear_probe", "a probe per encoder and per twin"
        ),
        lr_grid=lr_grid,
        dataset=dataset,
        mrpc_dir=source.get("mrpc_dir"),
        budget=budget,
        comparisons=comparisons_of(source.get("comparisons", []), where, encoder_names),
        precision=precision_of(source.get("precision"), where),
        source=source,
    )
    check_values(matrix, where)
    return matrix


def precision_of(value, where: str) -> str | None:
    """``precision:``, one Lightning precision for every stage and cell of the matrix, so that chunks of
    one study run on other machines cannot mix precisions (None: each machine's default)."""
    if value is None:
        return None
    if value not in PRECISIONS:
        raise UserError(f"{where}: `precision`: {value!r} is none of {', '.join(PRECISIONS)}")
    return value


def encoders_of(value, where: str) -> tuple[dict, ...]:
    """The ``encoders:`` entries, each a mapping with a name and ``run`` or ``pretrain``."""
    if not isinstance(value, list) or not all(isinstance(encoder, dict) for encoder in value):
        raise UserError(f"{where}: `encoders` must be a list of mappings, e.g. encoders: [{{name: elmo, run: latest}}]")
    for encoder in value:
        if "name" not in encoder or not ({"run", "pretrain"} & set(encoder)):
            raise UserError(
                f"{where}: each encoder needs `name` and `run` (latest | runs:/<id> | hf:<folder> | "
                f"reference:<name>) or `pretrain`"
            )
        name_of(encoder["name"], where, "encoders.name")
        known_keys(encoder, ENCODER_KEYS, where, f"encoder '{encoder['name']}'")
        stages = encoder.get("pretrain", [])
        if not all(
            isinstance(stage, dict) and "config" in stage
            for stage in (stages if isinstance(stages, list) else [stages])
        ):
            raise UserError(
                f"{where}: encoder '{encoder['name']}': `pretrain` needs `config` (or a list of stages "
                f"with `config` each)"
            )
    expanded = [run for encoder in value for run in pretraining_runs_of(encoder, where)]
    names = [encoder["name"] for encoder in expanded]
    if len(set(names)) < len(names):
        raise UserError(
            f"{where}: encoder names must differ; {sorted({n for n in names if names.count(n) > 1})} repeat"
        )
    return tuple(expanded)


def curve_of(curve, where: str, seeds: tuple[int, ...]) -> Curve | None:
    if curve is None:
        return None
    if not (isinstance(curve, dict) and isinstance(curve.get("fractions"), list)):
        raise UserError(f"{where}: `learning_curve` needs `fractions`, e.g. fractions: [0.1, 0.25, 0.5, 1.0]")
    known_keys(curve, CURVE_KEYS, where, "`learning_curve`")
    return Curve(
        fractions_of(curve["fractions"], where, "learning_curve.fractions"),
        seeds_of(curve["seeds"], where, "learning_curve.seeds") if "seeds" in curve else seeds,
        text_of(curve.get("mix", MIX), where, "learning_curve.mix"),
        text_of(curve.get("head", HEAD), where, "learning_curve.head"),
    )


def transfers_of(
    transfers, where: str, encoder_names: list[str], seeds, fractions, lr_grid
) -> dict[str, tuple[Transfer, ...]]:
    """``transfers: {<family>: [{name, config, args, mix, heads, ...}, ...]}``: one line per mistake."""
    if transfers is None:
        return {}
    if not isinstance(transfers, dict):
        raise UserError(
            f"{where}: `transfers` maps a family to its transfer settings, e.g. transfers: {{elmo: "
            f"[{{name: frozen, heads: [attn]}}]}}"
        )
    parsed = {}
    for family, settings in transfers.items():
        family_transfers = []
        for setting in settings if isinstance(settings, list) else [settings]:
            if not isinstance(setting, dict) or "name" not in setting:
                raise UserError(f"{where}: transfers.{family}: each setting needs a `name`")
            key = f"transfers.{family}.{setting['name']}"
            name_of(setting["name"], where, f"transfers.{family}.name")
            known_keys(setting, TRANSFER_KEYS, f"{where}: {key}")
            named = setting.get("encoders")
            if named is not None:
                if not isinstance(named, list):
                    raise UserError(
                        f"{where}: {key}.encoders must be a list of encoder names, e.g. encoders: [{named}]"
                    )
                missing = [name for name in named if name not in encoder_names]
                if missing:
                    raise UserError(f"{where}: {key}.encoders: {missing} not in the config's encoders {encoder_names}")
            family_transfers.append(
                Transfer(
                    name=setting["name"],
                    fractions=fractions_of(setting["fractions"], where, f"{key}.fractions")
                    if "fractions" in setting
                    else fractions,
                    seeds=seeds_of(setting["seeds"], where, f"{key}.seeds") if "seeds" in setting else seeds,
                    lr_grid=rates_of(setting["lr_grid"], where, f"{key}.lr_grid") if "lr_grid" in setting else lr_grid,
                    config=text_of(setting["config"], where, f"{key}.config") if "config" in setting else "",
                    args=list_of(setting.get("args", []), where, f"{key}.args", example='["--model.finetune=gradual"]'),
                    mix=text_of(setting.get("mix", MIX), where, f"{key}.mix"),
                    heads=list_of(setting.get("heads", [HEAD]), where, f"{key}.heads", example="[pool-mlp]"),
                    encoders=None if named is None else tuple(named),
                    recipe_from=text_of(setting["recipe_from"], where, f"{key}.recipe_from")
                    if "recipe_from" in setting
                    else "",
                )
            )
        parsed[str(family)] = tuple(family_transfers)
    return parsed


def comparisons_of(value, where: str, encoder_names: list[str]) -> tuple[str, ...]:
    """``comparisons:``, the pre-registered family: method names (``<encoder>-<transfer>-<head>``,
    ``@<fraction>`` below 100%), each of an encoder of this matrix, none twice."""
    names = list_of(value, where, "comparisons", example="[elmo-reuters-frozen-attn, elmo-reuters-frozen-attn@0.1]")
    for name in names:
        if not any(name.startswith(f"{encoder}-") for encoder in encoder_names):
            raise UserError(
                f"{where}: `comparisons`: {name!r} is no method of an encoder here "
                f"({', '.join(encoder_names)}); a method is named <encoder>-<transfer>-<head>[@fraction]"
            )
    if len(set(names)) < len(names):
        raise UserError(f"{where}: `comparisons` names a method twice")
    return names


def check_values(matrix: Matrix, where: str) -> None:
    """Every mix and head of the matrix, read by the flags' own parsers (``downstream.model.settings``),
    so a typo stops the benchmark before anything is pretrained."""
    if not isinstance(matrix.source.get("smoke", False), bool):
        raise UserError(
            f"{where}: `smoke` must be true or false (true: tiny encoders that test the pipeline, "
            f"not transfer; reports say so first)"
        )
    values = [("mixes", mix, Mix.parse) for mix in matrix.mixes if mix != LAYERS]
    values += [("heads", head, parse_head) for head in matrix.heads]
    if matrix.learning_curve:
        curve = matrix.source["learning_curve"]
        values += [("learning_curve.mix", curve["mix"], Mix.parse)] if "mix" in curve else []
        values += [("learning_curve.head", curve["head"], parse_head)] if "head" in curve else []
    for family, transfers in matrix.transfers.items():
        for transfer in transfers:
            if transfer.recipe_from and transfer.lr_grid:
                raise UserError(
                    f"{where}: transfers.{family}.{transfer.name}: `recipe_from` runs each arm at its pick; "
                    f"an `lr_grid` (here or the matrix's) belongs to the selection's config"
                )
            if PICKED_HEAD in transfer.heads and not transfer.recipe_from:
                raise UserError(
                    f"{where}: transfers.{family}.{transfer.name}: head `{PICKED_HEAD}` (each arm's head "
                    f"chosen on dev) needs `recipe_from: <the selection's results folder>`"
                )
            values += [(f"transfers.{family}.{transfer.name}.mix", transfer.mix, Mix.parse)]
            values += [
                (f"transfers.{family}.{transfer.name}.heads", head, parse_head)
                for head in transfer.heads
                if not (head == PICKED_HEAD and transfer.recipe_from)
            ]  # chosen on dev: see recipe_picks
    for key, value, parse in values:
        try:
            parse(value)
        except ValueError as error:
            raise UserError(f"{where}: `{key}`: {error}") from None


def repo_path(path: str) -> Path:
    """Config paths in a suite file are relative to the repository root."""
    return Path(path) if Path(path).is_absolute() else REPO_ROOT / path


def check_task_baselines(baselines: list[str], dataset: str, where: str) -> None:
    """Every listed baseline is one of the data set's task (``Task.baselines``): a graded task has no
    majority class, a task of classes no overlap cosine; one line naming the config otherwise."""
    if dataset not in DATASETS:
        return  # an unknown data set is named where it is read
    task = DATASETS[dataset].task
    other = [name for name in baselines if name not in task.baselines]
    if other:
        raise UserError(
            f"{where}: baselines: {other[0]!r} is no baseline of {dataset} (a {task.target} task's are "
            f"{', '.join(task.baselines)})"
        )


def dataset_spec(config: Matrix | dict) -> dict:
    """The config's ``dataset:`` keys (paths made absolute, relative to the repository root), with
    the older top-level ``mrpc_dir``; empty for the default (MRPC from ``$MRPC_DIR``)."""
    dataset, mrpc_dir = (
        (config.dataset, config.mrpc_dir)
        if isinstance(config, Matrix)
        else (config.get("dataset"), config.get("mrpc_dir"))
    )
    spec = dict(dataset or {})
    if mrpc_dir and "mrpc_dir" not in spec:
        spec["mrpc_dir"] = mrpc_dir
    for key in PATH_KEYS:
        if spec.get(key) is not None:
            spec[key] = str(repo_path(str(spec[key])))
    return spec


def data_flags(spec: dict) -> list[str]:
    """The ``--data.*`` flags every pretrain and finetune cell gets for ``spec``."""
    return [
        f"--data.{key}={str(value).lower() if isinstance(value, bool) else value}"
        for key, value in spec.items()
        if value is not None
    ]

"""The cost model of a study's plan (``python -m benchmarks.scaleout`` prints it): minutes of each
pretraining stage and cell measured on this machine, the critical path (the longest chain of
pretraining stages plus its longest cell), and the wall time of the executor's own policy (stages
first, then cells in plan order, a task as soon as its CPUs are free) simulated on N CPUs.

The costs file gives, per encoder, the minutes of each pretraining stage (or of one pass over its
corpus, ``{"per_pass": minutes}``: the stage then costs its passes, capped by its ``max_time``) and
the CPUs a stage uses; per ``<family>/<transfer>/<head>`` (or ``<encoder>/<transfer>/<head>``,
for one encoder whose cells cost otherwise, e.g. the calibration's tiny GPT) the minutes of a cell
at each labelled fraction (``default`` for those it does not name), the minutes of a linear probe (``probe``: on the
frozen cells' cached features) and of a baseline; per encoder (``features``) the minutes of
computing one arm's frozen features, paid by the first cell in plan order that reads them (a
probe or a frozen cell; each twin seed is an arm of its own); docs/cluster.md says where each
figure comes from. A cell whose flags turn on ``--data.equal_steps`` trains a full cell's optimiser steps at any
fraction the repeats reach (``downstream.data.equal_steps``), so it costs the ``1`` figure (scaled down
only below what ``--data.max_repeats`` passes make up), whatever its fraction's own figure says."""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.cell.definition import Cell
from benchmarks.plan.cells import plan
from benchmarks.plan.encoders import is_published, pretrain_stages
from benchmarks.plan.matrix import FINETUNE_CONFIG, Matrix, repo_path
from benchmarks.plan.pretraining_runs import method_encoder
from benchmarks.plan.recipe_picks import with_estimated_picks
from benchmarks.plan.trainer_settings import trainer_setting
from downstream.data.equal_steps import DEFAULT_MAX_REPEATS
from harness.errors import UserError
from harness.tracking.runs import REPO_ROOT
from harness.unique_keys import load_yaml


@dataclass
class Costs:
    stages: dict[str, list[float | dict]]  # encoder → minutes of each stage, or {"per_pass": minutes}
    stage_cpus: int
    cells: dict[str, dict[str, float]]  # "<family>/<transfer>/<head>" → {fraction: minutes}
    default: dict[str, float]  # {fraction: minutes}
    baseline: float
    probe: float = 0.8  # a linear probe of one encoder (or twin) on its cached features
    features: dict[str, float] = field(default_factory=dict)  # encoder → minutes of one arm's frozen features

    @classmethod
    def read(cls, path: Path) -> Costs:
        raw = json.loads(path.read_text())
        stages = {
            name: [m if isinstance(m, dict) else float(m) for m in minutes] for name, minutes in raw["stages"].items()
        }
        return cls(
            stages,
            int(raw.get("stage_cpus", 2)),
            raw.get("cells", {}),
            raw["default"],
            float(raw.get("baseline", 0.5)),
            float(raw.get("probe", cls.probe)),
            {name: float(m) for name, m in raw.get("features", {}).items()},
        )

    def cell(self, cell: Cell) -> float:
        """Minutes of ``cell``: its table's figure at its fraction; under equal steps, the full
        cell's figure times the share of a full epoch its repeats make up (1 for 10% and above)."""
        if cell.kind == "baseline":
            return self.baseline
        if cell.kind == "probe":
            return self.probe
        table = self.cells.get(f"{cell.encoder}/{cell.transfer}/{cell.head}") or self.cells.get(
            f"{cell.family}/{cell.transfer}/{cell.head}", self.default
        )
        if cell.train_fraction < 1 and flag_value(cell.args, "data.equal_steps", "false").lower() in TRUE:
            repeats = int(flag_value(cell.args, "data.max_repeats", str(DEFAULT_MAX_REPEATS)))
            return self.minutes(table, 1.0) * min(1.0, repeats * cell.train_fraction)
        return self.minutes(table, cell.train_fraction)

    def planned(self, cells: list[Cell], suite_config: str = FINETUNE_CONFIG) -> dict[int, float]:
        """Minutes of each of ``cells`` (in plan order; by ``id``): :meth:`cell`, plus the
        ``features`` figure of its encoder for the first cell that reads an arm's frozen features."""
        minutes, computed = {}, set()
        for cell in cells:
            minutes[id(cell)] = self.cell(cell)
            if cell.encoder in self.features and reads_frozen_features(cell, suite_config):
                arm = (cell.encoder_run, cell.seed) if "random" in (cell.kind, cell.probe_of) else (cell.encoder_run,)
                if arm not in computed:
                    computed.add(arm)
                    minutes[id(cell)] += self.features[cell.encoder]
        return minutes

    def only(self, encoders: list[dict]) -> Costs:
        """These costs with the stages of ``encoders`` (a study's ``encoders:``) alone, in minutes
        (the file holds every study's; a pretraining run costs what its entry's encoder costs)."""
        return replace(
            self,
            stages={
                encoder["name"]: study_stage_minutes(self.stages[method_encoder(encoder)], encoder)
                for encoder in encoders
            },
        )

    def minutes(self, table: dict[str, float], fraction: float) -> float:
        """``table``'s minutes at ``fraction``, else the default's."""
        return float(table.get(f"{fraction:g}", self.default[f"{fraction:g}"]))


TRUE = ("true", "yes", "on", "1")


def reads_frozen_features(cell: Cell, suite_config: str = FINETUNE_CONFIG) -> bool:
    """Whether ``cell`` trains on cached frozen features: a probe, or a cell whose
    ``--model.finetune`` (its flags, else its config's, else the suite's) is ``frozen``."""
    if cell.kind == "probe":
        return True
    if cell.kind not in ("pretrained", "random"):
        return False
    path = repo_path(cell.config or suite_config)
    config = load_yaml(path) if path.is_file() else {}
    model = (config if isinstance(config, dict) else {}).get("model") or {}
    return flag_value(cell.args, "model.finetune", str(model.get("finetune", "frozen"))) == "frozen"


LIGHTNING_MAX_EPOCHS = 1000  # the Trainer's own limit when neither max_epochs nor max_steps is set


def study_stage_minutes(costs: list[float | dict], encoder: dict) -> list[float]:
    """Minutes of each of ``encoder``'s stages: a fixed figure, or its per-pass figure times the
    stage's passes (its ``--trainer.max_epochs``, else its config's), capped by its ``max_time``."""
    if not any(isinstance(cost, dict) for cost in costs):
        return list(costs)
    stages = pretrain_stages(encoder)
    if len(stages) != len(costs):
        raise UserError(f"costs of encoder {encoder['name']!r}: {len(costs)} stage(s), its config has {len(stages)}")
    return [
        per_pass_minutes(float(cost["per_pass"]), stage) if isinstance(cost, dict) else cost
        for cost, stage in zip(costs, stages)
    ]


def per_pass_minutes(per_pass: float, stage: dict) -> float:
    """``per_pass`` minutes times the stage's passes, capped by its ``max_time`` (``DD:HH:MM:SS``)."""
    config, args = str(repo_path(stage["config"])), list(stage.get("args", []))
    passes = float(trainer_setting(config, args, "max_epochs") or LIGHTNING_MAX_EPOCHS)
    cap = trainer_setting(config, args, "max_time")
    if cap is None:
        return per_pass * passes
    try:
        days, hours, minutes, seconds = (int(part) for part in str(cap).split(":"))
    except ValueError:
        raise UserError(f"{stage['config']}: max_time {cap!r} is not DD:HH:MM:SS") from None
    return min(per_pass * passes, days * 1440 + hours * 60 + minutes + seconds / 60)


def flag_value(args: list[str], name: str, default: str) -> str:
    """The value of the last ``--<name>=<value>`` in ``args`` (a later flag wins, as in the CLI)."""
    values = [argument.split("=", 1)[1] for argument in args if argument.startswith(f"--{name}=")]
    return values[-1] if values else default


def study_plan(config: Matrix) -> list[Cell]:
    """The plan with stand-in encoders (family = the name's first part, ``hf`` for a published one;
    no run needed); every finetune cell carries the suite's ``finetune.args`` as it would run, and
    each ``recipe_from`` arm its pick where ``config`` holds it (read from its selection folder),
    else the dearest head it may pick (``attn``)."""
    encoders = [
        {
            "name": e["name"],
            "run_id": e["name"],
            "num_layers": 3,
            "family": "hf" if is_published(e) else e["name"].split("-")[0],
        }
        for e in config.encoders
    ]
    return plan(with_estimated_picks(config), encoders, list(config.finetune_args))


COSTS_FILE = REPO_ROOT / "benchmarks/scaleout-costs.json"


def cell_seconds_estimate() -> Callable[[Cell], float | None] | None:
    """A cell's seconds by the cost table (the study's ETA before a cell of its kind has run; None
    for a fraction the table has no figure for); None without the table."""
    if not COSTS_FILE.is_file():
        return None
    costs = Costs.read(COSTS_FILE)

    def seconds(cell: Cell) -> float | None:
        try:
            return 60 * costs.cell(cell)
        except KeyError:
            return None

    return seconds


def critical_path(costs: Costs, cells: list[Cell], suite_config: str = FINETUNE_CONFIG) -> float:
    """Minutes of the longest chain: an encoder's stages, then its longest cell."""
    longest, minutes = {}, costs.planned(cells, suite_config)
    for cell in cells:
        longest[cell.encoder_run] = max(longest.get(cell.encoder_run, 0.0), minutes[id(cell)])
    return max(sum(costs.stages.get(name, [])) + longest.get(name, 0.0) for name in {*costs.stages, *longest})


def simulate(costs: Costs, cells: list[Cell], cpus: int, suite_config: str = FINETUNE_CONFIG) -> float:
    """Wall minutes on ``cpus`` CPUs under the executor's policy (stages first, then cells in plan
    order, each dispatched when its encoder is ready and its CPUs are free)."""
    minutes = costs.planned(cells, suite_config)
    by_encoder: dict[str, list[Cell]] = {}
    for cell in cells:
        if cell.kind != "baseline":  # queued first, below, once
            by_encoder.setdefault(cell.encoder_run, []).append(cell)  # the plan's run id: its encoder's name
    stage_queue = [(name, 0) for name in costs.stages if costs.stages[name]]
    cell_queue = [cell for cell in cells if cell.kind == "baseline"]
    cell_queue += [cell for name, group in by_encoder.items() if not costs.stages.get(name) for cell in group]
    running: list[tuple[float, int, str, object]] = []  # (end, order, kind, payload)
    now, free, order = 0.0, cpus, 0
    stage_cpus = min(costs.stage_cpus, cpus)
    while stage_queue or cell_queue or running:
        while stage_queue and free >= stage_cpus:
            name, index = stage_queue.pop(0)
            heapq.heappush(running, (now + costs.stages[name][index], order, "stage", (name, index)))
            free, order = free - stage_cpus, order + 1
        while cell_queue and not (stage_queue and free < stage_cpus) and free >= 1:
            cell = cell_queue.pop(0)
            heapq.heappush(running, (now + minutes[id(cell)], order, "cell", cell))
            free, order = free - 1, order + 1
        end, _, kind, payload = heapq.heappop(running)
        now = end
        if kind == "cell":
            free += 1
            continue
        free += stage_cpus
        name, index = payload
        if index + 1 < len(costs.stages[name]):
            stage_queue.append((name, index + 1))
        else:
            cell_queue += by_encoder.get(name, [])
    return now

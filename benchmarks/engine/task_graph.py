"""The study as a graph of tasks. Each pretraining stage and each cell is a task of the engine
(:mod:`benchmarks.engine.ray_cluster`); a stage waits for the stage before it, an encoder's cells wait for its
last stage (they are planned once its run is known, so cells of a finished encoder start while
other encoders still pretrain), and independent encoders pretrain side by side when CPUs allow.

The driver keeps no more tasks in flight than the cluster's CPUs (``--jobs`` on a local
instance), stages first: a stage is on the critical path, and a queue of one-CPU cells would
otherwise starve a stage that needs several. Cells found already finished (by their settings
hash) are reused or linked, never run again: looked for when planned and again when dispatched,
so a cell that another benchmark on the same store finished meanwhile is linked, not trained
again. The first task that fails stops the study: the tasks in flight are cancelled (their runs
end KILLED) and the failure is one line."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from mlflow.tracking import MlflowClient

from benchmarks.cell.definition import Cell
from benchmarks.engine.progress import Progress, time_split
from benchmarks.plan.cells import baseline_cells, matrix_entry, plan
from benchmarks.plan.cost_model import cell_seconds_estimate
from benchmarks.plan.encoders import Stage, describe_encoder, stage_hashes, stages_of
from benchmarks.plan.matrix import Matrix, repo_path
from benchmarks.plan.pretraining_runs import method_encoder
from benchmarks.results_files.folder import ResultSet
from benchmarks.results_files.store_transfer import import_cell
from benchmarks.tasks.attempts import end_cancelled_runs
from benchmarks.tasks.entry_points import Study, cell_log, run_baseline, run_cell, run_probe, run_stage
from benchmarks.tasks.resources import cell_resources, stage_resources
from benchmarks.tasks.reuse import finished_run, result_numbers, reused_stages
from harness.datasets.types import PairData
from harness.errors import UserError
from harness.protocol import settings_hash
from harness.tracking.runs import tracking_uri

WAIT_SECONDS = 5.0  # how often the driver looks at the cluster's size while tasks run


class StudyStopped(Exception):
    """A task failed for a reason that is not the user's (its worker died more often than the
    retries allow, say). ``str(error)`` is one line."""


@dataclass(eq=False)
class Task:
    kind: str  # stage | cell | baseline | probe
    label: str
    function: Callable
    args: tuple
    resources: dict
    on_done: Callable[[dict], None]
    log: Path | None = None
    cell: Cell | None = None  # a cell's task: looked for in the store again before it is dispatched
    cell_hash: str = ""

    @property
    def cpus(self) -> int:
        return int(self.resources.get("num_cpus", 1))


def encoder_cells(matrix: Matrix, encoder: dict, names: list[str], finetune_args: list[str]) -> list[Cell]:
    """The cells of one encoder as the whole plan names them (``random(<name>)`` when there are
    several encoders), before the other encoders are known: they stand in with no cells."""
    stand_ins = [
        encoder
        if name == encoder["name"]
        else {"name": name, "run_id": f"stand-in:{name}", "family": "", "num_layers": 1}
        for name in names
    ]
    method_name = method_encoder(matrix_entry(matrix, encoder))  # a pretraining run's cells: its entry's name
    return [
        cell
        for cell in plan(replace(matrix, baselines=()), stand_ins, finetune_args)
        if cell.encoder == method_name and cell.encoder_run == encoder["run_id"]
    ]


class StudyExecutor:
    """Runs one benchmark's stages and cells under its parent run and prints their progress."""

    def __init__(
        self,
        engine,
        study: Study,
        config: Matrix,
        data: PairData,
        finetune_config: str,
        finetune_args: list[str],
        pretrain_threads: int,
        given: dict[str, str | None],
        results: ResultSet | None = None,
    ):
        self.engine, self.study, self.config, self.data = engine, study, config, data
        self.results = results or ResultSet([])  # cells finished elsewhere (``--results`` folders)
        self.finetune_config, self.finetune_args, self.pretrain_threads = (
            finetune_config,
            finetune_args,
            pretrain_threads,
        )
        self.given = given  # encoder name → the run its `run:` names (None: pretrained here)
        self.client = MlflowClient(tracking_uri())
        self.names = [encoder["name"] for encoder in config.encoders]
        self.stages: deque[Task] = deque()
        self.cells: deque[Task] = deque()
        self.in_flight: dict[object, Task] = {}
        self.described: dict[str, dict] = {}
        self.run_ids: dict[tuple[str, int], str] = {}
        self.linked: list[str] = []  # cells found finished under another benchmark's parent
        self.show_pending = False  # print the study's line once the freed CPUs have new tasks
        self.progress = Progress(
            sum(len(stages_of(encoder)) for encoder in config.encoders if not given[encoder["name"]]),
            len(self.names),
            cell_seconds_estimate(),
        )

    # ── the graph ─────────────────────────────────────────────────────────────────────────────

    def run(self) -> tuple[list[dict], list[tuple[Cell, str]]]:
        """Every encoder (described) and every cell's run id, in the order of the plan."""
        baselines = [
            replace(cell, record={"order": [len(self.names), index]})
            for index, cell in enumerate(baseline_cells(self.config))
        ]
        self.progress.planned(baselines, encoder=False)
        for encoder in self.config.encoders:
            self.start_encoder(encoder)
        for cell in baselines:
            self.add_cell(cell)
        try:
            self.drain()
        except BaseException:
            cancelled_at = int(time.time() * 1000)
            self.engine.cancel(list(self.in_flight))
            end_cancelled_runs(self.study.driver, cancelled_at)
            raise
        encoders = [self.described[name] for name in self.names]
        cells = plan(self.config, encoders, self.finetune_args)
        return encoders, [(cell, self.run_ids[(cell.method, cell.seed)]) for cell in cells]

    def start_encoder(self, encoder: dict) -> None:
        run_id = self.given[encoder["name"]]
        if run_id is not None:
            self.encoder_ready(encoder, run_id)
            return
        stages = stages_of(encoder)
        identity = stage_hashes(stages, self.study.data_digest)[-1]
        recorded = self.results.encoder(identity)
        if recorded is not None and self.all_cells_found({**recorded, "name": encoder["name"]}):
            print(
                f"  encoder '{encoder['name']}': every cell is in the results folders; not pretrained again", flush=True
            )
            self.encoder_described(encoder, {**recorded, "name": encoder["name"]})
            return
        done, run_id = reused_stages(stages, self.study.data_digest)
        self.progress.stages_done += done
        if done == len(stages):
            self.encoder_ready(encoder, run_id)
        else:
            self.add_stage(encoder, stages, done, run_id)

    def add_stage(self, encoder: dict, stages: list[Stage], index: int, previous_run_id: str | None) -> None:
        stage = stages[index]
        args = stage.flags(previous_run_id)
        previous_hash = stage_hashes(stages[:index], self.study.data_digest)[-1] if index else None
        resources = stage_resources(stage.config, args, self.pretrain_threads)
        devices = max(1, resources["num_cpus"] // self.pretrain_threads) if not resources["num_gpus"] else 1
        resources["num_cpus"] = min(resources["num_cpus"], self.engine.largest_node())  # else never placed
        threads = max(1, resources["num_cpus"] // devices)
        label = f"encoder '{encoder['name']}' stage {stage.number} ({stage.config} {' '.join(args)})"
        self.stages.append(
            Task(
                "stage",
                label,
                run_stage,
                (stage, previous_run_id, self.study, threads, previous_hash),
                resources,
                lambda value: self.stage_done(encoder, stages, index, value),
                self.study.logs / stage.log_name(),
            )
        )

    def stage_done(self, encoder: dict, stages: list[Stage], index: int, value: dict) -> None:
        self.progress.stages_done += 1
        how = "found finished" if value["reused"] else f"{value['seconds'] / 60:.1f} min{self.where(value)}"
        if value.get("resumed"):
            how += ", resumed from the last checkpoint of a stopped attempt"
        print(
            f"  pretrained encoder '{encoder['name']}' stage {index + 1}/{len(stages)}: run {value['run_id']} ({how})",
            flush=True,
        )
        if index + 1 < len(stages):
            self.add_stage(encoder, stages, index + 1, value["run_id"])
        else:
            self.encoder_ready(encoder, value["run_id"])
        self.show_pending = True

    def encoder_ready(self, encoder: dict, run_id: str) -> None:
        given = self.given[encoder["name"]] is not None
        identity = None if given else stage_hashes(stages_of(encoder), self.study.data_digest)[-1]
        self.encoder_described(encoder, describe_encoder(encoder, run_id, identity))

    def planned_cells(self, described: dict) -> list[Cell]:
        """The encoder's cells, each with its place in the plan and the encoder it uses."""
        cells = encoder_cells(self.config, described, self.names, self.finetune_args)
        order = self.names.index(described["name"])
        for index, cell in enumerate(cells):
            cell.record = {"order": [order, index], "encoder": described}
        return cells

    def all_cells_found(self, described: dict) -> bool:
        """Whether every cell of the encoder finished already, here or in the results folders."""
        for cell in self.planned_cells(described):
            cell_hash = self.cell_settings(cell)[1]
            if cell_hash not in self.results.cells and finished_run(self.study.experiment, cell_hash) is None:
                return False
        return True

    def encoder_described(self, encoder: dict, described: dict) -> None:
        self.described[encoder["name"]] = described
        cells = self.planned_cells(described)
        self.progress.planned(cells)
        for cell in cells:
            self.add_cell(cell)

    def cell_settings(self, cell: Cell) -> tuple[str, str]:
        """The cell's finetune config and its settings hash."""
        cell_config = str(repo_path(cell.config)) if cell.config else self.finetune_config
        config_text = Path(cell_config).read_text() if Path(cell_config).is_file() else ""
        spec = {**cell.spec(), "method": cell.method, "config_text": config_text, "data": self.data.content_hash}
        cell.record["spec"] = spec  # kept with the result: a results file's hash is checked against it
        return cell_config, settings_hash(spec)

    def add_cell(self, cell: Cell) -> None:
        cell_config, cell_hash = self.cell_settings(cell)
        found = finished_run(self.study.experiment, cell_hash, self.study.parent)
        recorded = self.results.cells.get(cell_hash)
        if found is None and recorded is not None and recorded.same_encoder(cell.record.get("encoder")):
            run_id = import_cell(recorded, self.study.experiment, self.study.parent)
            self.cell_done(cell, {"run_id": run_id, "reused": True}, f"from results {recorded.folder.name}")
            return
        if found is not None:
            self.take_finished(cell, cell_hash, found)
            return
        label = f"cell {cell.method} seed {cell.seed}"
        if cell.kind in ("baseline", "probe"):
            function = run_baseline if cell.kind == "baseline" else run_probe
            task = Task(
                cell.kind,
                label,
                function,
                (cell, self.data, cell_hash, self.study),
                {"num_cpus": 1},
                lambda value: self.cell_done(cell, value),
                cell=cell,
                cell_hash=cell_hash,
            )
        else:
            task = Task(
                "cell",
                label,
                run_cell,
                (cell, cell_config, cell_hash, self.study),
                cell_resources(cell_config, cell.args),
                lambda value: self.cell_done(cell, value),
                cell_log(self.study.logs, cell),
                cell=cell,
                cell_hash=cell_hash,
            )
        self.cells.append(task)

    def take_finished(self, cell: Cell, cell_hash: str, found: str) -> None:
        """Reuse the finished run ``found`` of this benchmark, or link another benchmark's."""
        run = self.client.get_run(found)
        recorded = self.results.cells.get(cell_hash)
        if recorded is not None and result_numbers(recorded.record["metrics"]) != result_numbers(run.data.metrics):
            raise UserError(
                f"cell {cell.method} seed {cell.seed} ({cell_hash}): run {found} of this store and "
                f"{recorded.path} have other numbers; not reused, none is chosen: delete the wrong "
                f"copy or leave its folder out"
            )
        owner = run.data.tags.get("mlflow.parentRunId")
        if owner != self.study.parent:
            self.linked.append(found)
        self.cell_done(
            cell,
            {"run_id": found, "reused": True},
            "reused" if owner == self.study.parent else f"linked from benchmark {str(owner)[:8]}",
        )

    def finished_meanwhile(self, task: Task) -> bool:
        """Whether the cell of ``task`` was finished since it was planned (by another benchmark on
        the same store, say); then it is taken as found, not dispatched."""
        if task.cell is None:
            return False
        found = finished_run(self.study.experiment, task.cell_hash, self.study.parent)
        if found is None:
            return False
        self.take_finished(task.cell, task.cell_hash, found)
        return True

    def cell_done(self, cell: Cell, value: dict, status: str | None = None) -> None:
        self.run_ids[(cell.method, cell.seed)] = value["run_id"]
        metrics = self.client.get_run(value["run_id"]).data.metrics
        if status is None:
            status = (
                "reused" if value["reused"] else f"{value['seconds']:.0f} s{self.where(value)}{time_split(metrics)}"
            )
        self.progress.finished(cell, None if value["reused"] else value["seconds"])
        task = self.data.task
        scores = {name: metrics[name] for name in (task.monitor, f"test_{task.main_metric}")}
        print(self.progress.cell_line(cell.method, cell.seed, scores, status), flush=True)
        if self.progress.due():
            self.show_pending = True

    # ── dispatching ───────────────────────────────────────────────────────────────────────────

    def drain(self) -> None:
        while True:
            self.submit_ready()
            if not self.in_flight:
                return
            if self.show_pending:
                self.show_study()
                self.show_pending = False
            for handle in self.engine.wait(list(self.in_flight), WAIT_SECONDS):
                task = self.in_flight.pop(handle)
                task.on_done(self.outcome(task, handle))

    def submit_ready(self) -> None:
        """Stages first; cells only once no stage is waiting for CPUs."""
        capacity = self.engine.capacity() if (self.stages or self.cells) else 0
        used = sum(task.cpus for task in self.in_flight.values())
        for queue in (self.stages, self.cells):
            while queue and (used + queue[0].cpus <= capacity or not self.in_flight):
                task = queue.popleft()
                if self.finished_meanwhile(task):
                    continue
                if task.kind == "stage":
                    print(f"  pretraining {task.label} on {task.cpus} CPU(s) …", flush=True)
                self.in_flight[self.engine.submit(task.function, task.args, task.resources)] = task
                used += task.cpus
            if queue:
                return

    def outcome(self, task: Task, handle) -> dict:
        """The task's value; a failure stops the study in one line."""
        try:
            return self.engine.result(handle)
        except UserError:
            raise
        except Exception as error:  # noqa: BLE001 - a lost worker or node, after the retries
            first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
            where = f"; its output is in {task.log}" if task.log else ""
            raise StudyStopped(f"{task.label} failed: {type(error).__name__}: {first}{where}") from None

    def where(self, value: dict) -> str:
        address, _, node_id = value["node"].partition("/")
        return f" on node {address}/{node_id[:6]}" if self.engine.nodes() > 1 else ""

    def show_study(self) -> None:
        print(self.progress.study_line(len(self.in_flight), self.engine.capacity()), flush=True)

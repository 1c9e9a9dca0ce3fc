"""The study's executor without a store or an engine (fast): what each task asks for, the graph
(a cell is dispatched only once its encoder's last stage has finished; independent encoders'
stages are in flight together when CPUs allow; stages go before cells), the progress lines, and a
failing task stopping the study with the tasks in flight cancelled."""

from types import SimpleNamespace

import pytest

from benchmarks.cell.definition import Cell
from benchmarks.engine import task_graph as executor_module
from benchmarks.engine.progress import Progress
from benchmarks.engine.ray_cluster import paths_to_check
from benchmarks.engine.task_graph import StudyExecutor, encoder_cells
from benchmarks.plan.cells import plan
from benchmarks.plan.cost_model import cell_seconds_estimate
from benchmarks.plan.matrix import parse_matrix
from benchmarks.tasks.entry_points import Study
from benchmarks.tasks.resources import cell_resources, stage_resources
from harness.datasets.task import CLASSES
from harness.errors import UserError


def test_a_cell_asks_one_cpu_and_a_gpu_per_device_only_when_its_trainer_asks(tmp_path):
    config = tmp_path / "finetune.yaml"
    config.write_text("trainer:\n  accelerator: auto\n  devices: auto\n")
    assert cell_resources(str(config), []) == {"num_cpus": 1, "num_gpus": 0}
    assert cell_resources(str(config), ["--trainer.accelerator=gpu"]) == {"num_cpus": 1, "num_gpus": 1}
    assert cell_resources(str(config), ["--trainer.accelerator=cuda", "--trainer.devices=2"])["num_gpus"] == 2


def test_a_stage_asks_devices_times_threads_or_a_gpu_and_a_cpu_per_device(tmp_path):
    config = tmp_path / "pretrain.yaml"
    config.write_text("trainer:\n  max_epochs: 1\n")
    assert stage_resources(str(config), [], threads=2) == {"num_cpus": 2, "num_gpus": 0}
    ddp = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
    assert stage_resources(str(config), ddp, threads=3) == {"num_cpus": 6, "num_gpus": 0}
    config.write_text("trainer:\n  accelerator: gpu\n  devices: [0, 1]\n")
    assert stage_resources(str(config), [], threads=4) == {"num_cpus": 2, "num_gpus": 2}


def test_an_encoders_cells_are_named_as_the_whole_plan_names_them():
    config = {
        "mixes": ["scalar", "layers"],
        "heads": ["pool-mlp"],
        "seeds": 2,
        "random_control": True,
        "baselines": ["majority"],
    }
    encoders = [{"name": "elmo", "run_id": "a", "num_layers": 3}, {"name": "big", "run_id": "b", "num_layers": 2}]
    config = parse_matrix(config)
    whole = plan(config, encoders, ["--x"])
    for encoder in encoders:
        alone = encoder_cells(config, encoder, ["elmo", "big"], ["--x"])
        assert alone == [cell for cell in whole if cell.encoder == encoder["name"]]
    assert encoder_cells(config, encoders[0], ["elmo", "big"], [])[1].method == "random(elmo)-scalar-pool-mlp"


def test_paths_every_node_must_read_come_from_flags_and_lists(tmp_path):
    corpus, other = tmp_path / "a.txt", tmp_path / "b.txt"
    corpus.write_text("x\n")
    other.write_text("y\n")
    found = paths_to_check(
        [f"--data.extra_corpus=[{corpus},{other}]", "--trainer.max_epochs=3", "relative.txt"], [str(corpus)]
    )
    assert found == [str(corpus), str(other)]


def test_the_progress_lines_count_cells_as_they_end_and_say_when_more_are_coming():
    heads = [
        Cell("elmo-scalar", "pretrained", seed, family="elmo", transfer="frozen", head="attn") for seed in range(4)
    ]
    progress = Progress(stages_total=2, encoders_total=2)
    progress.planned(heads)
    assert progress.eta_minutes(slots=2) is None  # nothing ran yet
    assert progress.cell_line("elmo-scalar", 0, {"dev_acc": 0.7, "test_acc": 0.71}, "9 s") == (
        "  [  1/4+] elmo-scalar                        seed 0  dev acc 0.700  test acc 0.710  (9 s)"
    )
    graded = Progress(stages_total=0, encoders_total=0).cell_line(
        "elmo-scalar", 1, {"dev_pearson": 0.7, "test_pearson": 0.71}, "9 s"
    )
    assert graded.endswith("seed 1  dev pearson 0.700  test pearson 0.710  (9 s)")  # a graded task's main metric
    progress.finished(heads[0], 60.0)
    progress.planned(
        [Cell("random-scalar", "random", seed, family="elmo", transfer="frozen", head="attn") for seed in range(4)]
    )
    assert progress.eta_minutes(slots=2) == pytest.approx(7 * 60 / 2 / 60)
    assert "cells 1/8 · 2 running" in progress.study_line(running=2, slots=2)


def test_the_eta_prices_each_cell_by_its_own_kind_not_by_the_quick_probes():
    """Probes take seconds and heads minutes: 3 probes done in 5 s must not make 2 heads look quick;
    a head before any head ran is priced by the cost table."""
    probes = [Cell("elmo-linear-probe", "probe", seed) for seed in range(4)]
    heads = [
        Cell("elmo-frozen-attn", "pretrained", seed, family="elmo", transfer="frozen", head="attn") for seed in range(2)
    ]
    progress = Progress(stages_total=1, encoders_total=1, estimate=lambda cell: 300.0)
    progress.planned(probes + heads)
    for probe in probes[:3]:
        progress.finished(probe, 5.0)
    assert progress.eta_minutes(slots=1) == pytest.approx((5 + 300 + 300) / 60)
    progress.finished(heads[0], 420.0)
    assert progress.eta_minutes(slots=1) == pytest.approx((5 + 420) / 60)
    progress.finished(probes[3], None)  # reused: no time of its own
    assert progress.eta_minutes(slots=1) == pytest.approx(420 / 60)


class FakeEngine:
    """Runs nothing: records what is dispatched and finishes tasks in the order they were sent."""

    def __init__(self, cpus: int, fail: str = ""):
        self.cpus, self.fail = cpus, fail
        self.log: list[tuple[str, str]] = []  # (event, label)
        self.pending: list[tuple[int, str, tuple]] = []
        self.cancelled: list[int] = []

    def capacity(self):
        return self.cpus

    def largest_node(self):
        return self.cpus

    def nodes(self):
        return 1

    def submit(self, function, args, resources):
        name = label(function.__name__, args)
        self.log.append(("start", name))
        handle = len(self.log)
        self.pending.append((handle, name, resources))
        return handle

    def wait(self, handles, timeout):
        return [min(handles)]

    def result(self, handle):
        name = next(name for number, name, _ in self.pending if number == handle)
        self.log.append(("end", name))
        if self.fail and self.fail in name:
            raise UserError(f"{name} failed (exit 2); its output is in x.log")
        return {"run_id": f"run:{name}", "seconds": 1.0, "node": "here", "reused": False}

    def cancel(self, handles):
        self.cancelled = list(handles)


def label(function: str, args: tuple) -> str:
    if function == "run_stage":
        return f"stage:{args[0].encoder}:{args[0].number}"
    return f"cell:{args[0].method}:{args[0].seed}"


@pytest.fixture
def fake_store(monkeypatch):
    """The executor's reads of the store: nothing found finished, encoders described from their run id."""
    monkeypatch.setattr(executor_module, "reused_stages", lambda stages, digest: (0, None))
    monkeypatch.setattr(executor_module, "end_cancelled_runs", lambda driver, since: [])
    monkeypatch.setattr(executor_module, "finished_run", lambda *args: None)
    monkeypatch.setattr(
        executor_module,
        "describe_encoder",
        lambda encoder, run_id, identity=None: {
            "name": encoder["name"],
            "run_id": run_id,
            "family": encoder["name"],
            "num_layers": 3,
        },
    )
    metrics = SimpleNamespace(data=SimpleNamespace(metrics={"dev_acc": 0.5, "test_acc": 0.5}, tags={}))
    monkeypatch.setattr(executor_module, "MlflowClient", lambda uri: SimpleNamespace(get_run=lambda run_id: metrics))


def study_config(tmp_path):
    stage = tmp_path / "stage.yaml"
    stage.write_text("trainer:\n  max_epochs: 1\n")
    return {
        "name": "dag",
        "experiment": "mrpc",
        "finetune": {"config": str(stage)},
        "encoders": [
            {"name": "elmo", "pretrain": [{"config": str(stage)}]},
            {"name": "ulmfit", "pretrain": [{"config": str(stage)}, {"config": str(stage)}]},
        ],
        "transfers": {
            "elmo": [{"name": "frozen", "heads": ["pool-mlp"]}],
            "ulmfit": [{"name": "frozen", "heads": ["pool-mlp"]}],
        },
        "fractions": [1.0],
        "seeds": 1,
        "random_control": True,
        "baselines": [],
    }


def run_study(tmp_path, engine, threads=1):
    config = parse_matrix(study_config(tmp_path))
    study = Study("dag", "mrpc", "parent", "driver", tmp_path / "logs", "digest")
    data = SimpleNamespace(content_hash="digest", task=CLASSES)
    executor = StudyExecutor(
        engine, study, config, data, config.finetune_config, [], threads, {"elmo": None, "ulmfit": None}
    )
    return executor.run()


def test_cells_wait_for_their_encoders_last_stage_and_stages_run_side_by_side(tmp_path, fake_store, capsys):
    engine = FakeEngine(cpus=2)
    encoders, done = run_study(tmp_path, engine)
    log = engine.log
    starts = [name for event, name in log if event == "start"]
    assert starts[:2] == ["stage:elmo:1", "stage:ulmfit:1"]  # both in flight before either ends
    for encoder, last in (("elmo", "stage:elmo:1"), ("ulmfit", "stage:ulmfit:2")):
        cells = [
            index
            for index, entry in enumerate(log)
            if entry[0] == "start" and f":{encoder}-" in entry[1] or entry[0] == "start" and f"({encoder})" in entry[1]
        ]
        assert cells and min(cells) > log.index(("end", last))
    # a finished encoder's cells start while the other still pretrains
    assert log.index(("start", "cell:elmo-frozen-pool-mlp:0")) < log.index(("end", "stage:ulmfit:2"))
    assert [encoder["run_id"] for encoder in encoders] == ["run:stage:elmo:1", "run:stage:ulmfit:2"]
    assert len(done) == 4 and all(run_id.startswith("run:cell:") for _, run_id in done)
    out = capsys.readouterr().out
    assert "pretraining encoder 'ulmfit' stage 2" in out and "[  4/4] " in out


def test_a_waiting_stage_goes_before_cells_and_one_cpu_runs_stages_one_after_another(tmp_path, fake_store):
    engine = FakeEngine(cpus=1)
    run_study(tmp_path, engine)
    starts = [name for event, name in engine.log if event == "start"]
    assert starts[:3] == ["stage:elmo:1", "stage:ulmfit:1", "stage:ulmfit:2"]  # elmo's cells wait: critical path
    assert engine.log.index(("end", "stage:elmo:1")) < engine.log.index(("start", "stage:ulmfit:1"))


def test_the_first_failing_task_stops_the_study_and_cancels_those_in_flight(tmp_path, fake_store):
    engine = FakeEngine(cpus=2, fail="stage:elmo:1")
    with pytest.raises(UserError, match=r"^stage:elmo:1 failed"):
        run_study(tmp_path, engine)
    assert len(engine.cancelled) == 1  # ulmfit's first stage was still in flight
    assert not [name for event, name in engine.log if event == "start" and name.startswith("cell:")]


def test_the_cost_table_prices_a_head_above_a_probe_and_no_fraction_it_lacks():
    estimate = cell_seconds_estimate()
    head = Cell("elmo-frozen-attn", "pretrained", 0, family="elmo", transfer="frozen", head="attn")
    assert estimate(head) > estimate(Cell("elmo-linear-probe", "probe", 0)) > 0
    assert (
        estimate(
            Cell(
                "elmo-frozen-attn@0.5",
                "pretrained",
                0,
                family="elmo",
                transfer="frozen",
                head="attn",
                train_fraction=0.5,
            )
        )
        is None
    )


def test_a_cell_another_benchmark_finished_while_it_waited_is_linked_not_dispatched(tmp_path, fake_store, monkeypatch):
    planned_early: set[str] = set()  # cells planned while the first stage ran: the baselines
    elsewhere = {"done": False}

    def finished_run(experiment, cell_hash, parent=None):
        if not elsewhere["done"]:
            planned_early.add(cell_hash)
            return None
        return "run:other-benchmark" if cell_hash in planned_early else None

    monkeypatch.setattr(executor_module, "finished_run", finished_run)

    class OtherBenchmarkFinishesTheBaselines(FakeEngine):
        def result(self, handle):
            value = super().result(handle)
            elsewhere["done"] = True  # meanwhile, a suite on the same store finished the baselines
            return value

    config = parse_matrix({**study_config(tmp_path), "baselines": ["majority"]})
    study = Study("dag", "mrpc", "parent", "driver", tmp_path / "logs", "digest")
    executor = StudyExecutor(
        OtherBenchmarkFinishesTheBaselines(cpus=1),
        study,
        config,
        SimpleNamespace(content_hash="digest", task=CLASSES),
        config.finetune_config,
        [],
        1,
        {"elmo": None, "ulmfit": None},
    )
    _, done = executor.run()
    started = [name for event, name in executor.engine.log if event == "start"]
    assert planned_early and not [name for name in started if "majority" in name]
    assert [run_id for cell, run_id in done if cell.kind == "baseline"] == ["run:other-benchmark"]
    assert executor.linked == ["run:other-benchmark"]
    assert len([name for name in started if name.startswith("cell:")]) == 4  # the heads still run

"""``make evaluate`` (benchmarks.evaluate): bad input is one fast line and no run; each task's
matrix is the template with the task's baselines; the table across tasks reads each task's main
score (zero-shot: its zero-shot metric) and places the anchors under their task."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.evaluate.table import TaskScores, console_table, markdown_table, score_text
from benchmarks.evaluate.task_matrix import task_matrix
from harness.datasets.registry import published_anchors, task_of
from harness.errors import UserError
from harness.unique_keys import load_yaml

REPO = Path(__file__).resolve().parents[2]


def evaluate(tmp_path, *args, **environment):
    """``python -m benchmarks.evaluate`` with a fresh tracking store in ``tmp_path``; returns
    (completed process, seconds, whether the store was created)."""
    store = tmp_path / "mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}", "PYTHONPATH": str(REPO), **environment}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.evaluate", *args], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    return done, time.perf_counter() - started, store.exists()


@pytest.mark.parametrize(
    ("arguments", "environment", "message"),
    [
        (["--encoder", "runs:/abc", "--tasks", "mrpc", "paraphrase"], {}, "TASKS=paraphrase: unknown task; expected"),
        (["--encoder", "random", "--tasks", "mrpc"], {}, "ENCODER=random: name the trained encoder"),
        (["--encoder", "no-such-file.ckpt", "--tasks", "mrpc"], {}, "ENCODER=no-such-file.ckpt: expected runs:/"),
        (["--encoder", "encoder.ckpt", "--tasks", "mrpc"], {}, "ENCODER=encoder.ckpt: a checkpoint file; evaluate"),
        (["--encoder", "runs:/abc", "--tasks", "sick-e"], {"SICK_DIR": "", "DATA_ROOT": ""}, "set SICK_DIR"),
        (["--encoder", "runs:/abc", "--tasks", "mrpc", "mrpc"], {}, "a task is named twice"),
        (["--encoder", "runs:/abc", "--tasks", "mrpc", "--zero-shot", "max:top"], {}, "--zero-shot max:top: expected"),
    ],
)
def test_bad_input_is_one_line_before_any_run(tmp_path, arguments, environment, message):
    (tmp_path / "encoder.ckpt").write_bytes(b"")  # a checkpoint file: not a tracked encoder
    done, seconds, store_made = evaluate(tmp_path, *arguments, **environment)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not store_made
    assert seconds < 20  # before torch, Lightning and MLflow are imported


def test_a_missing_encoder_run_stops_before_any_run_is_created(tmp_path, mrpc_dir):
    """The encoder is resolved after the heavy imports but before the evaluation's parent run."""
    done, _, _ = evaluate(tmp_path, "--encoder", "runs:/0123456789abcdef", "--tasks", "mrpc", MRPC_DIR=str(mrpc_dir))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    assert not experiments or not client.search_runs(experiments)


def test_a_tasks_matrix_is_the_template_with_the_tasks_baselines():
    matrix = task_matrix("sick-e", "elmo", "runs:/abc", "elmo-2x64-abc", twin=True, heads=("attn",), seeds=3)
    assert matrix["name"] == "evaluate-elmo-2x64-abc-sick-e" and matrix["dataset"] == {"dataset": "sick-e"}
    assert matrix["baselines"] == list(task_of("sick-e").baselines) == ["majority", "tfidf-lr"]
    assert matrix["heads"] == ["pool-mlp", "attn"] and matrix["seeds"] == 3 and matrix["linear_probe"] is True
    assert matrix["random_control"] is True and matrix["encoders"] == [{"name": "elmo", "run": "runs:/abc"}]
    assert matrix["finetune"]["config"] == "configs/downstream/sick-e.yaml"  # the task's own config
    assert task_matrix("tsv", "elmo", "runs:/abc", "elmo", twin=True)["finetune"]["config"] == (
        "configs/downstream/mrpc.yaml"  # the template's, for a data set without a config of its own
    )
    graded = task_matrix("stsb", "elmo", "runs:/abc", "elmo", twin=True)
    assert graded["baselines"] == ["overlap-cosine", "tfidf-ridge"] == list(task_of("stsb").baselines)
    assert graded["finetune"]["config"] == "configs/downstream/stsb.yaml"  # its own: early stopping on dev Pearson
    published = task_matrix("mrpc", "all-minilm-l6-v2", "reference:all-minilm-l6-v2", "hf", twin=False)
    assert published["random_control"] is False and published["heads"] == ["pool-mlp"] and published["seeds"] == 1
    with pytest.raises(UserError, match="no-such-head"):
        task_matrix("mrpc", "elmo", "runs:/abc", "elmo", twin=True, heads=("no-such-head",))


def test_every_head_trains_at_its_tasks_own_recipe():
    """The template shortens no task's training: under a 3-epoch cap at batch 64, MiniLM's pool-mlp
    head never left MRPC's majority class (dev accuracy 68.4 at every validation), while at
    mrpc.yaml's recipe it left it in its fourth epoch."""
    for task in ("mrpc", "sick-e", "sick-r", "stsb", "tsv"):
        finetune = task_matrix(task, "elmo", "runs:/abc", "elmo", twin=True, heads=("attn",))["finetune"]
        recipe = [arg for arg in finetune.get("args", []) if arg.startswith(("--trainer.", "--data.batch_size"))]
        assert recipe == [], (task, recipe)
        config = load_yaml(REPO / finetune["config"])
        assert config["trainer"]["max_epochs"] == 20 and config["data"]["batch_size"] == 32, task
        (stopping,) = config["trainer"]["callbacks"]
        assert stopping["class_path"].endswith("EarlyStopping"), task


def test_the_table_reads_each_tasks_main_score_and_places_its_anchors():
    mrpc = TaskScores("mrpc", wall_seconds=120)
    mrpc.add("elmo-linear-probe", "probe", {"test_acc": 0.70, "test_f1": 0.80})
    mrpc.add("elmo-scalar-pool-mlp", "pretrained", {"test_acc": 0.71})
    mrpc.add("elmo-scalar-pool-mlp", "pretrained", {"test_acc": 0.73})
    mrpc.add("random-scalar-pool-mlp", "random", {"test_acc": 0.66})
    mrpc.add("majority", "baseline", {"test_acc": 0.665})
    sick = TaskScores("sick-e", wall_seconds=60)
    sick.add("elmo-linear-probe", "probe", {"test_acc": 0.75})
    table = markdown_table([mrpc, sick], "elmo on mrpc, sick-e", encoder="elmo")
    lines = table.splitlines()
    assert "| method | mrpc (test accuracy) | sick-e (test accuracy) |" in lines
    assert "| elmo-linear-probe | 70.0 | 75.0 |" in lines  # no twin ran: no gap
    assert "| elmo-scalar-pool-mlp | 72.0 ± 1.4 (+6.0) |  |" in lines  # two seeds: mean ± sample sd; gap to twin
    order = [line.split(" | ")[0].removeprefix("| ") for line in lines if line.startswith("| ")]
    assert order.index("elmo-scalar-pool-mlp") < order.index("random-scalar-pool-mlp") < order.index("majority")
    for system, accuracy, *_ in published_anchors("sick-e").rows:  # SICK-E's anchors in its own column
        assert any(line.startswith(f"| anchor: {system}") and line.endswith(f"|  | {accuracy:.1f} |") for line in lines)
    assert "Wall time: 3.0 min (mrpc 2.0, sick-e 1.0)." in lines
    console = console_table([mrpc, sick], "elmo")
    assert "anchor: InferSent (frozen) + LR " in console and "Conneau" not in console  # sources: in table.md
    assert console.splitlines()[-1].strip() == "Wall time: 3.0 min (mrpc 2.0, sick-e 1.0)."


def test_the_pairs_the_encoder_read_are_counted_and_each_method_scored_without_them():
    stsb, mrpc = TaskScores("stsb", test_pairs=1379), TaskScores("mrpc", test_pairs=1725)
    for mine, twin in [(0.70, 0.60), (0.72, 0.60)]:
        seen = {"test_seen_pairs": 259}
        stsb.add("elmo-linear-probe", "probe", {"test_pearson": mine, "test_pearson_unseen": mine - 0.02, **seen})
        stsb.add("random-linear-probe", "probe", {"test_pearson": twin, "test_pearson_unseen": twin, **seen})
    mrpc.add("elmo-linear-probe", "probe", {"test_acc": 0.7, "test_seen_pairs": 0})
    lines = markdown_table([stsb, mrpc], "elmo", encoder="elmo").splitlines()
    assert "| test pairs with a sentence the encoder read | 259 of 1379 | 0 of 1725 |" in lines
    assert "| elmo-linear-probe, without them | 69.0 ± 1.4 (+9.0) |  |" in lines  # the twin: the same pairs
    assert "| random-linear-probe, without them | 60.0 ± 0.0 |  |" in lines
    unknown = TaskScores("stsb", test_pairs=1379)  # a published encoder: its pretraining text is not known
    unknown.add("minilm-linear-probe", "probe", {"test_pearson": 0.8})
    assert "encoder read" not in markdown_table([unknown], "minilm", encoder="minilm")


def test_zero_shot_rows_hold_the_zero_shot_metric():
    """A graded task's zero-shot row is its Spearman (MTEB's), a trained row its Pearson (SentEval's)."""
    toy = TaskScores("toy")
    from dataclasses import replace

    from harness.datasets.registry import DATASETS, register
    from harness.datasets.task import graded

    register(replace(DATASETS["tsv"], name="toy", task=graded(0, 5), anchors=None))
    try:
        toy.add("elmo-zero-shot", "zero-shot", {"test_pearson": 0.2, "test_spearman": 0.3})
        toy.add("elmo-linear-probe", "probe", {"test_pearson": 0.4, "test_spearman": 0.5})
        lines = markdown_table([toy], "toy").splitlines()
    finally:
        DATASETS.pop("toy")
    assert "| elmo-zero-shot (ρ) | 30.0 |" in lines and "| elmo-linear-probe | 40.0 |" in lines
    assert "| method | toy (test Pearson r) |" in lines
    assert score_text([0.5]) == "50.0"


def test_a_results_folder_takes_stsbs_four_id_columns(tmp_path):
    """STS-B's pair key is (genre, file, year, id): a graded predictions file with those ids is read
    back by the results-folder check (``python -m benchmarks export`` of an stsb task)."""
    import pandas as pd

    from benchmarks.results_files.predictions_file import check_columns
    from benchmarks.results_files.task_predictions import predictions_of

    frame = pd.DataFrame(
        {
            "split": ["dev", "test"],
            "genre": ["main-news", "main-captions"],
            "file": ["MSRpar", "MSRvid"],
            "year": ["2012test", "2012test"],
            "id": ["0001", "0001"],
            "label": ["4.2", "1.0"],
            "pred": ["3.9", "1.5"],
        }
    )
    check_columns(frame, predictions_of(task_of("stsb"), [], None), tmp_path / "cell.predictions.csv.gz")


def test_the_pilots_stages_keep_every_task_out_and_its_matrix_parses():
    from benchmarks.evaluate.pilot_chunk import CONFIG, REPO_ROOT, stage_command
    from harness.unique_keys import load_yaml

    pilot = load_yaml(CONFIG)
    assert sorted(pilot["keep_out"]) == sorted(pilot["tasks"]) == ["mrpc", "sick-e", "sick-r", "stsb"]
    for family in pilot["families"]:  # each family's chunks: every task once, each chunk within 150 minutes
        chunks = [chunk for chunk in pilot["chunks"].values() if chunk["family"] == family]
        assert sorted(task for chunk in chunks for task in chunk["tasks"]) == sorted(pilot["tasks"])
        assert all(chunk["estimate_minutes"] <= 150 for chunk in chunks)
    for family, entry in pilot["families"].items():
        for stage in entry["stages"]:
            assert (REPO_ROOT / stage["config"]).is_file(), family
            command = stage_command(stage, pilot, ["--trainer.max_steps=2"])
            assert command[1:4] == ["-m", "pretrain", "fit"] and command[-1] == "--trainer.max_steps=2"
            assert "--data.keep_out=[mrpc, sick-e, sick-r, stsb]" in command
            assert f"--trainer.precision={pilot['precision']}" in command and "--seed_everything=0" in command
    for task in pilot["tasks"]:  # the suite's own parser accepts each task's matrix
        matrix = task_matrix(task, "gpt", "runs:/0", "gpt-x", True, ("attn",), 2, REPO_ROOT / pilot["template"])
        assert matrix["heads"] == ["attn"] and matrix["seeds"] == 2 and matrix["precision"] == pilot["precision"]
        assert matrix["finetune"]["config"] == f"configs/downstream/{task}.yaml"


def test_a_chunk_record_names_its_config_relative_to_the_repository():
    """Not the worktree it ran from, which is gone once the chunk is committed."""
    from benchmarks.evaluate.pilot_chunk import CONFIG, repo_path

    assert repo_path(CONFIG) == "configs/benchmarks/tasks-pilot/pilot.yaml"
    assert repo_path(Path("/elsewhere/pilot.yaml")) == "/elsewhere/pilot.yaml"

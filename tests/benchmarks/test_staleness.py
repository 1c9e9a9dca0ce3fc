"""Results cannot go stale, and do not go stale for nothing: a cell's hash covers its settings,
its data and the protocol version, not the source files; a benchmark reuses its own children
first and only links, never silently adopts, another benchmark's cell."""

import pytest
from mlflow.tracking import MlflowClient

from benchmarks.cell.definition import Cell, file_digests, portable_args
from benchmarks.tasks.reuse import finished_run
from harness import protocol, versioning
from harness.protocol import settings_hash
from harness.tracking.runs import ensure_experiment


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return MlflowClient(uri)


def finished(client, experiment_id, tags):
    run = client.create_run(experiment_id, tags=tags)
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def test_an_edit_to_a_source_file_moves_no_cell_hash(tmp_path, monkeypatch):
    for package in versioning.SOURCE_PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "report.py").write_text("TITLE = 'Report'\n")
    monkeypatch.setattr(versioning, "REPO_ROOT", tmp_path)
    versioning.source_version.cache_clear()
    spec = {"kind": "pretrained", "seed": 0, "data": "abc"}
    before = settings_hash(spec)
    (tmp_path / "benchmarks" / "report.py").write_text("TITLE = 'Benchmark report'\n")  # a report's wording
    versioning.source_version.cache_clear()
    assert settings_hash(spec) == before  # an edit that moves no number re-runs nothing
    versioning.source_version.cache_clear()


def test_a_protocol_bump_is_another_cell(monkeypatch):
    spec = {"kind": "pretrained", "seed": 0, "data": "abc"}
    before = settings_hash(spec)
    monkeypatch.setitem(protocol.PROTOCOL_VERSIONS, "heads", protocol.PROTOCOL_VERSIONS["heads"] + 1)
    assert settings_hash(spec) != before  # a deliberate bump re-runs every cell
    monkeypatch.undo()
    assert settings_hash({**spec, "data": "abd"}) != settings_hash(spec)


def test_a_cell_is_identified_by_its_encoder_identity_not_the_run_that_holds_it():
    cell = Cell(
        "elmo-scalar-pool-mlp",
        "pretrained",
        0,
        "elmo",
        "run-a",
        "scalar",
        "pool-mlp",
        args=["--data.mrpc_dir=/home/ada/mrpc", "--trainer.max_epochs=3"],
        encoder_identity="stage-hash",
    )
    moved = Cell(
        "elmo-scalar-pool-mlp",
        "pretrained",
        0,
        "elmo",
        "run-b",
        "scalar",
        "pool-mlp",
        args=["--data.mrpc_dir=/srv/data/mrpc", "--trainer.max_epochs=3"],
        encoder_identity="stage-hash",
    )
    assert settings_hash(cell.spec()) == settings_hash(moved.spec())  # another store, another data folder
    retrained = Cell(**{**cell.fields(), "encoder_identity": "another-stage"})
    assert settings_hash(retrained.spec()) != settings_hash(cell.spec())
    assert portable_args(cell.args) == ["--trainer.max_epochs=3"]


def test_protocol_versions_read_back_and_a_newer_one_is_named():
    text = protocol.protocol_version()
    assert protocol.parse_protocol_version(text) == protocol.PROTOCOL_VERSIONS
    newer = dict(protocol.PROTOCOL_VERSIONS, evaluation=protocol.PROTOCOL_VERSIONS["evaluation"] + 1)
    assert protocol.newer_concerns(protocol.protocol_version(newer)) == ["evaluation"]
    with pytest.raises(ValueError):
        protocol.parse_protocol_version("heads1")


def test_corpus_files_named_by_arguments_enter_the_hash(tmp_path):
    corpus = tmp_path / "text.txt"
    corpus.write_text("one sentence\n")
    first = file_digests([f"--data.extra_corpus=[{corpus}]", "--trainer.max_epochs=3"])
    corpus.write_text("an edited sentence\n")
    assert list(first) == [str(corpus)] and file_digests([f"--data.extra_corpus=[{corpus}]"]) != first


def test_a_stage_hash_holds_named_corpora_content_and_the_stage_before(tmp_path, monkeypatch):
    from benchmarks.plan.encoders import Stage, stage_hashes

    folder = tmp_path / "reuters21578"
    folder.mkdir()
    (folder / "sentences.txt").write_text("shares fell .\n")
    monkeypatch.setenv("CORPORA_DIR", str(tmp_path))
    stages = [
        Stage("lm", 1, "configs/pretrain/ulmfit.yaml", ["--data.corpus=mrpc+reuters"]),
        Stage("lm", 2, "configs/pretrain/ulmfit-task.yaml"),
    ]
    first = stage_hashes(stages, "data")
    (folder / "sentences.txt").write_text("shares rose .\n")
    second = stage_hashes(stages, "data")
    assert first[0] != second[0] and first[1] != second[1]  # the text changed: both stages are new
    assert stage_hashes(stages[1:], "data")[0] != second[1]  # a stage continues the one before it


def test_a_stage_hash_recomputes_from_recorded_corpus_digests_without_the_corpora(tmp_path, monkeypatch):
    from benchmarks.plan.encoders import Stage, corpus_digests, stage_hashes

    folder = tmp_path / "corpora" / "reuters21578"
    folder.mkdir(parents=True)
    (folder / "sentences.txt").write_text("shares fell .\n")
    monkeypatch.setenv("CORPORA_DIR", str(tmp_path / "corpora"))
    encoder = {
        "name": "lm",
        "pretrain": [
            {"config": "configs/pretrain/ulmfit.yaml", "args": ["--data.corpus=mrpc+reuters"]},
            {"config": "configs/pretrain/ulmfit-task.yaml"},
        ],
    }
    stages = [
        Stage("lm", 1, "configs/pretrain/ulmfit.yaml", ["--data.corpus=mrpc+reuters"]),
        Stage("lm", 2, "configs/pretrain/ulmfit-task.yaml"),
    ]
    recorded = corpus_digests([encoder])
    with_corpora = stage_hashes(stages, "data")
    monkeypatch.setenv("CORPORA_DIR", str(tmp_path / "elsewhere"))  # a clone without the corpora
    assert list(recorded) == ["reuters"]
    assert stage_hashes(stages, "data") != with_corpora
    assert stage_hashes(stages, "data", recorded) == with_corpora
    assert stage_hashes(stages, "data", {"reuters": "0" * 64}) != with_corpora


@pytest.mark.slow
def test_a_benchmark_reuses_its_own_child_before_another_benchmarks(store):
    experiment_id = ensure_experiment("mrpc")
    other = finished(store, experiment_id, {"cell_hash": "h1", "mlflow.parentRunId": "parent-a"})
    own = finished(store, experiment_id, {"cell_hash": "h1", "mlflow.parentRunId": "parent-b"})
    newer_other = finished(store, experiment_id, {"cell_hash": "h1", "mlflow.parentRunId": "parent-a"})
    assert finished_run("mrpc", "h1", "parent-b") == own
    assert finished_run("mrpc", "h1", "parent-c") == newer_other  # found elsewhere: the caller links it
    assert finished_run("mrpc", "h2", "parent-b") is None
    assert other != newer_other

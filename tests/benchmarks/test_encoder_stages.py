"""An encoder pretrained in stages (ULMFiT: a general LM on MRPC + Reuters, then the task LM on
MRPC) is described by all of them: its corpora in order, tokens and words summed over the stages,
the last stage's perplexity, each stage's own figures. A record written before stages were
described (the last stage's figures only) is completed from the store on export, and read as it is
where the store lacks the runs."""

import pytest
from mlflow.tracking import MlflowClient

from benchmarks.plan.encoders import describe_encoder, with_stages


@pytest.fixture
def chain(tmp_path, monkeypatch) -> dict:
    """A finished general-LM run and the task-LM run that continues it, with the params and tags
    the pretraining CLI logs."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain", artifact_location=(tmp_path / "artifacts").as_uri())
    general = client.create_run(experiment, tags={"stage": "pretrain", "family": "ulmfit", "lm_stage": "general"})
    for key, value in {
        "data.corpus": "mrpc+reuters",
        "train_tokens": "3312754",
        "train_words": "2715108",
        "model.num_layers": "3",
    }.items():
        client.log_param(general.info.run_id, key, value)
    client.log_metric(general.info.run_id, "best_val_ppl", 180.0)
    task = client.create_run(
        experiment,
        tags={"stage": "pretrain", "family": "ulmfit", "lm_stage": "task", "init_run_id": general.info.run_id},
    )
    for key, value in {
        "data.corpus": "mrpc",
        "train_tokens": "168499",
        "train_words": "133727",
        "model.num_layers": "3",
        "model.init_from": f"runs:/{general.info.run_id}",
    }.items():
        client.log_param(task.info.run_id, key, value)
    client.log_metric(task.info.run_id, "best_val_ppl", 167.1)
    return {"client": client, "general": general.info.run_id, "task": task.info.run_id}


def test_a_two_stage_encoder_is_described_by_both_stages(chain):
    described = describe_encoder(
        {"name": "ulmfit-reuters", "pretrain": [{"config": "general.yaml"}, {"config": "task.yaml"}]}, chain["task"]
    )
    assert described["corpus"] == "mrpc+reuters → mrpc"
    assert described["train_words"] == 2715108 + 133727 and described["train_tokens"] == 3312754 + 168499
    assert described["val_ppl"] == pytest.approx(167.1)  # the encoder's: the last stage's
    assert [stage["run_id"] for stage in described["stages"]] == [chain["general"], chain["task"]]
    assert [stage["train_words"] for stage in described["stages"]] == [2715108, 133727]
    assert described["config"] == "task.yaml" and described["num_layers"] == 4


def test_a_one_stage_encoder_is_its_own_run(chain):
    described = describe_encoder({"name": "general-only", "pretrain": {"config": "general.yaml"}}, chain["general"])
    assert described["corpus"] == "mrpc+reuters" and described["train_words"] == 2715108
    assert len(described["stages"]) == 1


def test_a_record_of_the_last_stage_alone_is_completed_from_the_store(chain):
    old = {
        "name": "ulmfit-reuters",
        "run_id": chain["task"],
        "identity": "stage-hash",
        "digest": "d",
        "corpus": "mrpc",
        "train_words": 133727,
        "train_tokens": 168499,
        "val_ppl": 167.1,
    }
    completed = with_stages(old, chain["client"])
    assert completed["corpus"] == "mrpc+reuters → mrpc" and completed["train_words"] == 2715108 + 133727
    assert completed["identity"] == "stage-hash" and completed["digest"] == "d"  # what decides the cells: kept
    assert with_stages(completed, chain["client"]) == completed  # described already: as it is


def test_a_record_whose_runs_are_elsewhere_or_published_is_read_as_it_is(chain):
    elsewhere = {"name": "ulmfit-reuters", "run_id": "0" * 32, "corpus": "mrpc", "train_words": 133727}
    published = {"name": "bert", "run_id": "hf:bert", "published": True, "corpus": "published", "train_words": 0}
    assert with_stages(elsewhere, chain["client"]) == elsewhere
    assert with_stages(published, chain["client"]) == published
    assert with_stages(None, chain["client"]) is None


def test_a_chain_that_loops_in_the_store_ends_at_the_first_run_met_twice(chain):
    chain["client"].set_tag(chain["general"], "init_run_id", chain["task"])  # a store edited by hand
    described = describe_encoder({"name": "loop", "pretrain": {"config": "task.yaml"}}, chain["task"])
    assert [stage["run_id"] for stage in described["stages"]] == [chain["general"], chain["task"]]

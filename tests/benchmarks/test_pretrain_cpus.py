"""The suite's default threads per pretraining stage: a local instance's CPUs shared among the
encoders pretrained here (so independent encoders pretrain side by side), a cluster's stages at
``--jobs``."""

from types import SimpleNamespace

import pytest

from benchmarks.plan.matrix import Matrix, parse_matrix
from benchmarks.suite import default_pretrain_cpus

LOCAL, CLUSTER = SimpleNamespace(address=None), SimpleNamespace(address="ray://head:10001")


def study(*names: str, given: tuple[str, ...] = ()) -> tuple[Matrix, dict]:
    encoders = [{"name": name, "pretrain": {"config": "configs/pretrain/gpt.yaml"}} for name in names]
    encoders.append({"name": "minilm", "run": "reference:all-minilm-l6-v2"})  # never pretrained here
    return parse_matrix({"encoders": encoders}), {
        encoder["name"]: ("run-1" if encoder["name"] in given or "run" in encoder else None) for encoder in encoders
    }


@pytest.mark.parametrize(
    "jobs, names, given, threads",
    [
        (2, ("gpt", "elmo", "ulmfit"), (), 1),  # two cores, three encoders: one thread each, two at once
        (2, ("gpt",), (), 2),  # the default benchmark: its one encoder takes both
        (4, ("gpt", "elmo"), (), 2),
        (4, ("gpt", "elmo", "ulmfit"), (), 1),
        (2, ("gpt", "elmo"), ("elmo",), 2),  # elmo's run is given: only gpt pretrains
        (2, (), (), 2),
    ],
)
def test_a_local_instance_shares_its_cpus_among_the_encoders_it_pretrains(jobs, names, given, threads):
    config, given_runs = study(*names, given=given)
    assert default_pretrain_cpus(jobs, config, given_runs, LOCAL) == threads


def test_a_cluster_gives_each_stage_the_jobs_threads():
    config, given_runs = study("gpt", "elmo", "ulmfit")
    assert default_pretrain_cpus(2, config, given_runs, CLUSTER) == 2

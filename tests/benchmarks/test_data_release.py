"""A report over folders of different data sets is refused in one line that names each side's
content by its own digest: two known releases (SICK-E's and SICK-R's share SICK's files but not
their digests), or a known release and other content."""

import re

import pytest

from benchmarks.results_files.data_release import check_same_data
from harness.datasets.registry import DATASETS
from harness.errors import UserError


def release_digest(name: str) -> str:
    (digest,) = DATASETS[name].split_sizes
    return digest


def refusal(benchmark: dict, expected: str, expected_name: str | None) -> str:
    with pytest.raises(UserError) as refused:
        check_same_data("folder-b", benchmark, expected, expected_name)
    return str(refused.value)


def test_two_known_releases_are_each_named_by_their_digest():
    sick_r, sick_e = release_digest("sick-r"), release_digest("sick-e")
    message = refusal({"dataset": "sick-r", "data_digest": sick_r}, sick_e, "sick-e")
    assert re.search(rf"\(sick-r, digest {sick_r[:12]}, the known sick-r release\)", message)
    assert f"than {sick_e[:12]} (the known sick-e release); a study never mixes them" in message
    # a suite's digest comes without a name: the digest still says which release it is
    assert "(the known sick-e release)" in refusal({"dataset": "sick-r", "data_digest": sick_r}, sick_e, None)


def test_own_content_under_a_releases_name_is_said_to_be_other_files():
    mrpc = release_digest("mrpc")
    message = refusal({"dataset": "mrpc", "data_digest": "0" * 64}, mrpc, "mrpc")
    assert "(mrpc, digest 000000000000, not the known mrpc release: own or edited files)" in message
    assert f"than {mrpc[:12]} (the known mrpc release)" in message
    own = refusal({"dataset": "pairs.tsv", "data_digest": "1" * 64}, "2" * 64, "other.tsv")
    assert own.count("its own content") == 2

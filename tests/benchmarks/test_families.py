"""The transfer study's matrix: the plan expands to the declared axes, every pretrained cell has a
twin that differs only in the encoder, and the budget subset is a subset. families-quick end to end
(on a two-node Ray cluster, then resumed on a local instance) is in test_cluster.py."""

from collections import Counter
from pathlib import Path

import pytest

from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import Matrix, load_config, with_budget
from harness.errors import UserError

REPO = Path(__file__).resolve().parents[2]
FAMILIES = REPO / "configs" / "benchmarks" / "families.yaml"
QUICK = REPO / "configs" / "benchmarks" / "families-quick.yaml"


def encoders(config: Matrix) -> list[dict]:
    """Stand-ins for resolved encoders: the family is the name's first part (MiniLM's is ``hf``)."""
    return [
        {
            "name": e["name"],
            "run_id": f"run-{e['name']}",
            "num_layers": 3,
            "family": "hf" if e["name"] == "minilm" else e["name"].split("-")[0],
        }
        for e in config.encoders
    ]


def expected_cells(config: Matrix) -> int:
    total = 0
    for encoder in encoders(config):
        for transfer in config.transfers[encoder["family"]]:
            if transfer.encoders is not None and encoder["name"] not in transfer.encoders:
                continue
            total += 2 * len(transfer.heads) * len(transfer.fractions) * len(transfer.seeds)
        fractions = {1.0, *map(float, config.fractions)}  # each labelled fraction's subset, and the whole split
        total += 2 * len(config.seeds) * len(fractions) if config.linear_probe else 0  # it and its twin, per seed
    seeds_below_full = sum(
        len(
            {
                seed
                for transfers in config.transfers.values()
                for transfer in transfers
                if fraction in transfer.fractions
                for seed in transfer.seeds
            }
        )
        for fraction in map(float, config.fractions)
        if fraction < 1
    )
    return total + len(config.baselines) * (1 + seeds_below_full)  # once whole, once per seed at each fraction


@pytest.mark.parametrize("budget", [False, True])
def test_the_plan_expands_to_the_declared_matrix(budget):
    config = load_config(FAMILIES)
    config = with_budget(config, FAMILIES) if budget else config
    cells = plan(config, encoders(config), ["--data.flag=1"])
    assert len(cells) == expected_cells(config)
    pretrained = [cell for cell in cells if cell.kind == "pretrained"]
    per_axis = Counter((cell.family, cell.transfer) for cell in pretrained)
    assert set(per_axis) == {
        (family, transfer.name) for family, transfers in config.transfers.items() for transfer in transfers
    }
    assert {cell.encoder for cell in pretrained} == {encoder["name"] for encoder in config.encoders}


def test_every_twin_differs_from_its_pretrained_cell_only_in_the_encoder():
    config = load_config(FAMILIES)
    cells = plan(config, encoders(config), [])
    by_method_seed = {(cell.method, cell.seed): cell for cell in cells}
    pretrained = [cell for cell in cells if cell.kind == "pretrained"]
    assert pretrained and all(cell.control for cell in pretrained)
    for cell in pretrained:
        twin = by_method_seed[(cell.control, cell.seed)]
        assert twin.kind == "random" and twin.encoder_run == cell.encoder_run  # the twin copies this encoder
        same = ("transfer", "family", "mix", "head", "train_fraction", "seed", "args", "config")
        assert [getattr(twin, axis) for axis in same] == [getattr(cell, axis) for axis in same]


@pytest.mark.parametrize("path, budget", [(FAMILIES, False), (FAMILIES, True), (QUICK, False)])
def test_every_frozen_cell_standardises_its_features_and_no_fine_tuned_one_does(path, budget):
    """Both arms of every frozen transfer train on z-scored features (a twin's head otherwise stayed at
    the majority class); fine-tuned transfers cannot (their features move), so they never ask."""
    config = load_config(path)
    config = with_budget(config, path) if budget else config
    cells = [cell for cell in plan(config, encoders(config), []) if cell.kind in ("pretrained", "random")]
    frozen = [cell for cell in cells if cell.transfer == "frozen"]
    assert frozen and all("--model.standardize=true" in cell.args for cell in frozen)
    assert not any("--model.standardize=true" in cell.args for cell in cells if cell.transfer != "frozen")


def test_the_budget_is_a_subset_of_the_study():
    config = load_config(FAMILIES)
    full = {(c.method, c.seed) for c in plan(config, encoders(config), [])}
    budget = {
        (c.method, c.seed) for c in plan(with_budget(config, FAMILIES), encoders(with_budget(config, FAMILIES)), [])
    }
    assert budget < full


def test_a_config_without_a_budget_says_so(tmp_path):
    with pytest.raises(UserError, match=r"^--budget: .*no `budget:` section"):
        with_budget(load_config(QUICK), QUICK)


def test_a_transfer_with_an_unknown_key_is_one_line(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("encoders: [{name: elmo, run: latest}]\ntransfers: {elmo: [{name: frozen, head: attn}]}\n")
    with pytest.raises(UserError, match=r"transfers.elmo.frozen: unknown key\(s\) \['head'\]"):
        load_config(path)


def test_a_transfer_may_name_the_encoders_of_its_family_it_applies_to(tmp_path):
    """The budget's text axis: GPT on MRPC only and on all corpora gets two of gpt-reuters' transfers."""
    config = with_budget(load_config(FAMILIES), FAMILIES)
    methods = {cell.method for cell in plan(config, encoders(config), []) if cell.kind == "pretrained"}
    assert {method for method in methods if method.startswith("gpt-mrpc")} == {
        "gpt-mrpc-frozen-attn",
        "gpt-mrpc-full-cls",
    }
    assert "gpt-reuters-full-nolm-cls@0.1" in methods and "minilm-full-cls@0.1" in methods
    path = tmp_path / "study.yaml"
    path.write_text(
        "encoders: [{name: elmo, run: latest}]\n"
        "transfers: {elmo: [{name: frozen, heads: [attn], encoders: [elmo-all]}]}\n"
    )
    with pytest.raises(UserError, match=r"transfers.elmo.frozen.encoders: \['elmo-all'\] not in the config's encoders"):
        load_config(path)
    path.write_text(
        "encoders: [{name: elmo, run: latest}]\ntransfers: {elmo: [{name: frozen, heads: [attn], encoders: elmo}]}\n"
    )
    with pytest.raises(UserError, match=r"transfers.elmo.frozen.encoders must be a list of encoder names"):
        load_config(path)


@pytest.mark.parametrize("budget", [False, True])
def test_every_cell_of_the_study_gets_a_run_name_of_its_own(budget):
    """elmo-mrpc, elmo-reuters and elmo-all (and GPT with and without its LM loss) never share a name."""
    from harness.tracking.naming import cell_run_name

    config = load_config(FAMILIES)
    config = with_budget(config, FAMILIES) if budget else config
    cells = [cell for cell in plan(config, encoders(config), []) if cell.kind != "baseline"]
    names = [cell_run_name(cell.method, cell.seed) for cell in cells]
    assert len(set(names)) == len(names)
    assert all(name.startswith(("random(" + cell.encoder + ")", cell.encoder)) for name, cell in zip(names, cells))

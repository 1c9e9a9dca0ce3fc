"""The frozen-heads measurement's matrix (configs/benchmarks/frozen-heads.yaml) plans what it says:
each head at both fractions beside its twin, 5 seeds, the same flags for both arms, equal steps,
standardised features, the small heads at one width throughout; its probes and baselines; and
the scale-out model prices it."""

from collections import Counter
from pathlib import Path

from benchmarks.plan.cells import plan
from benchmarks.plan.matrix import load_config
from benchmarks.scaleout import main as scaleout

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "benchmarks" / "frozen-heads.yaml"
HEADS = {
    ("frozen", "pool-mlp"),
    ("frozen", "decomp"),
    ("frozen", "attn"),
    ("frozen-small", "pool-mlp"),
    ("frozen-small", "decomp"),
}


def planned() -> list:
    config = load_config(CONFIG)
    encoders = [{"name": "minilm", "run_id": "reference:all-minilm-l6-v2", "num_layers": 7, "family": "hf"}]
    return plan(config, encoders, list(config.finetune_args))


def test_each_head_runs_at_both_fractions_beside_its_twin_for_five_seeds():
    cells = planned()
    trained = [cell for cell in cells if cell.kind in ("pretrained", "random")]
    counts = Counter((cell.transfer, cell.head, cell.train_fraction, cell.kind) for cell in trained)
    assert counts == {
        (transfer, head, fraction, kind): 5
        for transfer, head in HEADS
        for fraction in (1.0, 0.1)
        for kind in ("pretrained", "random")
    }
    by_method_seed = {(cell.method, cell.seed): cell for cell in trained}
    for cell in (cell for cell in trained if cell.kind == "pretrained"):
        twin = by_method_seed[(cell.control, cell.seed)]
        assert twin.kind == "random" and (twin.args, twin.head, twin.train_fraction) == (
            cell.args,
            cell.head,
            cell.train_fraction,
        )


def test_every_cell_standardises_its_features_under_equal_steps_and_small_heads_keep_one_width():
    for cell in (cell for cell in planned() if cell.kind in ("pretrained", "random")):
        assert cell.mix == "scalar"
        assert {"--data.equal_steps=true", "--model.standardize=true"} <= set(cell.args), cell.method
        assert ("--model.hidden_size=64" in cell.args) == (cell.transfer == "frozen-small"), cell.method


def test_probes_per_arm_and_seed_and_the_baselines_are_planned():
    cells = planned()
    probes = Counter(cell.probe_of for cell in cells if cell.kind == "probe")
    assert probes == {"pretrained": 10, "random": 10}  # at 100% and on each seed's 10% subset
    assert {cell.train_fraction for cell in cells if cell.kind == "probe"} == {1.0, 0.1}
    assert [cell.method for cell in cells if cell.kind == "baseline"] == ["majority", "tfidf-lr"] + [
        "majority@0.1",
        "tfidf-lr@0.1",
    ] * 5  # and on each seed's 10% subset
    assert len(cells) == 2 * 5 * 2 * len(HEADS) + 20 + 2 + 10
    assert [cell.head for cell in cells if cell.kind == "pretrained"][-1] == "attn"  # the costliest last


def test_the_scaleout_model_prices_the_measurement(capsys):
    assert scaleout(["--config", str(CONFIG), "--cpus", "2"]) == 0
    assert "frozen-heads: 132 cells" in capsys.readouterr().out

"""A fourth family added from this module alone, as a contributor adds one: a tiny GRU language
model, its config, its LightningModule, its pretrain config file (``tests/toy_family.yaml``, what
``configs/pretrain/<family>.yaml`` is to a shipped family) and one registry entry. The team
server, the speed probes and the CLIs see it; it pretrains, fine-tunes and runs a tiny benchmark
through the real CLIs and the suite, so a new family needs nothing outside its own files."""

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient
from torch import Tensor, nn

from benchmarks import suite
from benchmarks.speed import finetune_throughput, pretrain_throughput
from downstream.run.cli import FinetuneCLI
from harness.cli.tracked_cli import run_cli
from pretrain import load_encoder
from pretrain.cli import DEFAULT_FAMILY, PretrainCLI
from pretrain.families import FAMILIES, Family, family_names, family_of_config, pretrained_families, register
from pretrain.lit_lm import LitLanguageModel
from pretrain.models.bilm import PADDING_ID, padding_mask
from pretrain.models.config import ModelConfig
from pretrain.models.flops import predicted_targets
from pretrain.models.objectives import LEFT_TO_RIGHT
from pretrain.team_server import team

REPO = Path(__file__).resolve().parents[1]


# ── the family: model, config, LightningModule ─────────────────────────────────────────────────


@dataclass(frozen=True)
class ToyConfig(ModelConfig):
    """A GRU language model.

    Args:
        vocab_size: linked from the data module's tokenizer.
        hidden_size: embedding and GRU width H.
        num_layers: GRUs.
    """

    hidden_size: int = 16
    num_layers: int = 2


class ToyLM(nn.Module):
    """Embedding → GRUs → a softmax: left to right, so padding after a sentence never reaches it."""

    objective = LEFT_TO_RIGHT

    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.num_layers, self.feature_dim = config.num_layers, config.hidden_size
        self.embedding = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=PADDING_ID)
        self.grus = nn.ModuleList(
            nn.GRU(config.hidden_size, config.hidden_size, batch_first=True) for _ in range(config.num_layers)
        )
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def layer_states(self, token_ids: Tensor) -> list[Tensor]:
        states = [self.embedding(token_ids)]  # (B, T, H)
        for gru in self.grus:
            states.append(gru(states[-1])[0])  # (B, T, H)
        return states

    def layer_outputs(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        return torch.stack(self.layer_states(token_ids)) * mask[None, :, :, None]  # (L, B, T, D)

    def forward(self, token_ids: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        top = self.layer_states(token_ids)[-1]  # (B, T, H)
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1)
        logits = self.decoder(top[:, :-1][predicts_next])  # (N, V)
        targets = token_ids[:, 1:][predicts_next]  # (N,)
        nll = nn.functional.cross_entropy(logits, targets, reduction="sum")
        return {"nll_forward": nll, "count": torch.tensor(targets.numel(), device=token_ids.device)}

    @torch.no_grad()
    def predict(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        return self.decoder(self.layer_states(token_ids)[-1]).argmax(-1)  # (B, T)

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        return [[*self.embedding.parameters(), *self.decoder.parameters()]] + [list(g.parameters()) for g in self.grus]


def toy_flops(model: ToyLM, token_ids: Tensor, lengths: Tensor) -> float:
    hidden = model.config.hidden_size
    per_token = model.num_layers * 2 * 3 * hidden * (hidden + hidden)
    predictions = predicted_targets(token_ids, lengths, 1).numel()
    return per_token * int(lengths.sum()) + 2 * hidden * model.config.vocab_size * predictions


class LitToyLM(LitLanguageModel):
    """Pretrains a :class:`ToyLM`."""

    family = "toy"
    config_class = ToyConfig


TOY = Family(
    name="toy",
    short_name="gru",
    model=ToyLM,
    config=ToyConfig,
    tokenizer="word",
    lightning_module=f"{__name__}.LitToyLM",
    flops=toy_flops,
    tiny=ToyConfig(hidden_size=8),
    config_file=REPO / "tests" / "toy_family.yaml",
)


# ── the test ───────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def toy_family():
    """The toy family, registered for this test only."""
    assert sys.modules[__name__].LitToyLM is LitToyLM  # the class path names this very module
    register(TOY)
    yield TOY
    FAMILIES.pop(TOY.name)


@pytest.fixture
def store(tmp_path, monkeypatch, mrpc_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    yield MlflowClient(uri)
    client = MlflowClient(uri)
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id]):
            shutil.rmtree(REPO / ".cache" / "encoders" / run.info.run_id, ignore_errors=True)


def runs_of(client: MlflowClient, stage: str) -> list:
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return client.search_runs(experiments, f"tags.stage = '{stage}'", order_by=["attributes.start_time DESC"])


def test_the_server_the_speed_probes_and_the_pretrain_cli_see_a_family_registered_here(
    toy_family, mrpc_dir, monkeypatch
):
    models = team().models
    assert {"toy-encoder", "toy-task-encoder"} <= set(models) and "toy" in models["toy-encoder"]
    assert "toy" in family_names() and "toy" in pretrained_families()
    settings = yaml.safe_load(TOY.pretrain_config.read_text())
    assert family_of_config(settings, DEFAULT_FAMILY)[0] is TOY  # its config's class_path names its module
    assert ("toy-cpu", "toy", None, False) in pretrain_throughput.plan_rows()
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    encoder = finetune_throughput.config_encoder("toy")  # built from its config file
    assert encoder.spec is TOY and encoder.model.config.hidden_size == 12
    FAMILIES.pop(TOY.name)
    try:
        assert "toy-encoder" not in team().models  # read when asked, not fixed at import
    finally:
        register(TOY)


@pytest.mark.slow
def test_a_family_registered_here_pretrains_finetunes_and_benchmarks(toy_family, store, tmp_path):
    config = tmp_path / "toy.yaml"  # its own config file, its checkpoints under tmp_path
    settings = yaml.safe_load(TOY.pretrain_config.read_text())
    config.write_text(
        yaml.safe_dump({**settings, "trainer": {**settings["trainer"], "default_root_dir": str(tmp_path)}})
    )
    assert run_cli(PretrainCLI, ["fit", "--config", str(config), "--model.num_layers=3"]) == 0
    (pretrained,) = runs_of(store, "pretrain")
    run_id = pretrained.info.run_id
    assert pretrained.data.tags["family"] == "toy" and pretrained.data.tags["model"] == "gru"
    assert pretrained.data.params["model.hidden_size"] == "12" and pretrained.data.params["model.num_layers"] == "3"
    assert {"val_ppl", "val_ppl_fwd", "best_val_ppl", "val_ppl_word"} <= set(pretrained.data.metrics)

    encoder = load_encoder(f"runs:/{run_id}")
    assert encoder.spec is TOY and encoder.directions == ("forward",) and encoder.num_layers == 4
    assert encoder.model.config == ToyConfig(vocab_size=len(encoder.tokenizer), hidden_size=12, num_layers=3)

    finetune = [
        "fit",
        "--config",
        str(REPO / "configs" / "downstream" / "mrpc.yaml"),
        f"--model.encoder=runs:/{run_id}",
        "--data.max_pairs=60",
        "--trainer.max_epochs=1",
        "--model.hidden_size=8",
        f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={tmp_path}",
        "--trainer.enable_progress_bar=false",
    ]
    assert run_cli(FinetuneCLI, finetune) == 0
    assert run_cli(FinetuneCLI, [*finetune, "--model.finetune=full"]) == 0
    assert run_cli(FinetuneCLI, [*finetune, "--model.finetune=full", "--model.head=cls"]) == 2  # no joint input
    tuned = runs_of(store, "finetune")
    assert len(tuned) == 2 and all(run.data.tags["family"] == "toy" and "test_acc" in run.data.metrics for run in tuned)

    benchmark = tmp_path / "benchmark.yaml"
    benchmark.write_text(
        yaml.safe_dump(
            {
                "name": "toy-quick",
                "encoders": [{"name": "toy", "pretrain": {"config": str(config)}}],
                "finetune": {"config": str(REPO / "configs" / "downstream" / "mrpc.yaml")},
                "mixes": ["scalar"],
                "heads": ["pool-mlp"],
                "seeds": 1,
                "random_control": True,
                "baselines": ["majority"],
            }
        )
    )
    code = suite.main(
        [
            "--config",
            str(benchmark),
            "--results-dir",
            str(tmp_path / "results"),
            "--jobs",
            "1",
            "--finetune-args",
            " ".join(finetune[4:]),
        ]
    )
    assert code == 0
    (parent,) = runs_of(store, "benchmark")
    assert parent.info.status == "FINISHED"
    results = (tmp_path / "results" / "results.csv").read_text()
    assert "toy-scalar-pool-mlp" in results and "random-scalar-pool-mlp" in results

"""bf16-mixed through Lightning's precision flag: every family pretrains and fine-tunes under it with
the float32 losses, frozen features stay float32, and a bf16 request on hardware without native
bf16 ends in one line naming ``--trainer.precision`` before any run exists.

The tolerance: bf16 keeps 8 significant bits (unit roundoff u = 2^-8 ≈ 0.4%). Under autocast only
the inputs of matmuls, LSTMs and attention are rounded; products accumulate in float32 and the
softmax and loss run in float32, so a tiny model's logits move by a few u of their size and its
mean NLL by far less than a nat. We ask every step's loss to agree within ln(1.02) ≈ 0.0198 nats —
perplexities within 2% (docs/speed.md) — after enough steps that the loss has fallen well below
log V (so the check compares trained models, not two copies of the uniform start).
"""

import math
import platform
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

import harness.cli.precision as precision
from downstream.data.features import FeatureStore
from downstream.run.lit_pair import LitPairClassifier
from harness.cli.tracked_cli import TrackedCLI, run_cli
from harness.errors import UserError
from harness.training.batching import pad_batch
from pretrain.cli import PretrainCLI
from pretrain.encoders.loading import load_encoder
from pretrain.lit_awd_lstm import LitAWDLSTM
from pretrain.lit_bilm import LitBiLM
from pretrain.lit_gpt import LitGPT

TOLERANCE = math.log(1.02)  # nats: perplexity within 2%
# oneDNN has no bf16 LSTM on a CPU without native bf16 ("could not create a primitive descriptor");
# the harness refuses bf16 there before any run (below), so an LSTM under bf16 is only tested where it runs
NATIVE_BF16 = pytest.mark.skipif(
    not precision.cpu_bf16_supported(), reason="an LSTM under bf16 needs a CPU with native bf16"
)
VOCAB = 40
LANGUAGE_MODELS = {
    "elmo": lambda: LitBiLM(vocab_size=VOCAB, hidden_size=32, num_layers=2, dropout=0.0, learning_rate=1e-2),
    "ulmfit": lambda: LitAWDLSTM(
        vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_layers=2, drop_mult=0.0, learning_rate=3e-2
    ),
    "gpt": lambda: LitGPT(
        vocab_size=VOCAB,
        num_layers=2,
        hidden_size=32,
        num_heads=2,
        max_positions=32,
        dropout=0.0,
        attention_dropout=0.0,
        schedule="constant",
        learning_rate=1e-2,
    ),
}


def counting_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Sentences that count up (mod V) from a random start, of 5–14 tokens: learnable both ways."""
    generator = torch.Generator().manual_seed(0)
    sentences = []
    for length in torch.randint(5, 15, (48,), generator=generator).tolist():
        start = int(torch.randint(0, VOCAB - 1, (1,), generator=generator))
        sentences.append(torch.tensor([1 + (start + step) % (VOCAB - 1) for step in range(length)]))
    return [pad_batch(sentences[start : start + 16]) for start in range(0, len(sentences), 16)]


class Losses(pl.Callback):
    """Every training step's loss, and the dtypes the model's matmul layers produced."""

    def __init__(self, module: pl.LightningModule):
        self.losses: list[float] = []
        self.dtypes: set[torch.dtype] = set()
        for layer in module.modules():
            if isinstance(layer, (torch.nn.Linear, torch.nn.LSTM)):
                layer.register_forward_hook(self.record_dtype)

    def record_dtype(self, layer, inputs, output):
        self.dtypes.add((output[0] if isinstance(output, tuple) else output).dtype)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_index):
        self.losses.append(float(outputs["loss"]))


def train(make_module, loader, precision_flag: str, epochs: int, clip: float = 1.0, callbacks=()) -> Losses:
    """Fit with the modules' own (fused) AdamW and gradient clipping, as the configs do."""
    torch.manual_seed(0)
    module = make_module()
    losses = Losses(module)
    trainer = pl.Trainer(
        precision=precision_flag,
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        gradient_clip_val=clip,
        callbacks=[losses, *callbacks],
    )
    trainer.fit(module, train_dataloaders=loader)
    return losses


def assert_same_curve(reference: Losses, bf16: Losses, fallen_by: float) -> None:
    assert reference.dtypes == {torch.float32} and bf16.dtypes == {torch.bfloat16}  # bf16 really ran
    assert reference.losses[0] - min(reference.losses) > fallen_by  # the models learned something
    gaps = [abs(a - b) for a, b in zip(reference.losses, bf16.losses)]
    assert len(gaps) == len(reference.losses) and max(gaps) < TOLERANCE, max(gaps)


@pytest.mark.parametrize(
    "family", [pytest.param(family, marks=[] if family == "gpt" else NATIVE_BF16) for family in sorted(LANGUAGE_MODELS)]
)
def test_pretraining_under_bf16_mixed_matches_float32(family):
    loader = torch.utils.data.DataLoader(counting_batches(), batch_size=None)
    reference = train(LANGUAGE_MODELS[family], loader, "32-true", epochs=8)
    bf16 = train(LANGUAGE_MODELS[family], loader, "bf16-mixed", epochs=8)
    assert_same_curve(reference, bf16, fallen_by=0.5)


class GradientNorms(pl.Callback):
    """The total gradient norm each optimiser step used (read before the next step zeroes it)."""

    def __init__(self):
        self.norms: list[float] = []

    def on_before_zero_grad(self, trainer, pl_module, optimizer):
        gradients = [p.grad for p in pl_module.parameters() if p.grad is not None]
        if gradients:
            self.norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in gradients]))))


@pytest.mark.parametrize("precision_flag", ["32-true", pytest.param("bf16-mixed", marks=NATIVE_BF16)])
def test_gradient_clipping_runs_with_the_fused_optimizer_under_every_precision(precision_flag):
    """Lightning's mixed-precision plugin refuses to clip for a fused optimizer; bf16 has no scaler,
    so the harness clips itself: the norm each step used is at most the bound."""
    norms = GradientNorms()
    loader = torch.utils.data.DataLoader(counting_batches(), batch_size=None)
    train(LANGUAGE_MODELS["elmo"], loader, precision_flag, epochs=2, clip=1e-3, callbacks=[norms])
    assert len(norms.norms) >= 4 and max(norms.norms) <= 1e-3 * (1 + 1e-4)


# ── fine-tuning ───────────────────────────────────────────────────────────────────────────────

PAIR_SENTENCES = [
    "the cat sat on the mat .",
    "a dog barked at the cat , loudly .",
    "shares fell 3 percent on monday .",
    "the market rose sharply after the report .",
    "he said so .",
    "she agreed to the plan at once .",
    "the cat said so .",
    "shares rose on monday .",
]


def pair_loader(encoder, kind: str) -> torch.utils.data.DataLoader:
    """Eight pairs, as the data module feeds them: frozen features, token ids, or GPT's joint sequences."""
    first, second = PAIR_SENTENCES, PAIR_SENTENCES[1:] + PAIR_SENTENCES[:1]
    if kind == "features":
        inputs = [*encoder.embed_layers(first), *encoder.embed_layers(second)]
    elif kind == "tokens":
        inputs = [*encoder.encode(first), *encoder.encode(second)]
    else:
        pairs = [torch.tensor(encoder.tokenizer.encode_pair(a, b)) for a, b in zip(first, second)]
        swapped = [torch.tensor(encoder.tokenizer.encode_pair(b, a)) for a, b in zip(first, second)]
        inputs = [*pad_batch(pairs), *pad_batch(swapped)]
    tensors = (*inputs, torch.tensor([0, 1] * 4), torch.arange(8))

    def collate(indices):
        index = torch.tensor(indices)
        return tuple(t[:, index] if t.dim() == 4 else t[index] for t in tensors)

    return torch.utils.data.DataLoader(range(8), batch_size=4, collate_fn=collate)


@pytest.mark.parametrize(
    "family, finetune, head",
    [
        ("elmo", "frozen", "pool-mlp"),
        pytest.param("elmo", "full", "pool-mlp", marks=NATIVE_BF16),
        ("ulmfit", "frozen", "pool-mlp"),
        pytest.param("ulmfit", "full", "pool-mlp", marks=NATIVE_BF16),
        ("gpt", "frozen", "pool-mlp"),
        ("gpt", "full", "cls"),
    ],
)
def test_fine_tuning_under_bf16_mixed_matches_float32(family, finetune, head, save_encoder, tmp_path):
    path, _ = save_encoder(family, tmp_path)

    def classifier():  # every group, the scalar mix's too, at one rate: its default 0.1 on 8 pairs turns
        # bf16's rounding into another mix within 20 steps (GPT frozen: a loss gap of 0.035 nats)
        return LitPairClassifier(
            load_encoder(path),
            finetune=finetune,
            head=head,
            hidden_size=16,
            dropout=0.0,
            learning_rate=3e-2,
            mix_learning_rate=3e-2,
            lm_weight=0.5 if head == "cls" else 0.0,
            standardize=False,
        )  # raw features: these batches come from no feature store

    kind = "features" if finetune == "frozen" else "joint" if head == "cls" else "tokens"
    loader = pair_loader(load_encoder(path), kind)
    reference = train(classifier, loader, "32-true", epochs=10)
    bf16 = train(classifier, loader, "bf16-mixed", epochs=10)
    assert_same_curve(reference, bf16, fallen_by=0.1)


# ── frozen features ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("family", sorted(LANGUAGE_MODELS))
def test_frozen_features_stay_float32_inside_bf16_autocast(family, save_encoder, tmp_path):
    """A bf16 run builds its feature cache with the float32 encoder: same values, same cache key."""
    path, _ = save_encoder(family, tmp_path)
    encoder = load_encoder(path)
    reference, reference_mask = encoder.embed_layers(PAIR_SENTENCES)
    reference_store = FeatureStore.build(encoder, PAIR_SENTENCES, tmp_path / "fp32", progress=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layers, mask = encoder.embed_layers(PAIR_SENTENCES)
        store = FeatureStore.build(encoder, PAIR_SENTENCES, tmp_path / "bf16", progress=False)
    assert layers.dtype == torch.float32 and torch.equal(layers, reference) and torch.equal(mask, reference_mask)
    assert store.key == reference_store.key
    assert all(torch.equal(store.get(i), reference_store.get(i)) for i in range(len(PAIR_SENTENCES)))


# ── the request check ─────────────────────────────────────────────────────────────────────────


def test_float32_and_supported_bf16_pass(monkeypatch):
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: True)
    for flag in ("32-true", "32", 32, "16-mixed", "bf16-mixed", "bf16-true"):
        precision.check_precision(flag, "cpu")


@pytest.mark.parametrize("flag", ["bf16-mixed", "bf16", "bf16-true"])
def test_bf16_without_native_support_is_one_line_naming_the_flag(monkeypatch, flag):
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: False)
    monkeypatch.setattr(precision, "cuda_bf16_supported", lambda: False)
    for accelerator in ("cpu", "cuda", "gpu"):
        with pytest.raises(UserError) as raised:
            precision.check_precision(flag, accelerator)
        message = str(raised.value)
        assert message.startswith(f"--trainer.precision={flag}: ") and "\n" not in message
        assert "--trainer.precision=32-true" in message
    precision.check_precision("32-true", "cpu")  # float32 is never refused


def test_auto_accelerator_is_the_device_lightning_picks(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision.device_type("auto") == "cpu" and precision.device_type("gpu") == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert precision.device_type("auto") == "cuda" and precision.device_type("cpu") == "cpu"


@pytest.mark.skipif(
    platform.machine() != "x86_64" or not Path("/proc/cpuinfo").is_file(), reason="reads the kernel's x86 CPU flags"
)
def test_cpu_detection_agrees_with_the_kernels_cpu_flags():
    flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")).split()
    assert precision.cpu_bf16_supported() == ("avx512_bf16" in flags or "amx_bf16" in flags)


SMOKE_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "pretrain" / "smoke.yaml"


def smoke_store(monkeypatch, tmp_path, mrpc_dir) -> tuple[str, Path]:
    """A fresh store in ``tmp_path`` (the working folder) and MRPC for a smoke pretraining; returns
    the store's URI and the smoke config."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.chdir(tmp_path)
    return uri, SMOKE_CONFIG


@pytest.mark.slow
def test_the_cli_refuses_unsupported_bf16_before_a_run_exists(monkeypatch, capsys, tmp_path, mrpc_dir):
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: False)
    uri, smoke = smoke_store(monkeypatch, tmp_path, mrpc_dir)
    code = run_cli(
        PretrainCLI,
        [
            "fit",
            "--config",
            str(smoke),
            "--data.max_sentences=50",
            "--trainer.accelerator=cpu",
            "--trainer.precision=bf16-mixed",
        ],
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[-1].startswith("error: --trainer.precision=bf16-mixed: this CPU has no native bf16")
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]]
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    assert not experiments or client.search_runs(experiments, run_view_type=ViewType.ALL) == []


# ── the default ───────────────────────────────────────────────────────────────────────────────


def test_the_default_is_bf16_mixed_where_native_and_float32_elsewhere(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: True)
    assert precision.default_precision("cpu") == precision.default_precision("auto") == "bf16-mixed"
    assert precision.default_precision("mps") == "32-true"  # other accelerators: never guessed
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: False)
    assert precision.default_precision("cpu") == "32-true"
    monkeypatch.setattr(precision, "cuda_bf16_supported", lambda: True)
    assert precision.default_precision("gpu") == "bf16-mixed" and precision.default_precision("cpu") == "32-true"


@pytest.mark.slow
@pytest.mark.parametrize("native", [pytest.param(True, marks=NATIVE_BF16), False])
def test_a_run_without_a_precision_runs_and_records_the_hardwares_default(monkeypatch, tmp_path, mrpc_dir, native):
    """No ``--trainer.precision``: bf16-mixed where bf16 is native, else 32-true, in the Trainer and
    in the run's params; an explicit flag is kept as given."""
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: native)
    uri, smoke = smoke_store(monkeypatch, tmp_path, mrpc_dir)
    quick = [
        "fit",
        "--config",
        str(smoke),
        "--data.max_sentences=50",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=1",
        "--trainer.limit_val_batches=1",
        "--trainer.accelerator=cpu",
        "--trainer.enable_progress_bar=false",
        "--samples_every_n_steps=0",
    ]
    assert run_cli(PretrainCLI, quick) == 0
    assert run_cli(PretrainCLI, [*quick, "--trainer.precision=32-true"]) == 0
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, order_by=["attributes.start_time ASC"])
    assert [run.data.params.get("trainer.precision") for run in runs] == [
        "bf16-mixed" if native else "32-true",
        "32-true",
    ]


@pytest.mark.parametrize(
    "recorded, expected",
    [
        (None, "bf16-mixed"),  # a new run: this machine's default
        ({"trainer.precision": "32-true"}, "32-true"),  # resumed: the precision it recorded
        ({"trainer.precision": "bf16-mixed"}, "bf16-mixed"),
        ({}, "32-true"),  # resumed, made before the precision was recorded: Lightning's float32
    ],
)
def test_a_resumed_run_keeps_the_precision_it_ran_in(monkeypatch, recorded, expected):
    monkeypatch.setattr(precision, "cpu_bf16_supported", lambda: True)
    cli = TrackedCLI.__new__(TrackedCLI)  # the settings alone, no parser
    cli.subcommand, cli.config = "fit", {"fit": {"trainer": {"precision": None, "accelerator": "cpu"}}}
    cli.resolve_precision(recorded)
    assert cli.setting("trainer.precision") == expected
    cli.config["fit"]["trainer"]["precision"] = "32-true"  # named by a flag: kept
    cli.resolve_precision(recorded)
    assert cli.setting("trainer.precision") == "32-true"

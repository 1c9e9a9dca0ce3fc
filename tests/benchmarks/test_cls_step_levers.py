"""``benchmarks.speed.cls_step_levers``: each lever changes what it names inside its block and
nothing after it, the one-batch lever computes GPT's classifier as the harness does, and the
command writes a row per lever."""

import json

import pytest
import torch

from benchmarks.speed import cls_step_levers
from downstream.model.pair_classifier import PairClassifier
from pretrain.encoders.loading import load_encoder


@pytest.fixture
def gpt_classifier(save_encoder, tmp_path):
    encoder = load_encoder(save_encoder("gpt", tmp_path)[0])
    torch.manual_seed(0)
    return PairClassifier(encoder, mix="scalar", head="cls", finetune="full", lm_weight=0.5)


def joint_batch(classifier, batch=3, steps=7):
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([steps, steps - 2, steps - 3])[:batch]
    ids = torch.randint(4, classifier.encoder.model.vocab_size, (batch, steps), generator=generator)
    ids = ids * (torch.arange(steps)[None] < lengths[:, None])  # trailing padding
    return ids, lengths, ids.flip(0), lengths.flip(0)


def dropout_settings(model):
    return [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)] + [
        m.attention_dropout for m in model.modules() if isinstance(getattr(m, "attention_dropout", None), float)
    ]


def test_each_lever_holds_inside_its_block_only(gpt_classifier):
    before = dropout_settings(gpt_classifier)
    assert any(before)
    with cls_step_levers.without_dropout(gpt_classifier):
        assert not any(dropout_settings(gpt_classifier))
    assert dropout_settings(gpt_classifier) == before
    gelus = [m for m in gpt_classifier.modules() if isinstance(m, torch.nn.GELU)]
    assert gelus and {m.approximate for m in gelus} == {"tanh"}
    with cls_step_levers.exact_gelu(gpt_classifier):
        assert {m.approximate for m in gelus} == {"none"}
    assert {m.approximate for m in gelus} == {"tanh"}
    with cls_step_levers.both_orders_in_one_batch(gpt_classifier):
        assert "forward" in vars(gpt_classifier.head)
    assert "forward" not in vars(gpt_classifier.head)


def test_one_batch_of_both_orders_is_the_same_classifier(gpt_classifier):
    """Without dropout the lever's one pass gives the harness's logits and LM sums, at float rounding."""
    gpt_classifier.eval()
    model = gpt_classifier.encoder.model
    inputs = joint_batch(gpt_classifier)
    with torch.no_grad():
        logits, lm = gpt_classifier.head(model, *inputs)
        model.train()  # the harness takes one pass per order in training
        with cls_step_levers.without_dropout(gpt_classifier):
            two_pass_logits, two_pass_lm = gpt_classifier.head(model, *inputs)
            one_logits, one_lm = cls_step_levers.one_batch_training(gpt_classifier.head, model, *inputs)
    torch.testing.assert_close(one_logits, two_pass_logits)
    torch.testing.assert_close(one_logits, logits)
    torch.testing.assert_close(one_lm["nll_forward"], two_pass_lm["nll_forward"])
    assert int(one_lm["count"]) == int(two_pass_lm["count"]) > 0


@pytest.mark.slow
def test_the_command_times_every_lever(tmp_path, mrpc_dir, monkeypatch, capsys):
    """On its default encoder: GPT's CPU config, untrained."""
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.setattr(cls_step_levers, "BATCH_SIZE", 4)
    output = tmp_path / "levers.json"
    argv = ["--batches", "1", "--rounds", "2", "--precision", "32-true", "--json", str(output)]
    assert cls_step_levers.main(argv) == 0
    rows = json.loads(output.read_text())
    assert [row["lever"] for row in rows] == list(cls_step_levers.LEVERS)
    for row in rows:
        assert len(row["step_seconds"]) == 2 and row["median_step_seconds"] > 0
        assert row["study_cell_steps_minutes"] == pytest.approx(690 * row["median_step_seconds"] / 60)
    assert rows[0]["over_as_run"] == 1.0
    assert "all three" in capsys.readouterr().out


def test_an_encoder_without_a_joint_input_is_one_line(save_encoder, tmp_path, capsys):
    path = save_encoder("elmo", tmp_path)[0]
    assert cls_step_levers.main(["--encoder", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "elmo" in error and "cls" in error

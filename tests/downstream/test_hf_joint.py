"""The joint pair input as a capability of the encoder: BERT's ``[CLS] s1 [SEP] s2 [SEP]`` with
segment ids for a bidirectional model, GPT's both orders for a left-to-right one; the ``cls`` head
trains the whole encoder through it, every other head still works on hf features."""

import pytest
import torch

from downstream.data.joint_segments import SegmentBatches, segment_pair
from downstream.model.joint_classifiers import FirstTokenClassifier, JointClassifier
from downstream.model.pair_classifier import JointPair, SegmentPair, TokenPair
from downstream.run.lit_pair import LitPairClassifier
from pretrain import load_encoder

PAIRS = [
    ("He said so.", "He agreed."),
    ("Shares fell 3 percent on Monday.", "The market rose."),
    ("Yes.", "The court approved the merger last week."),
]


def segment_batch(encoder):
    collate = SegmentBatches([segment_pair(encoder, a, b) for a, b in PAIRS], [1, 0, 1])
    return collate([0, 1, 2])


def test_segment_batches_pad_ids_and_segments_together(tiny_bert):
    encoder = load_encoder(f"hf:{tiny_bert}")
    ids, lengths, segments, lengths_again, labels, index = segment_batch(encoder)
    assert ids.shape == segments.shape and torch.equal(lengths, lengths_again) and labels.tolist() == [1, 0, 1]
    for row, (first, second) in enumerate(PAIRS):
        expected_ids, expected_segments = encoder.tokenizer.encode_pair_segments(first, second)
        assert ids[row, : lengths[row]].tolist() == expected_ids
        assert segments[row, : lengths[row]].tolist() == expected_segments
        assert set(segments[row, lengths[row] :].tolist()) <= {0}
    assert ids[:, 0].eq(encoder.tokenizer.encode("x")[0]).all()  # every row starts with [CLS]


def test_the_head_follows_the_capability_not_the_name(tiny_bert, tiny_gpt2):
    bert = LitPairClassifier(load_encoder(f"hf:{tiny_bert}"), finetune="full", head="cls")
    gpt2 = LitPairClassifier(load_encoder(f"hf:{tiny_gpt2}"), finetune="full", head="cls")
    assert isinstance(bert.head, FirstTokenClassifier) and isinstance(gpt2.head, JointClassifier)
    assert bert.input_kind == gpt2.input_kind == "joint"
    with pytest.raises(ValueError, match=r"^lm_weight=0.5: this hf encoder has no language-model head"):
        LitPairClassifier(load_encoder(f"hf:{tiny_gpt2}"), finetune="full", head="cls", lm_weight=0.5)
    with pytest.raises(ValueError, match=r"^head=cls: .*joint pair input.*this is hf, frozen"):
        LitPairClassifier(load_encoder(f"hf:{tiny_bert}"), finetune="frozen", head="cls")


def test_a_cls_step_trains_the_encoder_and_reads_the_first_token(tiny_bert):
    torch.manual_seed(0)
    model = LitPairClassifier(load_encoder(f"hf:{tiny_bert}"), finetune="full", head="cls", dropout=0.0)
    batch = segment_batch(model.encoder)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    inputs = model.batch_inputs(batch)
    assert isinstance(inputs, SegmentPair)
    logits, lm_loss = model.classifier(inputs)
    assert logits.shape == (3, 2) and lm_loss is None
    torch.nn.functional.cross_entropy(logits, batch[4]).backward()
    optimizer.step()
    changed = {name for name, p in model.named_parameters() if not torch.equal(before[name], p)}
    assert any(name.startswith("classifier.encoder_model.") for name in changed)
    assert "classifier.head.linear.weight" in changed
    model.eval()
    ids, lengths, segments = batch[:3]
    with torch.no_grad():  # the logits depend on the first token's state only
        first = model.encoder.model.hidden_states(ids, lengths, segments)[:, 0]
        torch.testing.assert_close(model(inputs), model.head.linear(first))
        other_segments = model(SegmentPair(ids, lengths, torch.zeros_like(segments), lengths))
    assert not torch.allclose(other_segments, model(inputs))  # segment ids reach the model


def test_gpt2_both_orders_sum_the_last_token_states(tiny_gpt2):
    torch.manual_seed(0)
    model = LitPairClassifier(load_encoder(f"hf:{tiny_gpt2}"), finetune="full", head="cls", dropout=0.0).eval()
    tokenizer = model.encoder.tokenizer
    forward = torch.tensor([tokenizer.encode_pair(*PAIRS[0])])
    backward = torch.tensor([tokenizer.encode_pair(*PAIRS[0][::-1])])
    lengths_ab, lengths_ba = torch.tensor([forward.shape[1]]), torch.tensor([backward.shape[1]])
    with torch.no_grad():
        logits = model(JointPair(forward, lengths_ab, backward, lengths_ba))
        states = [
            model.encoder.model.hidden_states(ids, lengths)[0, -1]
            for ids, lengths in ((forward, lengths_ab), (backward, lengths_ba))
        ]
        torch.testing.assert_close(logits[0], model.head.linear(states[0] + states[1]))


@pytest.mark.parametrize("head", ["pool-mlp", "attn", "dense"])
def test_siamese_heads_fine_tune_an_hf_encoder(tiny_bert, head):
    model = LitPairClassifier(load_encoder(f"hf:{tiny_bert}"), finetune="full", head=head, mix="top", hidden_size=8)
    encoder = model.encoder
    first = encoder.encode([a for a, _ in PAIRS])
    second = encoder.encode([b for _, b in PAIRS])
    logits = model(TokenPair(*first, *second))
    torch.nn.functional.cross_entropy(logits, torch.tensor([1, 0, 1])).backward()
    assert logits.shape == (3, 2) and encoder.model.network.get_input_embeddings().weight.grad is not None

"""capture.run_with_features: hidden states and hooked q/k/v reproduce eager attention, also under sdpa."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    ElectraConfig,
    ElectraForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from distill_sweep.models.capture import Features, attention_scores, run_with_features, self_attention_module

# Tiny tensors: one intra-op thread (conftest.one_thread).
pytestmark = pytest.mark.usefixtures("one_thread")


FAMILIES = {
    "bert": (BertConfig, BertForSequenceClassification),
    "roberta": (RobertaConfig, RobertaForSequenceClassification),
    "electra": (ElectraConfig, ElectraForSequenceClassification),
}


def tiny(family: str, attn: str, layers: int = 2, seed: int = 0) -> torch.nn.Module:
    cfg_cls, model_cls = FAMILIES[family]
    cfg = cfg_cls(
        vocab_size=60,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=40,
        pad_token_id=1,
        num_labels=3,
        attn_implementation=attn,
        **({"embedding_size": 32} if family == "electra" else {}),
    )
    torch.manual_seed(seed)
    return model_cls(cfg).eval()


def batch(b: int = 3, s: int = 9) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 60, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 1:] = 0  # a single real token
    return {
        "input_ids": ids.masked_fill(mask == 0, 1),
        "attention_mask": mask,
        "labels": torch.zeros(b).long(),
    }


def eager_probs_from_capture(f: Features, layer: int, mask: torch.Tensor) -> torch.Tensor:
    q, k, _ = f.qkv[layer]
    s = attention_scores(q, k, f.num_heads, f.scaling)
    s = s + (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min  # eager's own mask
    return s.softmax(-1)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra"])
def test_hooks_reproduce_eager_attention(family: str) -> None:
    model = tiny(family, "eager")
    b = batch()
    with torch.no_grad():
        ref = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], output_attentions=True)
        f = run_with_features(model, b, hidden=True, qkv_layers=[1, 2])
    assert len(ref.attentions) == 2
    for layer in (1, 2):
        torch.testing.assert_close(
            eager_probs_from_capture(f, layer, b["attention_mask"]),
            ref.attentions[layer - 1],
            atol=1e-6,
            rtol=0,
        )
    torch.testing.assert_close(f.logits, ref.logits)
    assert (f.num_heads, f.head_dim, f.scaling) == (4, 8, pytest.approx(8**-0.5))


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_capture_under_sdpa_matches_eager(family: str) -> None:
    eager, sdpa = tiny(family, "eager"), tiny(family, "sdpa")
    assert sdpa.config._attn_implementation == "sdpa"
    b = batch()
    with torch.no_grad():
        # Why we hook: sdpa hands back no attention maps at all.
        assert (
            len(
                sdpa(
                    input_ids=b["input_ids"], attention_mask=b["attention_mask"], output_attentions=True
                ).attentions
                or ()
            )
            == 0
        )
        fe = run_with_features(eager, b, hidden=True, qkv_layers=[1, 2])
        fs = run_with_features(sdpa, b, hidden=True, qkv_layers=[1, 2])
    for layer in (1, 2):
        m = b["attention_mask"]
        torch.testing.assert_close(
            eager_probs_from_capture(fs, layer, m), eager_probs_from_capture(fe, layer, m), atol=1e-5, rtol=0
        )
    valid = b["attention_mask"].bool()
    for he, hs in zip(fe.hidden_states, fs.hidden_states, strict=True):
        torch.testing.assert_close(hs[valid], he[valid], atol=1e-5, rtol=0)


def test_hidden_states_and_selected_layers_only() -> None:
    model = tiny("bert", "sdpa", layers=3)
    b = batch()
    with torch.no_grad():
        ref = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], output_hidden_states=True)
        f = run_with_features(model, b, hidden=True, qkv_layers=[2])
        g = run_with_features(model, b, hidden=False, qkv_layers=[])
    assert len(f.hidden_states) == 4  # embeddings + 3 layers
    for a, r in zip(f.hidden_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(a, r)
    assert list(f.qkv) == [2] and all(t.shape == (3, 9, 32) for t in f.qkv[2])
    assert g.hidden_states is None and g.qkv == {}
    torch.testing.assert_close(g.logits, ref.logits)


def test_hooks_removed_even_on_error() -> None:
    model = tiny("bert", "sdpa")
    attn = self_attention_module(model, 1)
    with torch.no_grad():
        run_with_features(model, batch(), hidden=False, qkv_layers=[1, 2])
        with pytest.raises(IndexError):  # token id outside the vocabulary: the forward raises
            run_with_features(model, {"input_ids": torch.full((1, 4), 999)}, hidden=False, qkv_layers=[1])
    for name in ("query", "key", "value"):
        assert len(getattr(attn, name)._forward_hooks) == 0
    with pytest.raises(ValueError, match="layers 1..2"):
        run_with_features(model, batch(), hidden=False, qkv_layers=[3])


def test_student_projections_stay_in_graph_and_teacher_runs_in_inference_mode() -> None:
    model = tiny("bert", "sdpa").train()
    f = run_with_features(model, batch(), hidden=True, qkv_layers=[1])
    q, k, v = f.qkv[1]
    assert q.requires_grad and k.requires_grad and v.requires_grad
    (q.sum() + f.hidden_states[0].sum()).backward()
    assert self_attention_module(model, 1).query.weight.grad is not None

    teacher = tiny("bert", "sdpa")
    with torch.inference_mode():
        ft = run_with_features(teacher, batch(), hidden=True, qkv_layers=[2])
    assert not ft.qkv[2][0].requires_grad and ft.qkv[2][0].is_inference()


def test_shared_layer_is_captured_per_application() -> None:
    """One layer object at positions 1 and 3 (parameter sharing): each position keeps the q/k/v of its own
    application, not the last application's."""
    cfg = BertConfig(
        vocab_size=60,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=40,
        num_labels=2,
        initializer_range=0.3,  # large weights: each layer really moves the hidden states
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg).eval()
    layers = model.bert.encoder.layer
    layers[2] = layers[0]
    ids = torch.randint(3, 60, (2, 7), generator=torch.Generator().manual_seed(2))
    b = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    with torch.no_grad():
        f = run_with_features(model, b, hidden=True, qkv_layers=[1, 2, 3])
        # the same forward by hand, one layer at a time (no padding, so no mask to pass)
        h = [model.bert.embeddings(input_ids=ids, token_type_ids=b["token_type_ids"])]
        for layer in layers:
            out = layer(h[-1])
            h.append(out[0] if isinstance(out, tuple) else out)
    torch.testing.assert_close(h[3], f.hidden_states[3])  # the hand run is the model's run
    for pos in (1, 2, 3):
        attn = layers[pos - 1].attention.self
        expect = tuple(getattr(attn, n)(h[pos - 1]) for n in ("query", "key", "value"))
        for got, want in zip(f.qkv[pos], expect, strict=True):
            torch.testing.assert_close(got, want)
    # same weights, different inputs: positions 1 and 3 must not hold the same tensors
    assert (f.qkv[1][0] - f.qkv[3][0]).abs().max() > 0.5

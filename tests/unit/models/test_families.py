"""Model families (families.py): the encoder path unchanged, and Llama / GPT-2 decoders behind the same seam."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_gpt2, tiny_llama
from transformers import (
    BertConfig,
    BertForSequenceClassification,
)

from distill_sweep.models.capture import run_with_features, truncated
from distill_sweep.models.families import family_of, family_of_model
from distill_sweep.models.inits import resolve_init
from distill_sweep.models.model_info import ModelInfo
from distill_sweep.students.base import BuildInputs
from distill_sweep.students.truncated import build
from distill_sweep.students.truncated_settings import TruncatedSettings


def test_truncated_bert_student_is_the_teachers_layers_computed_as_a_plain_bert():
    """The family seam must leave a truncated BERT student exactly the pre-seam one: embeddings, pooler and the
    init's teacher layers copied, and its features what a plain HF forward of that student computes. The
    reference is rebuilt here by hand (a fresh 2-layer BERT loaded layer by layer); weights are compared
    exactly (a copy), float outputs with a tolerance (kernels differ in the last bits across CPUs)."""
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=24, num_labels=3)
    teacher = BertForSequenceClassification(cfg).eval()
    init = resolve_init("mixed", 4, 2)
    assert init.layers == [1, 4]  # mixed: the first layer, then the skip rule's (2, 4) above it
    torch.manual_seed(1)
    student = build(TruncatedSettings(num_layers=2), BuildInputs(arch=None, teacher=teacher, init=init,
                                                                 num_labels=3, label_names=[])).eval()
    # the reference: the pre-seam recipe, a fresh shallow BERT given the teacher's parts by state dict
    reference = BertForSequenceClassification(BertConfig(**{**cfg.to_dict(), "num_hidden_layers": 2})).eval()
    reference.bert.embeddings.load_state_dict(teacher.bert.embeddings.state_dict())
    reference.bert.pooler.load_state_dict(teacher.bert.pooler.state_dict())
    for i, layer in enumerate(init.layers):
        reference.bert.encoder.layer[i].load_state_dict(teacher.bert.encoder.layer[layer - 1].state_dict())
    reference.classifier.load_state_dict(student.classifier.state_dict())  # the head starts fresh in both
    got, want = student.state_dict(), reference.state_dict()
    assert sorted(got) == sorted(want)
    for key in want:
        assert torch.equal(got[key], want[key]), key
    assert not torch.equal(student.classifier.weight, teacher.classifier.weight)

    ids = torch.tensor([[2, 5, 6, 7, 3, 0], [2, 9, 8, 7, 6, 3]])
    mask = (ids != 0).long()
    with torch.no_grad():
        f = run_with_features(student, {"input_ids": ids, "attention_mask": mask}, hidden=True, qkv_layers=[1, 2])
        plain = reference(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        tol = {"rtol": 1e-5, "atol": 1e-6}
        torch.testing.assert_close(f.logits, plain.logits, **tol)
        assert len(f.hidden_states) == 3
        for mine, theirs in zip(f.hidden_states, plain.hidden_states, strict=True):
            torch.testing.assert_close(mine, theirs, **tol)
        for position in (1, 2):  # q/k/v of a layer: its Linear maps applied to that layer's input
            attention = reference.bert.encoder.layer[position - 1].attention.self
            layer_input = plain.hidden_states[position - 1]
            q, k, v = f.qkv[position]
            torch.testing.assert_close(q, attention.query(layer_input), **tol)
            torch.testing.assert_close(k, attention.key(layer_input), **tol)
            torch.testing.assert_close(v, attention.value(layer_input), **tol)






@pytest.mark.parametrize("make", [lambda: tiny_llama(False), lambda: tiny_llama(True), tiny_gpt2],
                         ids=["llama", "llama-tied", "gpt2"])
def test_decoder_student_copies_layers_norm_and_head(make):
    teacher = make()
    family = family_of_model(teacher)
    assert family.causal and family.name in ("llama", "gpt2")
    student = build(TruncatedSettings(num_layers=2), BuildInputs(arch=None, teacher=teacher,
                                                                 init=resolve_init([2, 4], 4, 2), num_labels=2,
                                                                 label_names=[])).eval()
    t_layers, s_layers = family.layers(teacher), family.layers(student)
    assert len(s_layers) == 2
    for i, t in enumerate([2, 4]):
        t_state = t_layers[t - 1].state_dict()
        for key, value in s_layers[i].state_dict().items():
            assert torch.equal(value, t_state[key]), key
    norm = family.final_norm
    assert torch.equal(getattr(student.base_model, norm).weight, getattr(teacher.base_model, norm).weight)
    assert torch.equal(student.get_output_embeddings().weight, teacher.get_output_embeddings().weight)
    tied = teacher.get_output_embeddings().weight is teacher.get_input_embeddings().weight
    assert (student.get_output_embeddings().weight is student.get_input_embeddings().weight) == tied


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2], ids=["llama", "gpt2"])
def test_bottom_decoder_student_reproduces_the_teachers_lower_layers_and_truncation_is_exact(make):
    teacher = make()
    student = build(TruncatedSettings(num_layers=2), BuildInputs(arch=None, teacher=teacher,
                                                                 init=resolve_init("bottom", 4, 2), num_labels=2,
                                                                 label_names=[])).eval()
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        t_hidden = teacher(input_ids=ids, output_hidden_states=True).hidden_states
        s_hidden = student(input_ids=ids, output_hidden_states=True).hidden_states
        with truncated(teacher, 2):
            cut = teacher(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(family_of_model(teacher).layers(teacher)) == 4  # restored
    for i in range(2):  # the last entry of hidden_states is after the final norm: compare the ones below
        torch.testing.assert_close(s_hidden[i], t_hidden[i], rtol=0, atol=0)
        torch.testing.assert_close(cut[i], t_hidden[i], rtol=0, atol=0)


def test_attention_terms_are_refused_for_decoders_and_kept_for_encoders():
    assert not ModelInfo.from_config(tiny_llama().config).qkv
    assert not ModelInfo.from_config(tiny_gpt2().config).qkv
    assert ModelInfo.from_config(BertConfig(hidden_size=32, num_attention_heads=4)).qkv
    assert family_of(BertConfig()).name == "encoder"
    with pytest.raises(TypeError, match="rotary"):
        run_with_features(tiny_llama(), {"input_ids": torch.ones(1, 3, dtype=torch.long)}, hidden=False,
                          qkv_layers=[1])


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2], ids=["llama", "gpt2"])
def test_fresh_decoder_student_is_a_causal_lm_of_its_own_shape(make):
    from distill_sweep.students.fresh import build as build_fresh
    from distill_sweep.students.fresh import describe as describe_fresh
    from distill_sweep.students.fresh_settings import FreshSettings

    teacher = make()
    settings = FreshSettings(num_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=48)
    arch = describe_fresh(settings, teacher.config)
    student = build_fresh(settings, BuildInputs(arch=arch, teacher=teacher, init=resolve_init("random", 4, 2),
                                                num_labels=2, label_names=[]))
    assert type(student) is type(teacher) and len(family_of_model(student).layers(student)) == 2
    assert student.config.num_attention_heads == 2
    assert getattr(student.config, "num_key_value_heads", 2) == 2  # plain multi-head attention
    assert torch.equal(student.get_input_embeddings().weight, teacher.get_input_embeddings().weight)  # same width
    out = student(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert out.shape == (1, 3, 50)

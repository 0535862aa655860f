"""Student initialisation rules and student construction from teacher layers."""

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from distill_sweep.errors import ConfigError
from distill_sweep.models.inits import StudentInit, init_dirname, resolve_init
from distill_sweep.students import STUDENTS, BuildInputs


def build_student(teacher, init: StudentInit, num_layers: int):
    """`student=truncated` through the student registry, as the procedures build it."""
    kind = STUDENTS["truncated"]
    settings = kind.settings(num_layers=num_layers)
    inputs = BuildInputs(kind.describe(settings, teacher.config), teacher, init, teacher.config.num_labels, [])
    return kind.build(settings, inputs)


@pytest.mark.parametrize(
    "spec, expected_name, expected_layers",
    [
        (1, "skip", [4, 8, 12]),  # the paper's Table 3 order: 4,8,12 / 1,8,12 / 1,2,3
        (2, "mixed", [1, 8, 12]),
        (3, "bottom", [1, 2, 3]),
        ("2", "mixed", [1, 8, 12]),  # quoted on the command line
        ("skip", "skip", [4, 8, 12]),
        ("first", "bottom", [1, 2, 3]),
        ([1, 5, 9], "custom", [1, 5, 9]),
    ],
)
def test_paper_inits_for_roberta_base_and_3_layers(spec, expected_name, expected_layers):
    init = resolve_init(spec, teacher_layers=12, student_layers=3)
    assert init.name == expected_name
    assert init.layers == expected_layers
    assert init.layer_map == list(zip([1, 2, 3], expected_layers))


@pytest.mark.parametrize(
    "depth, k, skip, mixed",
    [
        (6, 3, [2, 4, 6], [1, 4, 6]),  # every 2nd layer ending at L
        (12, 6, [2, 4, 6, 8, 10, 12], [1, 4, 6, 8, 10, 12]),
        (12, 4, [3, 6, 9, 12], [1, 6, 9, 12]),
        (4, 4, [1, 2, 3, 4], [1, 2, 3, 4]),
        (12, 5, [2, 5, 7, 10, 12], [1, 5, 7, 10, 12]),  # L/k = 2.4: 2.4, 4.8, 7.2, 9.6, 12 rounded
    ],
)
def test_named_rules_generalise(depth, k, skip, mixed):
    assert resolve_init("skip", depth, k).layers == skip
    assert resolve_init("mixed", depth, k).layers == mixed
    assert resolve_init("bottom", depth, k).layers == list(range(1, k + 1))


def test_random_copies_no_layer_but_learns_from_skip_layers():
    init = resolve_init("random", 12, 3)
    assert init.layers == []
    assert init.layer_map == [(1, 4), (2, 8), (3, 12)]


@pytest.mark.parametrize(
    "spec, depth, k, message",
    [
        ([1, 2], 12, 3, "names 2 teacher layers but the student has 3"),
        ([0, 5, 9], 12, 3, "out of range"),
        ([1, 5, 13], 12, 3, "out of range"),
        ("sideways", 12, 3, "is not valid"),
        (4, 12, 3, "is not valid"),
        (1, 3, 6, "deeper than the teacher"),
    ],
)
def test_bad_init_is_a_config_error(spec, depth, k, message):
    with pytest.raises(ConfigError, match=message):
        resolve_init(spec, depth, k)


def test_init_dirname_is_filesystem_safe():
    assert init_dirname(1) == "init-1"
    assert init_dirname([1, 5, 9]) == "init-1-5-9"
    assert init_dirname("mixed") == "init-mixed"


def _tiny_bert(layers: int = 6) -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3)
    return BertForSequenceClassification(config).eval()


def _tiny_roberta(layers: int = 6) -> RobertaForSequenceClassification:
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=40, num_labels=2, pad_token_id=1)
    return RobertaForSequenceClassification(config).eval()


@pytest.mark.parametrize("make_teacher", [_tiny_bert, _tiny_roberta])
def test_student_copies_embeddings_and_chosen_layers_and_starts_a_fresh_head(make_teacher):
    teacher = make_teacher()
    init = resolve_init("mixed", 6, 3)  # teacher layers 1, 4, 6
    student = build_student(teacher, init, 3)
    assert student.config.num_hidden_layers == 3 and len(student.base_model.encoder.layer) == 3
    assert type(student) is type(teacher)
    t_base, s_base = teacher.base_model, student.base_model
    for s_layer, t_layer in zip(s_base.encoder.layer, [1, 4, 6]):
        t_state = t_base.encoder.layer[t_layer - 1].state_dict()
        for key, value in s_layer.state_dict().items():
            assert torch.equal(value, t_state[key]), key
    for key, value in s_base.embeddings.state_dict().items():
        assert torch.equal(value, t_base.embeddings.state_dict()[key]), key
    # The task head is fresh: it differs from the teacher's (fine-tuned) head.
    t_head = {k: v for k, v in teacher.state_dict().items() if not k.startswith(teacher.base_model_prefix)}
    s_head = {k: v for k, v in student.state_dict().items() if not k.startswith(student.base_model_prefix)}
    assert t_head.keys() == s_head.keys() and t_head
    assert any(not torch.equal(t_head[k], s_head[k]) for k in t_head if k.endswith("weight"))


@pytest.mark.parametrize("make_teacher", [_tiny_bert, _tiny_roberta])
def test_bottom_student_reproduces_the_teachers_lower_layers(make_teacher):
    """With layers 1..k copied, the student's hidden states ARE the teacher's first k (eval mode)."""
    teacher = make_teacher()
    student = build_student(teacher, resolve_init("bottom", 6, 3), 3).eval()
    ids = torch.tensor([[0, 5, 6, 7, 2, 1, 1], [0, 9, 8, 7, 6, 5, 2]])
    mask = (ids != 1).long()
    with torch.no_grad():
        t_hidden = teacher(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        s_hidden = student(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    assert len(s_hidden) == 4
    for i in range(4):
        torch.testing.assert_close(s_hidden[i], t_hidden[i], rtol=0, atol=1e-6)


def test_random_init_copies_only_the_embeddings():
    teacher = _tiny_bert()
    student = build_student(teacher, resolve_init("random", 6, 3), 3)
    assert torch.equal(student.bert.embeddings.word_embeddings.weight, teacher.bert.embeddings.word_embeddings.weight)
    for i, s_layer in enumerate(student.bert.encoder.layer):
        q = s_layer.attention.self.query.weight
        assert not any(torch.equal(q, t.attention.self.query.weight) for t in teacher.bert.encoder.layer), i


@pytest.mark.parametrize(("config", "message"), [
    (dict(hidden_size=30, num_attention_heads=4), "hidden_size=30 is not a multiple of its num_attention_heads=4"),
    (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=3),
     "num_attention_heads=4 is not a multiple of its num_key_value_heads=3"),
    (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2), None),  # 2 query heads per k/v head
    (dict(hidden_size=30, num_attention_heads=4, head_dim=8), None),  # the config sizes its heads itself
])
def test_heads_that_do_not_divide_are_refused(config: dict, message: str | None) -> None:
    from types import SimpleNamespace

    from distill_sweep.models.model_info import check_heads

    if message is None:
        check_heads({"student": SimpleNamespace(**config)}, "student")
        return
    with pytest.raises(ConfigError, match=message):
        check_heads({"student": SimpleNamespace(**config)}, "student")

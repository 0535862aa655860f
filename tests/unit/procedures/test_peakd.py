"""PEA-KD: the SPS student (shared and Q/K-swapped layers, capture per application, save/load) and the PTP
procedure (labels by hand, settings, a toy job that resumes mid-PTP)."""

from __future__ import annotations

import io
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import PEAKD_SHORT as SHORT
from helpers import compose_cfg
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.models.capture import run_with_features
from distill_sweep.models.inits import resolve_init
from distill_sweep.procedures.ptp import (
    PTP_CLASSES,
    ptp_head,
    ptp_labels,
    ptp_loss,
    teacher_ptp_labels,
)
from distill_sweep.procedures.ptp_settings import Thresholds
from distill_sweep.students import BuildInputs, student_type
from distill_sweep.students.sps_settings import SPSSettings

SPS = student_type("sps")


# ------------------------------------------------------------------------------------------ SPS
def tiny_teacher(layers: int = 6) -> BertForSequenceClassification:
    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=48, max_position_embeddings=40, num_labels=3,
                        initializer_range=0.3)  # large weights: each layer really moves the hidden states
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval()


def sps_student(teacher: BertForSequenceClassification, swap_qk: bool, k: int = 3, shared: int | None = None,
                seed: int = 1) -> BertForSequenceClassification:
    settings = SPSSettings(num_layers=k, shared_layers=shared, swap_qk=swap_qk)
    arch = SPS.describe(settings, teacher.config)
    init = resolve_init("bottom", teacher.config.num_hidden_layers, arch.num_hidden_layers)
    torch.manual_seed(seed)
    return SPS.build(settings, BuildInputs(arch, teacher, init, 3, [])).eval()


def batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 60, (2, 7), generator=torch.Generator().manual_seed(2))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}


def by_hand(model: BertForSequenceClassification, b: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Embeddings, then each encoder position applied in turn (no padding, so no mask to pass)."""
    h = [model.bert.embeddings(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"])]
    for layer in model.bert.encoder.layer:
        out = layer(h[-1])
        h.append(out[0] if isinstance(out, tuple) else out)
    return h


def test_sps1_applies_the_same_layers_again_with_the_parameters_of_k() -> None:
    teacher = tiny_teacher()
    student = sps_student(teacher, swap_qk=False)
    layers = student.bert.encoder.layer
    assert student.config.num_hidden_layers == len(layers) == 6
    assert all(layers[3 + i] is layers[i] for i in range(3))
    truncated = sum(p.numel() for n, p in teacher.named_parameters() if ".layer." not in n or
                    any(f".layer.{i}." in n for i in range(3)))
    assert sum(p.numel() for p in student.parameters()) == truncated  # a 3-layer student's parameter count
    for i in range(3):  # copied from teacher layers 1..3 (init=bottom), the paper's student
        torch.testing.assert_close(layers[i].output.dense.weight, teacher.bert.encoder.layer[i].output.dense.weight)


def test_sps_top_layers_only_for_a_deeper_student() -> None:
    """The paper's 6-layer student shares its top 3: positions [1..6, 4', 5', 6']."""
    student = sps_student(tiny_teacher(layers=12), swap_qk=False, k=6, shared=3)
    layers = student.bert.encoder.layer
    assert len(layers) == 9 and [layers[6 + i] is layers[3 + i] for i in range(3)] == [True] * 3
    assert len({id(m) for m in layers}) == 6


def test_sps2_upper_copy_holds_the_lower_tensors_with_query_and_key_swapped() -> None:
    student = sps_student(tiny_teacher(), swap_qk=True)
    layers = student.bert.encoder.layer
    for i in range(3):
        low, up = layers[i], layers[3 + i]
        assert up is not low
        la, ua = low.attention.self, up.attention.self
        for name in ("weight", "bias"):
            assert getattr(ua.query, name) is getattr(la.key, name)
            assert getattr(ua.key, name) is getattr(la.query, name)
            assert getattr(ua.value, name) is getattr(la.value, name)
        low_params = dict(low.named_parameters())
        swap = {"attention.self.query": "attention.self.key", "attention.self.key": "attention.self.query"}
        for name, p in up.named_parameters():
            module, _, leaf = name.rpartition(".")
            assert p is low_params[f"{swap.get(module, module)}.{leaf}"], name
        assert ua.config is student.config  # the attention implementation is read from the model's config
    assert len(list(student.parameters())) == len(list(sps_student(tiny_teacher(), swap_qk=False).parameters()))


@pytest.mark.parametrize("swap_qk", [False, True])
def test_capture_sees_each_application_of_a_shared_layer(swap_qk: bool) -> None:
    """q/k/v at every position are that position's own projections of its own input; SPS-2's upper query is
    the lower layer's key Linear applied to the upper input (and its key the lower query)."""
    student = sps_student(tiny_teacher(), swap_qk=swap_qk)
    b = batch()
    with torch.no_grad():
        f = run_with_features(student, b, hidden=True, qkv_layers=range(1, 7))
        h = by_hand(student, b)
        logits = student(**b).logits
    assert len(f.hidden_states) == 7
    for pos in range(7):
        torch.testing.assert_close(f.hidden_states[pos], h[pos])
    torch.testing.assert_close(f.logits, logits)
    for pos in range(1, 7):
        lower = student.bert.encoder.layer[(pos - 1) % 3].attention.self
        q, k = ("key", "query") if swap_qk and pos > 3 else ("query", "key")
        expect = [getattr(lower, q)(h[pos - 1]), getattr(lower, k)(h[pos - 1]), lower.value(h[pos - 1])]
        for got, want in zip(f.qkv[pos], expect, strict=True):
            torch.testing.assert_close(got, want)
    assert (f.qkv[1][0] - f.qkv[4][0]).abs().max() > 0.1  # same weights, other inputs: not the same tensors


def test_shuffling_changes_the_function_not_the_parameters() -> None:
    teacher = tiny_teacher()
    sps1, sps2 = sps_student(teacher, swap_qk=False), sps_student(teacher, swap_qk=True)
    assert all(torch.equal(a, b) for a, b in zip(sps1.parameters(), sps2.parameters(), strict=True))
    with torch.no_grad():
        assert (sps1(**batch()).logits - sps2(**batch()).logits).abs().max() > 1e-3


@pytest.mark.parametrize("swap_qk", [False, True])
def test_saved_and_reloaded_sps_student_is_the_same_function_with_the_same_sharing(swap_qk: bool) -> None:
    """The checkpoint path (torch.save of the state dict, load_state_dict into a freshly built student):
    each shared tensor is stored once and refilled in place, so the sharing survives."""
    teacher = tiny_teacher()
    trained = sps_student(teacher, swap_qk=swap_qk)
    with torch.no_grad():  # stand-in for training: every tensor moves away from what a fresh build has
        for p in trained.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    buffer = io.BytesIO()
    torch.save(trained.state_dict(), buffer)
    state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    up, low = "bert.encoder.layer.3.attention.self", "bert.encoder.layer.0.attention.self"
    q, k = ("key", "query") if swap_qk else ("query", "key")
    assert state[f"{up}.query.weight"].data_ptr() == state[f"{low}.{q}.weight"].data_ptr()  # stored once
    assert state[f"{up}.key.weight"].data_ptr() == state[f"{low}.{k}.weight"].data_ptr()

    fresh = sps_student(teacher, swap_qk=swap_qk, seed=7)
    fresh.load_state_dict(state)
    b = batch()
    with torch.no_grad():
        torch.testing.assert_close(fresh(**b).logits, trained(**b).logits, rtol=0, atol=0)
    layers = fresh.bert.encoder.layer
    assert layers[3].attention.self.query.weight is getattr(layers[0].attention.self, q).weight
    fresh.double()  # a dtype/device move keeps one tensor per parameter too
    assert layers[3].attention.self.query.weight is getattr(layers[0].attention.self, q).weight
    assert layers[3].attention.self.query.weight.dtype == torch.float64


@pytest.mark.parametrize("overrides, message", [
    (["student.shared_layers=4"], "student.shared_layers=4: must be 1..student.num_layers=3"),
    (["student.shared_layers=0"], "student.shared_layers=0: must be 1..student.num_layers=3"),
    (["student.num_layers=2", "student.shared_layers=3"], "student.shared_layers=3: must be 1..student.num_layers=2"),
    (["student.num_layers=5", "student.shared_layers=null"],
     "student=sps: 5 layers + 5 shared = 10 positions, more than the teacher's 6 layers"),
    (["student.swap_qk=maybe"], "student.swap_qk='maybe': expected true or false"),
])
def test_odd_sps_split_is_refused(overrides: list[str], message: str, tmp_path: Path) -> None:
    cfg = compose_cfg([*SHORT, "student=sps", *overrides, f"results_dir={tmp_path / 'r'}"])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------ PTP
def test_ptp_labels_by_hand() -> None:
    """2 classes, thresholds 0.8 (correct) and 0.6 (wrong). softmax([a, 0])[0] = 1 / (1 + e^-a):
    a=2 -> 0.8808, a=1 -> 0.7311, a=0.2 -> 0.5498."""
    logits = torch.tensor([[2.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.2, 0.0], [0.0, 1.0], [0.0, 2.0]])
    gold = torch.tensor([0, 0, 1, 1, 0, 1])
    # 0: right, 0.8808 > 0.8: confidently correct   1: right, 0.7311 <= 0.8: unconfidently correct
    # 2: wrong, 0.8808 > 0.6: confidently wrong     3: wrong, 0.5498 <= 0.6: unconfidently wrong
    # 4: predicts 1 with 0.7311 but gold 0: wrong, > 0.6: confidently wrong
    # 5: predicts 1 with 0.8808, gold 1: right, > 0.8: confidently correct
    assert ptp_labels(logits, gold, 0.8, 0.6).tolist() == [0, 1, 2, 3, 2, 0]
    # the same examples with thresholds 0.9 / 0.75: 0.8808 is now below the correct one, 0.7311 below the wrong one
    assert ptp_labels(logits, gold, 0.9, 0.75).tolist() == [1, 1, 2, 3, 3, 1]
    assert PTP_CLASSES[2] == "confidently_wrong"


def test_ptp_label_of_three_classes_and_the_strict_threshold() -> None:
    """softmax([0, 3, 1])[1] = e^3 / (1 + e^3 + e) = 20.0855 / 23.8038 = 0.8438; confident means ABOVE t."""
    logits, gold = torch.tensor([[0.0, 3.0, 1.0]]), torch.tensor([1])
    p = math.exp(3) / (1 + math.exp(3) + math.exp(1))
    assert p == pytest.approx(0.8438, abs=1e-4)
    assert ptp_labels(logits, gold, 0.84, 0.6).tolist() == [0]
    assert ptp_labels(logits, gold, 0.85, 0.6).tolist() == [1]
    conf = float(torch.softmax(logits, -1).max())  # exactly the confidence: not above it
    assert ptp_labels(logits, gold, conf, 0.6).tolist() == [1]
    assert ptp_labels(logits, torch.tensor([2]), 0.99, conf).tolist() == [3]


def test_ptp_head_has_the_task_heads_layout_with_four_fresh_outputs() -> None:
    task = torch.nn.Linear(32, 3)
    head = ptp_head(task, std=0.02)
    assert isinstance(head, torch.nn.Linear) and (head.in_features, head.out_features) == (32, 4)
    assert head.weight is not task.weight and not head.bias.any()
    roberta_like = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    head = ptp_head(roberta_like, std=0.02)
    assert head[2].out_features == 4 and head[0].weight is not roberta_like[0].weight


def test_ptp_loss_is_ce_of_the_ptp_head_on_the_task_heads_input_and_leaves_the_task_head_alone() -> None:
    student = tiny_teacher(layers=2)  # any BERT classifier; eval mode: no dropout to replay by hand
    head = ptp_head(student.classifier, std=0.3)
    table = torch.tensor([3, 1, -1, 0, 2])  # PTP label at each training idx
    b = {**batch(), "idx": torch.tensor([4, 0])}
    loss, _ = ptp_loss(student, head, table)(b)
    loss.backward()
    with torch.no_grad():
        pooled = student.bert(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"]).pooler_output
        z = pooled @ head.weight.T + head.bias  # (2, 4)
        expected = -(torch.log_softmax(z, -1)[0, 2] + torch.log_softmax(z, -1)[1, 3]) / 2
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-5)
    assert student.classifier.weight.grad is None and head.weight.grad is not None
    assert student.bert.pooler.dense.weight.grad is not None  # the body learns
    assert student(**batch()).logits.shape == (2, 3)  # the hook is gone: the task head answers again


def test_teacher_ptp_labels_are_filed_at_each_examples_idx() -> None:
    from datasets import Dataset

    teacher = tiny_teacher(layers=2)
    rows = batch()["input_ids"][:, :5].tolist() + [[5, 6, 7]]
    train = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows],
                               "labels": [0, 2, 1], "idx": [2, 0, 1]})
    ctx = SimpleNamespace(data=SimpleNamespace(train=train), tokenizer=SimpleNamespace(pad_token_id=0),
                          job=SimpleNamespace(settings=SimpleNamespace(run=SimpleNamespace(eval_batch_size=2))),
                          device=torch.device("cpu"), precision="fp32")
    table = teacher_ptp_labels(ctx, teacher, Thresholds(correct=0.6, wrong=0.76))
    with torch.no_grad():
        logits = torch.cat([teacher(input_ids=torch.tensor([r])).logits for r in rows])
    expected = ptp_labels(logits, torch.tensor([0, 2, 1]), 0.6, 0.76)
    assert len(set(expected.tolist())) == 3  # three different labels: a row filed at another idx would show
    assert table.tolist() == [expected[1].item(), expected[2].item(), expected[0].item()]


@pytest.mark.parametrize("overrides, message", [
    (["procedure.thresholds.toy.correct=1.0"], "procedure.thresholds.toy.correct=1.0: must be < 1.0"),
    (["procedure.thresholds.toy.wrong=0.5"], "procedure.thresholds.toy.wrong=0.5: must be > 0.5"),
    (["procedure.thresholds.toy.wrong=1.2"], "procedure.thresholds.toy.wrong=1.2: must be < 1.0"),
    (["~procedure.thresholds.toy"], "procedure.thresholds has no entry for task=toy (it has: cola, mrpc, qnli, "
                                    "rte, sst2); add e.g. +procedure.thresholds.toy={correct:0.95,wrong:0.7}"),
    (["procedure.epochs=0"], "procedure.epochs=0: must be >= 1"),
    (["task=stsb"], "procedure=ptp labels the teacher's predictions right or wrong: task=stsb is a regression task"),
])
def test_bad_ptp_settings_are_one_line_before_any_work(overrides: list[str], message: str) -> None:
    task = [] if any(o.startswith("task=") for o in overrides) else ["task=toy"]
    with pytest.raises(ConfigError) as err:
        identify(compose_cfg(["teacher=tiny", "procedure=ptp", *task, *overrides]))
    assert str(err.value) == message


def test_bench_has_an_sps2_student_row_that_leaves_the_objectives_target_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    from distill_sweep.bench import step

    tiny = ["--hidden", "32", "--heads", "2", "--teacher-layers", "2", "--student-layers", "1", "--vocab", "64",
            "--seq", "16", "--batch", "2", "--repeats", "2", "--default-malloc"]
    assert step.main(["--objectives", "vanilla_kd", "--sps", *tiny]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| vanilla_kd")}
    assert set(rows) == {"vanilla_kd", "vanilla_kd@sps2"}
    assert "| prediction, student sps2: 1 layers run twice |" in rows["vanilla_kd@sps2"]
    kd_ratio = float(rows["vanilla_kd"].split("|")[5])
    worst = next(line for line in lines if line.startswith("worst median step ratio"))
    assert worst.startswith(f"worst median step ratio: {kd_ratio:.3f}")


# ------------------------------------------------------------------------------------------ presets
@pytest.mark.parametrize("preset, jobs", [("peakd_table4", 96), ("peakd_table5", 64), ("peakd_demo", 36)])
def test_peakd_presets_expand_to_valid_jobs(preset: str, jobs: int, tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    from distill_sweep.config.space import CONF_DIR, VERSION_BASE
    from distill_sweep.sweep.compose import expand

    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=[f"experiment={preset}"], return_hydra_config=True)
    grid = expand([f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()])
    assert len(grid) == jobs
    peabert = [o for o in grid[-1] if not o.startswith(("task=", "seed="))]  # the grid's last system
    ident = identify(compose_cfg([f"experiment={preset}", *peabert, f"results_dir={tmp_path}"]))
    assert ident.objective_name == "pkd" and ident.student.swap_qk and ident.init_label == "init-bottom"


def test_table5_without_ptp_is_the_same_job_as_table4s_sps2_row(tmp_path: Path) -> None:
    common = ["task=rte", "seed=2", "objective=pkd", f"results_dir={tmp_path}"]
    four = identify(compose_cfg(["experiment=peakd_table4", "student=sps2", *common]))
    five = identify(compose_cfg(["experiment=peakd_table5", "procedure=task_specific", *common]))
    assert four.digest == five.digest

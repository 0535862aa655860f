"""Ensemble teachers (MT-DNN): members from `teacher.ensemble`, soft targets = the mean of the members'
probabilities (hand-worked), MT-DNN's loss, bad ensembles refused before any work, a toy job naming every member.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import FAST, compose_cfg, plain
from omegaconf import OmegaConf
from torch import nn

from distill_sweep.config.parse import parse
from distill_sweep.config.schema import TeacherSettings, ensemble_members
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.objectives.prediction import prediction_loss
from distill_sweep.records.record import TeacherInfo
from distill_sweep.teachers.finetuned import EnsembleTeacher, student_source

pytestmark = pytest.mark.usefixtures("one_thread")


class Fixed(nn.Module):
    """A member that predicts fixed logits whatever the input."""

    def __init__(self, logits: list[list[float]]) -> None:
        super().__init__()
        self.logits = torch.tensor(logits)

    def forward(self, **_: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.logits)


# Two members, one example, two classes: p1 = softmax([0, 0]) = [1/2, 1/2], p2 = softmax([ln 3, 0]) = [3/4, 1/4].
Z1, Z2 = [[0.0, 0.0]], [[math.log(3.0), 0.0]]
P_MEAN = [(0.5 + 0.75) / 2, (0.5 + 0.25) / 2]  # [5/8, 3/8]
# Distilled at T = 2: softmax(log p_mean / 2) = sqrt(p_mean) renormalised = [sqrt 5, sqrt 3] / (sqrt 5 + sqrt 3)
R3, R5 = math.sqrt(3.0), math.sqrt(5.0)
P_MEAN_T2 = [R5 / (R5 + R3), R3 / (R5 + R3)]


def ensemble() -> EnsembleTeacher:
    return EnsembleTeacher([Fixed(Z1), Fixed(Z2)], regression=False)


def test_soft_targets_are_the_mean_of_the_members_probabilities() -> None:
    logits = ensemble()().logits
    assert logits[0].tolist() == pytest.approx([math.log(5 / 8), math.log(3 / 8)], rel=1e-6)
    assert logits.softmax(-1)[0].tolist() == pytest.approx(P_MEAN, rel=1e-6)
    # at T the tempered mean, p_mean^(1/T) renormalised ...
    assert (logits / 2.0).softmax(-1)[0].tolist() == pytest.approx(P_MEAN_T2, rel=1e-6)
    # ... not the mean of the members' tempered probabilities: softmax([ln 3 / 2, 0]) = [sqrt 3, 1] / (sqrt 3 + 1)
    assert float((logits / 2.0).softmax(-1)[0, 0]) != pytest.approx((0.5 + R3 / (R3 + 1)) / 2, rel=1e-3)
    # regression: the members' mean prediction
    reg = EnsembleTeacher([Fixed([[1.0]]), Fixed([[3.0]])], regression=True)
    assert reg().logits.tolist() == [[2.0]]
    built = ensemble()
    assert student_source(built) is built.members[0] and student_source(built.members[1]) is built.members[1]


def test_mtdnn_loss_is_kd_at_alpha_half_and_t1() -> None:
    """MT-DNN: (CE(y, p_s) + CE(p_mean, p_s)) / 2. The KD form at alpha 1/2, T 1 on the ensemble's logits is the
    same loss less the constant H(p_mean) / 2: equal value up to it, equal gradient."""
    z_s = torch.tensor([[1.0, 0.0]], requires_grad=True)
    y = torch.tensor([0])
    p_s = [math.e / (math.e + 1), 1 / (math.e + 1)]
    ce_gold = -math.log(p_s[0])
    ce_soft = -sum(p * math.log(q) for p, q in zip(P_MEAN, p_s, strict=True))
    entropy = -sum(p * math.log(p) for p in P_MEAN)
    mtdnn = (ce_gold + ce_soft) / 2
    kd = prediction_loss(z_s, ensemble()().logits, y, alpha=0.5, temperature=1.0, regression=False)
    assert kd.item() == pytest.approx(mtdnn - entropy / 2, rel=1e-6)
    (grad,) = torch.autograd.grad(kd, z_s)
    # d/dz_s of MT-DNN's loss: ((p_s - onehot(y)) + (p_s - p_mean)) / 2
    want = [((p_s[0] - 1) + (p_s[0] - P_MEAN[0])) / 2, (p_s[1] + (p_s[1] - P_MEAN[1])) / 2]
    assert grad[0].tolist() == pytest.approx(want, rel=1e-6)


def test_kd_form_with_an_ensemble_at_t2() -> None:
    z_s = torch.tensor([[1.0, 0.0]])
    p_s2 = [math.exp(0.5) / (math.exp(0.5) + 1), 1 / (math.exp(0.5) + 1)]
    ce_gold = -math.log(math.e / (math.e + 1))
    kl_t = sum(p * math.log(p / q) for p, q in zip(P_MEAN_T2, p_s2, strict=True))
    got = prediction_loss(z_s, ensemble()().logits, torch.tensor([0]), alpha=0.5, temperature=2.0, regression=False)
    assert got.item() == pytest.approx(0.5 * ce_gold + 0.5 * 4 * kl_t, rel=1e-6)


def test_members_are_the_teacher_block_with_each_entry_merged_in() -> None:
    block = {"name": "tiny", "config": {"hidden_size": 64, "num_hidden_layers": 6}, "finetune": {"seed": 1, "epochs": 3},
             "ensemble": [2, {"name": "other", "config": {"num_hidden_layers": 4}, "finetune": {"seed": 5}}]}
    assert ensemble_members(block) == [
        {"name": "tiny", "config": {"hidden_size": 64, "num_hidden_layers": 6}, "finetune": {"seed": 2, "epochs": 3}},
        {"name": "other", "config": {"hidden_size": 64, "num_hidden_layers": 4}, "finetune": {"seed": 5, "epochs": 3}},
    ]
    assert block["finetune"]["seed"] == 1  # the teacher block itself is left as it was
    assert ensemble_members({k: v for k, v in block.items() if k != "ensemble"}) == []


@pytest.mark.parametrize("ensemble_value, message", [
    ([], "teacher.ensemble is empty"),
    ([1, True], "teacher.ensemble[1]=True: expected a fine-tuning seed (an integer) or a mapping"),
    (["two"], "teacher.ensemble[0]='two': expected a fine-tuning seed"),
    ([1, {"ensemble": [2]}], "teacher.ensemble[1].ensemble: a member is one teacher"),
    ([1, {"finetune": {"seeds": 2}}], "teacher.ensemble[1].finetune.seeds: unknown setting"),
    ([2, {"finetune": {"seed": 2}}], "teacher.ensemble[0] and teacher.ensemble[1] are the same teacher"),
])
def test_bad_ensemble_settings_are_one_line(ensemble_value: list, message: str) -> None:
    block = {"name": "tiny", "tokenizer": "toy", "config": {"hidden_size": 64}, "ensemble": ensemble_value}
    with pytest.raises(ConfigError) as err:
        parse(TeacherSettings, block, "teacher")
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def _write_classifier_config(path: Path, labels: list[str]) -> Path:
    """A given fine-tuned member: only its config.json is read before any work."""
    from transformers import BertConfig

    path.mkdir()
    BertConfig(hidden_size=64, num_hidden_layers=6, num_attention_heads=4, intermediate_size=128,
               max_position_embeddings=64, id2label=dict(enumerate(labels)),
               label2id={n: i for i, n in enumerate(labels)}).save_pretrained(path)
    return path


@pytest.mark.parametrize("case", ["two_labels", "label_order", "intermediate_terms", "first_member_arch",
                                  "tokenizer", "procedure_without_student"])
def test_an_unusable_ensemble_is_refused_before_any_work(case: str, tmp_path: Path) -> None:
    overrides = [*FAST, "teacher=tiny_ensemble", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"]
    member: dict | int = 2
    if case == "two_labels":
        member = {"finetuned_path": str(_write_classifier_config(tmp_path / "m", ["yes", "no"]))}
        message = r"teacher.ensemble\[1\].finetuned_path='.*' predicts 2 labels and the task has 3: ensemble members"
    elif case == "label_order":
        member = {"finetuned_path": str(_write_classifier_config(tmp_path / "m", ["negative", "mixed", "positive"]))}
        message = r"teacher.ensemble\[1\]: label order mismatch: .*; ensemble members share the task's label set"
    elif case == "intermediate_terms":
        overrides.append("objective=att_kl_hid_seq")
        message = r"objective=att_kl_hid_seq has intermediate-layer terms \(att_kl, hid_seq\): an ensemble teacher"
    elif case == "procedure_without_student":
        overrides.append("procedure=fastbert")
        message = r"procedure=fastbert trains the teacher itself: it takes one teacher, not teacher.ensemble"
    elif case == "tokenizer":
        (tmp_path / "tok").mkdir()
        member = {"tokenizer": str(tmp_path / "tok")}
        message = r"teacher.ensemble\[1\] uses the tokenizer '.*tok', the teacher 'toy': .* share the tokenizer"
    cfg = compose_cfg(overrides)
    entries = [1, member] if case != "first_member_arch" else [{"config": {"num_hidden_layers": 4}}, 1]
    if case == "first_member_arch":
        message = r"teacher.ensemble\[0\] must have the teacher's architecture: students are built from the first"
    cfg.teacher.ensemble = entries
    with pytest.raises(ConfigError, match=message) as err:
        prepare(cfg)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_members_share_the_single_teachers_cache_and_ids_follow_the_members(tmp_path: Path) -> None:
    cfg = compose_cfg([*FAST, "teacher=tiny_ensemble", f"cache_dir={tmp_path}"])
    single = compose_cfg([*FAST, "teacher=tiny", f"cache_dir={tmp_path}"])
    members = identify(cfg).members
    assert [m.settings.finetune.seed for m in members] == [1, 2, 3]
    one = identify(single)
    assert members[0].directory(tmp_path, "toy") == one.teacher.directory(tmp_path, "toy")  # one fine-tuning for both
    assert len({m.directory(tmp_path, "toy") for m in members}) == 3
    assert one.members == []
    info = TeacherInfo.from_settings(plain(cfg.teacher))
    assert info.members is not None and [m["seed"] for m in info.members] == [1, 2, 3]
    assert info.members[0]["id"] == TeacherInfo.from_settings(plain(single.teacher)).id
    two = OmegaConf.to_container(cfg.teacher, resolve=True)
    two["ensemble"] = two["ensemble"][:2]
    assert TeacherInfo.from_settings(two).id != info.id  # the teacher id changes with the members
    assert "members" not in TeacherInfo.from_settings(plain(single.teacher)).to_dict()  # one teacher: as before

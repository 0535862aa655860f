"""objective=uld: the sorted-probability Wasserstein-1 distance of ULD (Boizard et al. 2024) and its CE term, worked by
hand on small distributions over two vocabularies of different sizes, and the pairing of target positions."""

from __future__ import annotations

import math

import pytest
import torch

from distill_sweep.models.capture import Features
from distill_sweep.objectives.causal import IGNORE
from distill_sweep.objectives.inputs import LossInputs
from distill_sweep.objectives.uld import TEACHER_LABELS, ULD, StudentNLL, sorted_w1

P_T1, P_S1 = [0.7, 0.2, 0.1], [0.1, 0.5, 0.3, 0.1]
# sorted and the teacher's padded to 4: |0.7-0.5| + |0.2-0.3| + |0.1-0.1| + |0-0.1| = 0.2 + 0.1 + 0 + 0.1
W1_FIRST = 0.4
P_T2, P_S2 = [1 / 3, 1 / 3, 1 / 3], [0.25, 0.25, 0.25, 0.25]
W1_SECOND = 3 * (1 / 3 - 1 / 4) + 0.25  # = 0.5


def test_sorted_distance_pads_the_shorter_vocabulary_with_zeros():
    got = sorted_w1(torch.tensor([P_S1, P_S2]), torch.tensor([P_T1, P_T2]))
    assert got.tolist() == pytest.approx([W1_FIRST, W1_SECOND], abs=1e-6)
    # which token carries the mass does not matter, only the sorted masses
    assert float(sorted_w1(torch.tensor([P_S1[::-1]]), torch.tensor([P_T1[::-1]]))) == pytest.approx(W1_FIRST, abs=1e-6)
    assert float(sorted_w1(torch.tensor([P_S1]), torch.tensor([[0.5, 0.3, 0.1, 0.1]]))) == pytest.approx(0.0, abs=1e-6)


def _inputs(student_labels: list[int], teacher_labels: list[int]) -> LossInputs:
    s = torch.full((1, len(student_labels), 4), 0.0)  # uniform where not set
    t = torch.full((1, len(teacher_labels), 3), 0.0)
    s_pos = [i for i, v in enumerate(student_labels) if v != IGNORE]
    t_pos = [i for i, v in enumerate(teacher_labels) if v != IGNORE]
    s[0, s_pos[0]], t[0, t_pos[0]] = torch.tensor(P_S1).log(), torch.tensor(P_T1).log()
    s[0, s_pos[1]], t[0, t_pos[1]] = torch.tensor(P_S2).log(), torch.tensor(P_T2).log()
    s.requires_grad_(True)
    batch = {"labels": torch.tensor([student_labels]), TEACHER_LABELS: torch.tensor([teacher_labels]),
             "attention_mask": torch.ones(1, len(student_labels), dtype=torch.long)}
    return LossInputs(Features(logits=s, hidden_states=None), Features(logits=t, hidden_states=None), batch,
                      layer_map=())


def test_the_ith_target_of_each_side_is_paired_for_the_first_min_n():
    """Student targets at positions 1, 2 (and a third unpaired at 3), teacher targets at 2, 3: the student's first
    target meets the teacher's first, its second the teacher's second; the student's third has no partner."""
    x = _inputs([IGNORE, 1, 0, 2], [IGNORE, IGNORE, 0, 1, IGNORE])
    assert ULD(None)(x).item() == pytest.approx((W1_FIRST + W1_SECOND) / 2, abs=1e-6)
    # the student's own CE on all three of its targets: -log 0.5 (P_S1[1]), -log 0.25 (P_S2[0]), -log 0.25 (uniform)
    assert StudentNLL(None)(x).item() == pytest.approx((math.log(2) + 2 * math.log(4)) / 3, abs=1e-6)


def test_without_teacher_labels_the_same_positions_pair():
    x = _inputs([IGNORE, 1, 0, IGNORE], [IGNORE, 0, 1, IGNORE])
    del x.batch[TEACHER_LABELS]
    assert ULD(None)(x).item() == pytest.approx((W1_FIRST + W1_SECOND) / 2, abs=1e-6)


def test_the_distance_trains_the_student_towards_the_teachers_sorted_masses():
    x = _inputs([IGNORE, 1, 0, 2], [IGNORE, IGNORE, 0, 1, IGNORE])
    ULD(None)(x).backward()
    grad = x.student.logits.grad
    assert grad is not None and float(grad[0, 1].abs().sum()) > 0  # the first pair moves the student
    assert float(grad[0, 3].abs().sum()) == 0.0  # the unpaired target does not

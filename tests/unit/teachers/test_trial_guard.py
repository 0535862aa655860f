"""The teacher guard in a tuning trial (teachers/finetuned.py): the teacher's score and the majority baseline it is
set beside come from one split. A trial's only dev split is the holdout; its cached score is on the real dev."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import task_settings

from distill_sweep.data.holdout import HOLDOUT
from distill_sweep.errors import ConfigError
from distill_sweep.records.record import TeacherInfo
from distill_sweep.teachers import finetuned

# the toy task's numbers: the cached teacher scores 0.3281 on the real dev (21 of 64); the holdout's 32 labels
# hold 14 of its most frequent class, so predicting that class scores 14/32 = 0.4375 there
REAL_DEV = 21 / 64
HOLDOUT_LABELS = [0] * 14 + [1] * 10 + [2] * 8


def _ctx(holdout_score: float) -> SimpleNamespace:
    task = task_settings("toy")
    guards = SimpleNamespace(teacher_margin=0.01, allow_weak_teacher=False)
    job = SimpleNamespace(members=[], teacher=None, settings=SimpleNamespace(task=task, run=SimpleNamespace(
        guards=guards)))
    return SimpleNamespace(job=job, record=SimpleNamespace(teacher=TeacherInfo()),
                           data=SimpleNamespace(dev={HOLDOUT: {"labels": HOLDOUT_LABELS}}),
                           dev_loaders={HOLDOUT: "the holdout"}, metrics=None, device="cpu", precision="fp32",
                           holdout_score=holdout_score)


@pytest.fixture
def scored(monkeypatch: pytest.MonkeyPatch):
    """A cached teacher at REAL_DEV on the real dev, scored `ctx.holdout_score` wherever it is evaluated now."""
    monkeypatch.setattr(finetuned, "_one_teacher",
                        lambda ctx, spec: ("teacher", {"source": "cache", "path": "/c", "dev": {"accuracy": REAL_DEV}}))
    evaluated = []

    def evaluate(model, loaders, *args):
        evaluated.append(list(loaders))
        return {"accuracy": current["ctx"].holdout_score}

    current: dict = {}
    monkeypatch.setattr(finetuned, "evaluate", evaluate)
    return current, evaluated


def test_a_trial_scores_the_teacher_on_the_holdout_it_sets_the_baseline_of(scored) -> None:
    """Its real-dev 0.3281 is below the holdout's baseline 0.4375 (every trial refused before); on the holdout it
    scores 0.75, clearly above: accepted, and the record keeps the real-dev score it was cached with."""
    current, evaluated = scored
    current["ctx"] = ctx = _ctx(holdout_score=0.75)
    assert finetuned.fine_tuned_teacher(ctx, guard=True) == "teacher"
    assert evaluated == [[HOLDOUT]]
    assert ctx.record.teacher.majority_baseline["accuracy"] == pytest.approx(14 / 32)
    assert ctx.record.teacher.dev["accuracy"] == pytest.approx(REAL_DEV)


def test_a_trial_still_refuses_a_teacher_at_the_holdouts_baseline(scored) -> None:
    current, _ = scored
    current["ctx"] = ctx = _ctx(holdout_score=14 / 32)
    with pytest.raises(ConfigError, match=r"the teacher's holdout accuracy is 0\.4375, not clearly better than the "
                                          r"majority-class baseline \(holdout\) 0\.4375"):
        finetuned.fine_tuned_teacher(ctx, guard=True)

"""Metrics against values worked out by hand."""

import math

import numpy as np
import pytest
from helpers import ROOT, task_settings

from distill_sweep.errors import ConfigError
from distill_sweep.training.metrics import compute_metrics, majority_baseline, primary

TASKS = ROOT / "conf" / "task"


def task(name, **keys):
    return task_settings(name, **keys)


def onehot(preds, n=2):
    return np.eye(n)[preds]


def test_binary_confusion_matrix_by_hand():
    # labels: 4 positives, 6 negatives. preds: TP=3 FN=1 FP=1 TN=5.
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    preds = np.array([1, 1, 1, 0, 1, 0, 0, 0, 0, 0])
    # accuracy 8/10; precision 3/4, recall 3/4 -> F1 0.75;
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (15 - 1) / sqrt(4*4*6*6) = 14/24.
    m = compute_metrics(task("mrpc"), onehot(preds), labels)
    assert m == pytest.approx({"accuracy": 0.8, "f1": 0.75})
    m = compute_metrics(task("cola"), onehot(preds), labels)
    assert m == pytest.approx({"accuracy": 0.8, "mcc": 14 / 24})
    assert set(compute_metrics(task("rte"), onehot(preds), labels)) == {"accuracy"}


def test_multiclass_uses_argmax_of_logits():
    logits = np.array([[2.0, 0.1, -1.0], [0.0, 0.5, 0.4], [-3.0, -2.0, -1.0], [1.0, 0.0, 3.0]])
    labels = np.array([0, 1, 2, 1])  # argmax = 0, 1, 2, 2 -> 3/4 right
    assert compute_metrics(task("mnli"), logits, labels) == {"accuracy": 0.75}


def test_regression_pearson_spearman_by_hand():
    # preds 1,2,3 vs labels 1,2,4: deviations (-1,0,1) and (-4/3,-1/3,5/3);
    # r = 3 / sqrt(2 * 14/3). Ranks agree exactly -> spearman 1.
    m = compute_metrics(task("stsb"), np.array([[1.0], [2.0], [3.0]]), np.array([1.0, 2.0, 4.0]))
    assert m["pearson"] == pytest.approx(3 / math.sqrt(28 / 3))
    assert m["spearman"] == pytest.approx(1.0)
    # 1-D predictions are accepted too; constant predictions give 0 instead of nan.
    assert compute_metrics(task("stsb"), np.array([2.0, 2.0, 2.0]), np.array([1.0, 2.0, 4.0])) == {
        "pearson": 0.0,
        "spearman": 0.0,
    }


def test_majority_baseline():
    # dev majority is 1: dev [1,0,0,1,1] -> acc 3/5; P = 3/5, R = 1 -> F1 = 0.75
    m = majority_baseline(task("mrpc"), [1, 0, 0, 1, 1])
    assert m == pytest.approx({"accuracy": 0.6, "f1": 0.75})
    # constant prediction has MCC 0 by definition
    assert majority_baseline(task("cola"), [0, 1, 1])["mcc"] == 0.0
    # ties go to the lowest id
    assert majority_baseline(task("rte"), [0, 1, 0, 1]) == pytest.approx({"accuracy": 1 / 2})
    # regression: predict the dev mean -> correlations 0
    assert majority_baseline(task("stsb"), [0.5, 4.0]) == {"pearson": 0.0, "spearman": 0.0}


def test_the_majority_baseline_is_the_dev_splits_own_majority():
    """The job printed the training split's majority class scored on dev (0.46) as the baseline, where dev's own
    majority class scores 0.54 (27/50): a student at 0.54 then looked 8 points above it."""
    dev = [0] * 27 + [1] * 23
    assert majority_baseline(task("rte"), dev)["accuracy"] == pytest.approx(27 / 50)


def test_primary():
    m = {"accuracy": 0.8, "mcc": 0.58}
    assert primary(task("cola"), m) == 0.58
    assert primary(task("rte"), m) == 0.8
    with pytest.raises(KeyError):
        primary(task("stsb"), m)


def test_unknown_metric_is_a_config_error():
    with pytest.raises(ConfigError, match="bleu"):  # refused where the task is parsed
        compute_metrics(task("rte", metrics=["accuracy", "bleu"]), onehot(np.array([0, 1])), np.array([0, 1]))


def test_the_jobs_done_line_says_when_the_best_score_is_at_the_dev_baseline(caplog: pytest.LogCaptureFixture):
    """A student whose best dev accuracy 0.54 is dev's own majority class (27/50) was shown beside a 0.46 baseline
    and nothing else; the job now says it learned nothing beyond predicting one class."""
    import logging

    from distill_sweep.cli import run_job
    from distill_sweep.records.blocks import TuneTrial
    from distill_sweep.records.record import Record, TeacherInfo

    def record(best: float) -> Record:
        return Record(task="rte", objective="vanilla_kd", seed=1, best={"dev": {"accuracy": best}},
                      teacher=TeacherInfo(majority_baseline={"accuracy": 0.54}))

    with caplog.at_level(logging.WARNING):
        run_job._at_baseline_line(record(0.54), "accuracy")
        run_job._at_baseline_line(record(0.62), "accuracy")  # clearly above
    (line,) = [r.getMessage() for r in caplog.records]
    assert "best accuracy 0.5400 is at or below the dev split's majority-class baseline 0.5400" in line
    caplog.clear()
    trial = record(0.54)
    trial.tune_trial = TuneTrial(number=0, holdout=0.25, seed=0, holdout_size=64)  # a tuning trial scores its holdout
    with caplog.at_level(logging.WARNING):
        run_job._at_baseline_line(trial, "accuracy")
    (line,) = [r.getMessage() for r in caplog.records]
    assert "is at or below the tuning holdout's majority-class baseline 0.5400" in line

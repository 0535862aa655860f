"""What the report's numbers mean, in words: the statistics used and the sources of variability each interval
covers. Printed at the top of the Markdown report and in the HTML page's header, from one place."""

from __future__ import annotations

from distill_sweep.analysis.aso import ASO_THRESHOLD
from distill_sweep.analysis.stats import CI_TEXT, CONFIDENCE, POWER

# run.seed (config/schema.py) drives these; the teacher has its own teacher.finetune.seed, the pilot subsets
# task.subset_seed, so neither moves with the training seed
SEED_CHANGES = ("the student's newly initialised weights (its head, and any layer not copied from the teacher), "
                "the order of the training batches and the dropout masks (each can have its own seed, the config's "
                "`seeds` block; every record states the four it used, and where a grid varies more than one the "
                "variance-components table separates them)")
FIXED = ("the teacher of each task (fine-tuned once with its own seed and cached), the dev set, the pilot "
         "subsets of task.max_train_samples / max_dev_samples (task.subset_seed) and the toy data")


def statistics_text(ci: str, alpha: float) -> str:
    """The statistics, one paragraph: the cells' interval (`ci`, stats.CI_METHODS) and the pairs' tests."""
    level = f"{100 * (1 - alpha):g}%"
    return (f"Cells: mean±std over master seeds (n; the runs of one master seed that vary another source's seed are averaged first); their {CONFIDENCE:.0%} CI is the {CI_TEXT[ci]} (ci={ci}), in the "
            "CSV and on hover. Pairs: paired t-test on (task, seed) matches with Holm's correction per table "
            f"(statsmodels), the {level} t-interval of the mean difference that the t-test inverts (it excludes 0 "
            f"exactly when p < {alpha}), Cohen's d_z, almost stochastic order (ASO eps_min; a verdict only below "
            f"the threshold calibrated under the null at the pair's seeds, Bonferroni per table, never above "
            f"{ASO_THRESHOLD}: none at 2 or 3 seeds; and only beside a pair the t-test calls, in its direction) and "
            f"the seeds a paired t-test would need for {POWER:.0%} power, as a range over the interval of d. One "
            "verdict per pair: significant after Holm and, where runs keep dev predictions, carried by the "
            "multi-bootstrap over seeds and dev examples; Table 3's interaction by the same rule; a claim not called "
            "prints its interval and the effect it could have detected, never an absence. Bold = best only where "
            "significantly better than the runner-up after Holm. Verdicts are withheld where the seeds cannot "
            "carry them (docs/guide/report.md).")


def variability_text() -> str:
    """Which sources of variability the intervals cover (NeurIPS checklist item 7, ACL ARR C3)."""
    return (f"Sources of variability: a seed changes {SEED_CHANGES}; fixed across seeds: {FIXED}. So a cell's "
            "CI and the seed-level tests cover the spread over training seeds for this teacher and this dev set, "
            "not over teachers nor over the sampling of dev examples; the multi-bootstrap comparisons (where "
            "records carry dev predictions) resample seeds and dev examples together.")

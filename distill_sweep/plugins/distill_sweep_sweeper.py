"""Registers the skip-completed sweeper with Hydra (imported as `hydra_plugins.distill_sweep_sweeper`)."""

from distill_sweep.sweep.sweeper import SkipCompletedSweeperImpl


class SkipCompletedSweeper(SkipCompletedSweeperImpl):
    """See distill_sweep.sweep.sweeper.SkipCompletedSweeperImpl."""

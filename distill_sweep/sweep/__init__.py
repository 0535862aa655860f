"""Sweeps (orchestration): the skip-completed sweeper, job composition, the dry run's cost, launching, chains."""

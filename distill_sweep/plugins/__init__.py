"""Hydra plugins shipped with distill_sweep.

Hydra only instantiates plugins that live in the `hydra_plugins` namespace package. Rather than add a
top-level `hydra_plugins/` directory to the repository, `distill_sweep.cli.run_job` appends this directory to
that namespace's search path, so the modules here are imported as `hydra_plugins.<module>`.
"""

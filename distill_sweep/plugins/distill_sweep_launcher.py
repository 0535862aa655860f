"""Registers the in-process launcher with Hydra (imported as `hydra_plugins.distill_sweep_launcher`)."""

from distill_sweep.sweep.launch import InProcessLauncherImpl


class InProcessLauncher(InProcessLauncherImpl):
    """See distill_sweep.sweep.launch.InProcessLauncherImpl."""

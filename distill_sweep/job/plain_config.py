"""The composed config (Hydra's DictConfig) as plain containers: what the typed checks read.

The entry and the orchestration hold the composed config; `plain_config` is where it stops being one, so that
everything below receives plain values and then typed settings (job.identify). Imports nothing heavy: the
entry checks a command line's settings with it before torch is loaded.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf


def plain_config(cfg: DictConfig) -> dict[str, Any]:
    """The composed config as plain, resolved containers, without Hydra's own node (whose values exist only
    inside a running job: the sweeper identifies jobs before launching them)."""
    return {str(k): OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
            for k in cfg if k != "hydra"}


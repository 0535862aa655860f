"""Shared test helpers: offline environment, composed configs, a small and fast toy setting."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from distill_sweep.config_space import CONF_DIR

ROOT = Path(__file__).resolve().parent.parent

# Offline and quiet everywhere: no hub, wandb off unless a test turns it on.
os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled",
                  WANDB_SILENT="true", HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false")

# The toy task shrunk for tests: a few hundred examples, short teacher fine-tuning, one epoch per stage.
FAST = [
    "task=toy",
    "teacher=tiny",
    "logger=none",
    "threads=1",  # tiny models; and test processes run side by side on 2 cores
    "task.recipe.num_train=256",
    "task.recipe.num_dev=128",
    "teacher.finetune.epochs=3",
    "epochs=1",
    "optimizer.batch_size=32",
    "guards.allow_weak_teacher=true",
]


def compose_cfg(overrides: Sequence[str] = ()) -> DictConfig:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    OmegaConf.set_struct(cfg, False)
    return cfg


def plain(node: Any) -> Any:
    """A config node as the plain containers `job.plain_config` hands the parts."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def run_cli(args: Sequence[str], cwd: Path, timeout: int = 600, env: dict[str, str] | None = None,
            module: str = "distill_sweep") -> subprocess.CompletedProcess:
    """`python -m distill_sweep ARGS` (or another module) in a subprocess (the way users run it)."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def records(results_dir: Path) -> list[dict]:
    import json

    return [json.loads(p.read_text()) for p in sorted(Path(results_dir).rglob("result.json"))]


def save_toy_student(directory: Path, cache: Path, *, layers: int, ffn: int) -> Path:
    """A saved BERT classifier of the toy tokenizer's vocabulary (hidden 32, 4 heads): a stand-in for a
    pre-distilled student given as student=pretrained."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from distill_sweep.toy import build_toy_tokenizer

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(build_toy_tokenizer(cache)), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=ffn, max_position_embeddings=64)
    BertForSequenceClassification(config).save_pretrained(directory)
    return directory


def save_toy_mlm(directory: Path, cache: Path) -> Path:
    """A saved BertForMaskedLM of the toy tokenizer's vocabulary, with the tokenizer (random weights: its
    predictions are arbitrary words, which is all the augmenter's mechanics need)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from distill_sweep.toy import build_toy_tokenizer

    torch.manual_seed(0)
    tokenizer = build_toy_tokenizer(cache)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory

"""The step benchmarks' workload: random-init BERT teacher and student, random padded batches, the
objectives' settings composed as a training job composes them, and the options the benchmarks share."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from torch import Tensor, nn
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.objectives import ObjectiveSettings, parse_objective
from distill_sweep.students.bilstm import BiLSTMClassifier, describe
from distill_sweep.students.bilstm_settings import BiLSTMSettings
from distill_sweep.students.sps import share_top_layers


def objective_conf_dir() -> Path:
    """conf/objective, the objectives' YAML files."""
    return Path(CONF_DIR) / "objective"


def load_objective_cfg(name: str, conf_dir: Path) -> ObjectiveSettings:
    """The checked settings of conf/objective/<name>.yaml, composed as the training job composes it."""
    path = conf_dir / f"{name}.yaml"
    if not path.is_file() or name == "base":
        raise SystemExit(f"unknown objective {name!r}: no {path}")
    with initialize_config_dir(config_dir=str(conf_dir.parent), **VERSION_BASE):
        cfg = compose("config", overrides=[f"objective={name}"])
    return parse_objective(OmegaConf.to_container(cfg.objective, resolve=True))


def model_arguments(p: argparse.ArgumentParser, *, batch: int, repeats: int, threads: int) -> None:
    """The options the step benchmarks share: models, batch, device, precision, repeats, threads."""
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--repeats", type=int, default=repeats, help="paired measurements per objective (median)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast for the forwards")
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--teacher-layers", type=int, default=6)
    p.add_argument("--student-layers", type=int, default=3)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--threads", type=int, default=threads, help="torch threads (0 = torch default)")


def make_models(args: argparse.Namespace) -> tuple[nn.Module, nn.Module]:
    common = dict(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq),
        num_labels=2,
    )
    teacher = BertForSequenceClassification(BertConfig(num_hidden_layers=args.teacher_layers, **common))
    student = BertForSequenceClassification(BertConfig(num_hidden_layers=args.student_layers, **common))
    return teacher.to(args.device).eval(), student.to(args.device).train()


def make_sps_student(student: nn.Module, k: int) -> nn.Module:
    """A student of `student`'s config whose k layers run again on top, Q/K swapped (student=sps2)."""
    config = copy.deepcopy(student.config)
    config.num_hidden_layers = 2 * k
    sps = type(student)(config)
    share_top_layers(sps, k, k, swap_qk=True)
    return sps


def make_bilstm_student(args: argparse.Namespace) -> nn.Module:
    """student=bilstm at its default sizes (300-d embeddings, 300 per direction, ReLU 400) over a word
    vocabulary of --vocab words, one sentence per row."""
    return BiLSTMClassifier(describe(BiLSTMSettings(), None), args.vocab, 2, 1)  # type: ignore[arg-type]


def make_batches(args: argparse.Namespace, n: int, n_train: int) -> list[dict[str, Tensor]]:
    g = torch.Generator().manual_seed(0)
    batches = []
    for i in range(n):
        ids = torch.randint(5, args.vocab, (args.batch, args.seq), generator=g)
        # Realistic padding: lengths in [seq/2, seq], the longest row sets the width.
        lengths = torch.randint(args.seq // 2, args.seq + 1, (args.batch,), generator=g)
        lengths[0] = args.seq
        mask = (torch.arange(args.seq)[None, :] < lengths[:, None]).long()
        ids = ids * mask
        batch = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": torch.zeros_like(ids),
            "labels": torch.randint(0, 2, (args.batch,), generator=g),
            "idx": torch.arange(i * args.batch, (i + 1) * args.batch) % n_train,
            # the BiLSTM's own word ids (--bilstm), one word per word piece: the BERT models never read them
            "student_ids_0": torch.randint(2, args.vocab, (args.batch, args.seq), generator=g) * mask,
        }
        batches.append({k: v.to(args.device) for k, v in batch.items()})
    return batches

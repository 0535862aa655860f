"""`procedure.embeddings_pair` (task_agnostic): whether hid_seq / hid_cls also pair the embedding outputs.

The paper's task-agnostic reference code compares the last layers only; earlier jobs (and every task-specific
job) add the pair (0, 0). The loss values below are worked by hand from L = sum over pairs of MSE.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from helpers import compose_cfg

from distill_sweep.job.identity import identify
from distill_sweep.models.capture import Features
from distill_sweep.objectives.config import parse_objective
from distill_sweep.procedures.task_agnostic import loss_parts
from distill_sweep.procedures.task_agnostic_settings import KDSettings

BASE = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1"]


def arch(layers: int) -> SimpleNamespace:
    return SimpleNamespace(hidden_size=2, num_attention_heads=1, num_hidden_layers=layers)


def features(hidden: list[list[list[float]]]) -> Features:
    states = tuple(torch.tensor([h]) for h in hidden)  # one example, S = 2 tokens, D = 2
    return Features(logits=torch.zeros(1, 2), hidden_states=states, qkv={}, num_heads=1, head_dim=2, scaling=1.0)


# student: embeddings, layer 1; teacher: embeddings, layers 1, 2; map top = [(1, 2)]
STUDENT = features([[[1.0, 2.0], [0.0, 1.0]], [[2.0, 2.0], [1.0, 0.0]]])
TEACHER = features([[[1.0, 0.0], [2.0, 1.0]], [[5.0, 5.0], [5.0, 5.0]], [[2.0, 1.0], [1.0, 3.0]]])
BATCH = {"input_ids": torch.zeros(1, 2, dtype=torch.long), "attention_mask": torch.ones(1, 2, dtype=torch.long)}
# Hid-Seq, mean over 2 tokens x 2 dims:
#   embeddings: (1-1)^2 + (2-0)^2 + (0-2)^2 + (1-1)^2 = 8   -> 8 / 4 = 2.0
#   (1, 2):     (2-2)^2 + (2-1)^2 + (1-1)^2 + (0-3)^2 = 10  -> 10 / 4 = 2.5
# Hid-CLS, the first token only, mean over 2 dims:
#   embeddings: [1, 2] vs [1, 0] -> 4 / 2 = 2.0;  (1, 2): [2, 2] vs [2, 1] -> 1 / 2 = 0.5
EXPECTED = {("hid_seq", True): 2.0 + 2.5, ("hid_seq", False): 2.5,
            ("hid_cls", True): 2.0 + 0.5, ("hid_cls", False): 0.5}


@pytest.mark.parametrize("term", ["hid_seq", "hid_cls"])
@pytest.mark.parametrize("pair", [True, False])
def test_the_setting_adds_or_drops_exactly_the_embeddings_mse(term: str, pair: bool) -> None:
    objective = parse_objective({"name": term, "stages": ["intermediate"],
                                 "terms": {term: {"weight": 1.0, "projection": "none"}}})
    terms, kd = loss_parts(objective, KDSettings(), arch(1), arch(2), [(1, 2)], embeddings_pair=pair)
    assert kd is None and terms is not None
    total, parts = terms(STUDENT, TEACHER, BATCH)
    assert total.item() == pytest.approx(EXPECTED[term, pair], abs=1e-6)
    assert parts[term] == pytest.approx(EXPECTED[term, pair], abs=1e-6)


def test_one_w_h_per_pair_that_is_compared() -> None:
    # W_h (projection: linear) is one per pair: the embeddings pair brings its own, so without it one is left
    objective = parse_objective({"name": "hid_seq", "stages": ["intermediate"], "terms": {"hid_seq": {"weight": 1.0}}})
    with_pair, _ = loss_parts(objective, KDSettings(), arch(1), arch(2), [(1, 2)])
    without, _ = loss_parts(objective, KDSettings(), arch(1), arch(2), [(1, 2)], embeddings_pair=False)
    assert len(with_pair.terms["hid_seq"].proj.maps) == 2
    assert len(without.terms["hid_seq"].proj.maps) == 1
    # identity-initialised at equal widths: the same values as projection: none
    assert without(STUDENT, TEACHER, BATCH)[0].item() == pytest.approx(2.5, abs=1e-6)


@pytest.mark.parametrize("preset", ["paper_table2", "paper_table4", "paper_table2_toy", "paper_table4_toy"])
def test_the_paper_presets_compare_the_last_layers_only(preset: str) -> None:
    ident = identify(compose_cfg([f"experiment={preset}", "objective=hid_seq"]))
    assert ident.procedure_settings.embeddings_pair is False


def test_the_default_keeps_earlier_hashes_and_the_setting_makes_another_job_only_where_it_is_read() -> None:
    def digest(*over: str) -> str:
        return identify(compose_cfg([*BASE, *over])).digest

    for objective in ("hid_seq", "hid_cls", "att_kl_hid_seq"):  # terms that pair the embeddings
        default = digest(f"objective={objective}")
        assert digest(f"objective={objective}", "procedure.embeddings_pair=true") == default
        assert digest(f"objective={objective}", "procedure.embeddings_pair=false") != default
    for objective in ("att_mse", "vanilla_kd", "att_kl_val_kl"):  # nothing reads it: the same job
        assert (digest(f"objective={objective}", "procedure.embeddings_pair=false")
                == digest(f"objective={objective}"))

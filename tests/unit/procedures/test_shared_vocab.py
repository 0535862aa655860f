"""procedure.vocab=shared_prefix (a student vocabulary that shares ids 0..n-1 with the teacher's), and the decoder
refusals of item 3: student.tokenizer under an encoder procedure, and objectives whose logit KD a decoder job
would drop."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers import FRESH_STUDENT as STUDENT
from helpers import FRESH_STUDENT_FAST as FAST
from helpers import WIDE_VOCAB as WIDE
from helpers import compose_cfg
from tiny_models import tiny_llama

from distill_sweep.data.decoder import CausalData, Sequences, from_instructions, special_tokens
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.models.capture import Features
from distill_sweep.models.generation import generate_responses
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer, vocabulary
from distill_sweep.models.vocabularies import Vocabulary, shared_prefix, vocabulary_of, wide_vocabulary
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.core import build_objective
from distill_sweep.objectives.shared_ids import SharedIds
from distill_sweep.procedures.causal_lm_checks import check_shared_data
from distill_sweep.teachers.decoder import greedy_responses, lm_evaluator


def test_toy_wide_extends_the_toy_vocabulary():
    words = wide_vocabulary()
    assert words[:len(vocabulary())] == vocabulary() and len(words) == 128
    assert shared_prefix(vocabulary_of("toy", "t"), vocabulary_of("toy_wide", "s")) == 68
    assert shared_prefix(vocabulary_of("toy_wide", "t"), vocabulary_of("toy", "s")) == 68  # either side larger


def test_shared_ids_must_decode_identically():
    a = Vocabulary("a", {"[PAD]": 0, "x": 1, "y": 2})
    with pytest.raises(ConfigError, match=r"id 2 is 'y' in the teacher's and 'z' in the student's") as err:
        shared_prefix(a, Vocabulary("b", {"[PAD]": 0, "x": 1, "z": 2, "w": 3}))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"id 1 is 'x' in the teacher's and None"):  # an id the student lacks
        shared_prefix(a, Vocabulary("b", {"[PAD]": 0, "y": 2, "x": 5}))


@pytest.mark.parametrize("overrides,message", [
    # toy and toy_pieces share only their 5 special tokens
    (["objective=fkl", "student.tokenizer=toy_pieces", "procedure.vocab=shared_prefix"],
     r"procedure.vocab=shared_prefix distils over the ids 0..67 that the teacher's tokenizer toy \(68 tokens\) and "
     r"the student's toy_pieces \(107 tokens\) share, but id 5 is ',' in the teacher's and '##ad' in the student's"),
    (["objective=fkl", "procedure.vocab=shared_prefix"], "but the student has the teacher's"),
    (["objective=fkl", "student.tokenizer=toy", "procedure.vocab=shared_prefix"], "but the student has the teacher's"),
    (["objective=fkl", *WIDE, "procedure.teacher_top_k=4"], "procedure.teacher_top_k stores the teacher's top ids"),
    (["objective=fkl", *WIDE, "procedure.on_policy=0.5"], "generated responses of procedure.on_policy / seq_kd"),
    # without shared_prefix two vocabularies are refused for fkl, as before
    (["objective=fkl", "student.tokenizer=toy_wide"], r"toy_wide \(128 tokens\): use objective=uld"),
])
def test_refused_in_one_line_before_any_work(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*FAST, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message) as err:
        prepare(cfg)
    assert "\n" not in str(err.value) and not (tmp_path / "r").exists()


@pytest.mark.parametrize("objective,message", [
    ("distilbert", r"objective=distilbert has a combined stage that adds alpha=0.714286 x KD on a classifier's "
                   r"logits \(T=2\), which procedure=causal_lm does not run: its one stage sums the objective's "
                   r"terms \(hid_cos\) and its next-token KD is the fkl term"),
    ("hid_seq", r"objective=hid_seq has a prediction stage KD on a classifier's logits \(T=2\)"),
])
def test_a_logit_kd_stage_a_decoder_job_would_drop_is_refused(objective, message, tmp_path: Path):
    cfg = compose_cfg(["logger=none", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=2",
                       f"objective={objective}", f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"])
    with pytest.raises(ConfigError, match=message) as err:
        prepare(cfg)
    assert "\n" not in str(err.value) and not (tmp_path / "r").exists()


@pytest.mark.parametrize("procedure", [["procedure=task_specific"], ["procedure=finetune"],
                                       ["procedure=task_agnostic", "teacher=tiny_mlm", "optimizer.batch_size=null"]])
def test_a_student_tokenizer_is_refused_for_encoder_procedures(procedure, tmp_path: Path):
    cfg = compose_cfg(["logger=none", "teacher=tiny", "task=toy", *STUDENT, "student.tokenizer=toy_pieces",
                       *procedure, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"])
    with pytest.raises(ConfigError, match=r"student.tokenizer=toy_pieces gives a decoder LM's student its own "
                                          r"vocabulary \(procedure=causal_lm\); procedure=\w+ feeds the student"):
        identify(cfg)  # the command line's check, before torch


def test_accepted_pairs_and_the_default_leaves_the_hash(tmp_path: Path):
    common = [*FAST, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]
    assert prepare(compose_cfg([*common, "objective=fkl", *WIDE]))
    truncated = ["logger=none", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=2",
                 f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]
    assert prepare(compose_cfg([*truncated, "objective=hid_seq", "objective.stages=[intermediate]"]))
    plain = identify(compose_cfg([*common, "objective=fkl"]))
    assert identify(compose_cfg([*common, "objective=fkl", "procedure.vocab=full"])).digest == plain.digest
    assert identify(compose_cfg([*common, "objective=fkl", *WIDE])).digest != plain.digest


def test_the_terms_compare_the_shared_ids_only():
    """Forward KL over the first 3 ids of a teacher with 3 and a student with 5 logits, worked by hand: each side's
    softmax over ids 0..2 only (the student's ids 3 and 4 take no part)."""
    objective = parse_objective({"name": "fkl", "stages": ["intermediate"], "terms": {"fkl": 1.0}})
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=5, hidden_size=8, num_hidden_layers=1, num_attention_heads=2)
    terms = build_objective(objective, student_config=config, teacher_config=config, layer_map=[(1, 1)],
                            train_labels=None, num_labels=2)
    t_logits = torch.tensor([[[0.0, math.log(2.0), math.log(3.0)]]])  # p_T = (1, 2, 3) / 6
    s_logits = torch.tensor([[[0.0, 0.0, math.log(2.0), 5.0, 9.0]]])  # over 0..2: q = (1, 1, 2) / 4
    batch = {"labels": torch.tensor([[1]]), "attention_mask": torch.ones(1, 1, dtype=torch.long)}
    total, parts = SharedIds(terms, 3)(Features(logits=s_logits, hidden_states=None),
                                       Features(logits=t_logits, hidden_states=None), batch)
    p, q = np.array([1, 2, 3]) / 6, np.array([1, 1, 2]) / 4
    assert total.item() == pytest.approx(float(np.sum(p * np.log(p / q))), abs=1e-6)  # 0.0589


def test_data_beyond_the_students_ids_is_refused(shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=40, dev_examples=8), tok, max_seq_length=48)
    check_shared_data(data, len(tok), tok)  # every toy id is below 68
    top = int(max(data.train.ids.max(), data.dev.ids.max()))
    with pytest.raises(ConfigError, match=r"the student has ids 0..\d+ but causal_toy_instructions holds id \d+ "):
        check_shared_data(data, top, tok)


class FixedLogits(torch.nn.Module):
    """A model whose next-token logits are `table[t]` at position t of every row (vocabulary of 4 ids)."""

    def __init__(self, table: list[list[float]]) -> None:
        super().__init__()
        self.table = torch.tensor(table)

    def forward(self, input_ids, attention_mask=None, **_):
        rows, width = input_ids.shape
        return SimpleNamespace(logits=self.table[:width].expand(rows, width, -1))


def one_sequence() -> CausalData:
    """One dev sequence [0, 1, 2]: position 0 predicts 1, position 1 predicts 2."""
    dev = Sequences(np.array([[0, 1, 2]]), np.array([3]), np.array([1]), np.array([-1]))
    return CausalData("d", dev, dev, 0, [], {"key": "k"})


def test_dev_metrics_of_a_shared_prefix_run_read_the_shared_ids_only():
    """n = 3 shared ids of a 4-id student: id 3 was never trained, so the metrics renormalise over ids 0..2 and take
    the argmax among them. Position 0: logits (1, 0, 2 | 5), target 1: nll = log(e + 1 + e^2) - 0, argmax 2 (wrong;
    id 3 would win over all four). Position 1: logits (0, 1, 3 | 4), target 2: nll = log(1 + e + e^3) - 3, argmax 2
    (right; id 3 over all four)."""
    table = [[1.0, 0.0, 2.0, 5.0], [0.0, 1.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]]
    nll = (math.log(math.e + 1 + math.e ** 2) + math.log(1 + math.e + math.e ** 3) - 3.0) / 2
    data = one_sequence()
    got = lm_evaluator(data, ids=3)(FixedLogits(table), {"validation": lambda: data.dev_batches(4)}, None,
                                    torch.device("cpu"), "fp32")
    assert got["nll"] == pytest.approx(nll, abs=1e-6)
    assert got["perplexity"] == pytest.approx(math.exp(nll), rel=1e-6)
    assert got["token_accuracy"] == pytest.approx(0.5)
    whole = lm_evaluator(data)(FixedLogits(table), {"validation": lambda: data.dev_batches(4)}, None,
                               torch.device("cpu"), "fp32")  # the whole vocabulary: id 3 wins both positions
    assert whole["token_accuracy"] == 0.0 and whole["nll"] > got["nll"] + 1.0


def test_greedy_responses_of_a_shared_prefix_run_are_among_the_shared_ids(shared_cache: Path):
    """A Llama over the toy vocabulary plus one extra id (n + 1 ids) whose head row is large, so that the extra id
    wins many steps over the whole vocabulary: among the n shared ids the greedy response is, at each step, the
    argmax over logits[:n] of a hand loop."""
    tok = build_toy_tokenizer(shared_cache)
    n = len(tok)
    data = from_instructions(InstructionSettings(num_examples=20, dev_examples=3), tok, max_seq_length=32)
    torch.manual_seed(0)
    model = tiny_llama()
    model.resize_token_embeddings(n + 1)
    with torch.no_grad():
        model.lm_head.weight[n] = 50.0 * torch.randn(model.config.hidden_size)
    model.eval()
    _, eos, pad = special_tokens(tok)
    dev, longest = data.dev, int(max(data.dev.lengths - data.dev.first_target))
    prompts = [dev.ids[i, :dev.first_target[i]] for i in range(len(dev))]
    unrestricted = generate_responses(model, prompts, max_new_tokens=longest, eos=eos, pad=pad,
                                      device=torch.device("cpu"))
    assert any(n in r for r in unrestricted)  # the whole vocabulary would answer with the untrained id
    responses, _ = greedy_responses(model, data, tok, torch.device("cpu"), "fp32", batch_size=3, ids=n)
    for i, prompt in enumerate(prompts):
        ids, want = prompt.tolist(), []
        for _ in range(longest):
            with torch.no_grad():
                token = int(model(input_ids=torch.tensor([ids])).logits[0, -1, :n].argmax())
            if token == eos:
                break
            want.append(token)
            ids.append(token)
        assert responses[i] == tok.decode(want, skip_special_tokens=True), i

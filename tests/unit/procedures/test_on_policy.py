"""procedure.on_policy / seq_kd / generation (the data-source axis of causal_lm): the settings' refusals and hashes,
the seeded choice of on-policy batches, the student's samples, and on-policy jobs run, resumed and run on 2 ranks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import causal_lm_settings as settings
from helpers import compose_cfg, on_policy_toy

from distill_sweep.data.corpus import IGNORE
from distill_sweep.data.decoder import special_tokens
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.procedures.on_policy import POSITION, OnPolicy, mark_positions

BASE = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=2"]
INSTRUCT = [*BASE, "procedure.data=instructions", "procedure.teacher_steps=60", "procedure.epochs=1",
            "max_steps_per_epoch=4", "objective=fkl"]


@pytest.mark.parametrize("overrides,message", [
    (["procedure.on_policy=0.5", "procedure.data=corpus"],
     r"procedure.on_policy=0.5 generates responses to prompts: it needs procedure.data=instructions"),
    (["procedure.seq_kd=true", "procedure.data=corpus"], r"procedure.seq_kd=true generates responses to prompts"),
    (["procedure.on_policy=1.5"], r"procedure.on_policy=1.5: must be <= 1.0"),
    (["procedure.on_policy=0.5", "procedure.generation.temperature=0"], r"generation.temperature=0: must be > 0"),
    (["procedure.on_policy=0.5", "procedure.generation.temperature=1e-300"],
     r"procedure.generation.temperature=1e-300 is below 1e-06: the logits divided by it overflow float32"),
    (["procedure.seq_kd=true", "procedure.on_policy=0.5", "procedure.generation.temperature=1e-38"],
     r"generation.temperature=1e-38 is below 1e-06"),
    (["procedure.on_policy=0.5", "procedure.generation.top_p=1.5"], r"generation.top_p=1.5: must be <= 1.0"),
    (["procedure.on_policy=0.5", "procedure.generation.top_p=0"], r"generation.top_p=0: must be > 0"),
    (["procedure.on_policy=0.5", "procedure.generation.max_new_tokens=0"], r"max_new_tokens=0: must be >= 1"),
    (["procedure.seq_kd=true", "procedure.max_seq_length=16", "procedure.generation.max_new_tokens=15"],
     r"max_new_tokens=15 does not fit procedure.max_seq_length=16 with \[BOS\] and a prompt token \(at most 14\)"),
    (["procedure.on_policy=1", "procedure.teacher_top_k=4"],
     r"procedure.on_policy=1: the teacher must score the student's sampled tokens, and the stored "
     r"teacher_logits=top_k .* cannot hold them; leave procedure.teacher_top_k null"),
    (["procedure.on_policy=0.5", "procedure.teacher_logits=hidden"],
     r"procedure.on_policy=0.5: the teacher must score the student's sampled tokens, and the stored "
     r"teacher_logits=hidden .* cannot hold them"),
    (["procedure.on_policy=0.5", "objective=uld", "student=fresh", "student.hidden_size=32",
      "student.num_attention_heads=2", "student.intermediate_size=64", "student.tokenizer=toy_pieces"],
     r"procedure.on_policy=0.5 trains on generated tokens, which exist in the generating model's vocabulary only"),
])
def test_bad_generation_settings_are_refused_in_one_line_before_any_work(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message) as refused:
        prepare(cfg)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_the_axis_is_in_the_job_hash_and_unread_generation_settings_are_not(tmp_path: Path):
    def hashed(*extra: str) -> str:
        return identify(compose_cfg([*INSTRUCT, f"results_dir={tmp_path}", *extra])).digest

    fixed = hashed()
    # on_policy 0: the job as before the keys (test_teacher_logits pins those hashes); generation unread
    assert hashed("procedure.on_policy=0", "procedure.seq_kd=false", "procedure.generation.temperature=0.5",
                  "procedure.generation.max_new_tokens=4") == fixed
    half = hashed("procedure.on_policy=0.5")
    assert len({fixed, half, hashed("procedure.on_policy=1"), hashed("procedure.seq_kd=true")}) == 4
    assert hashed("procedure.on_policy=0.5", "procedure.generation.temperature=0.5") != half
    assert hashed("procedure.on_policy=0.5", "procedure.generation.temperature=1.0") == half  # its default


# --------------------------------------------------------------------------------------- which steps, which samples
@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_the_rule_picks_about_lambda_of_the_steps_from_seed_epoch_and_step_alone(fraction: float):
    s = settings(on_policy=fraction)
    picks = [s.on_policy_step(seed, epoch, step) for seed in range(1, 6) for epoch in range(1, 5) for step in range(100)]
    n = len(picks)
    # within 4 standard errors of a Bernoulli(lambda) mean; exactly none at 0 and all at 1
    assert abs(sum(picks) / n - fraction) <= 4 * math.sqrt(fraction * (1 - fraction) / n)
    assert s.on_policy_steps(1, 2, 100) == [sum(picks[:100]), sum(picks[100:200])]
    if 0 < fraction < 1:
        # a pure function: another settings object, another order, the same answers; another seed, other steps
        again = settings(on_policy=fraction)
        assert [again.on_policy_step(1, 2, step) for step in reversed(range(100))][::-1] == picks[100:200]
        assert picks[:100] != [s.on_policy_step(2, 1, step) for step in range(100)]
        assert picks[:100] != picks[100:200]  # another epoch, other steps


toy = pytest.fixture(scope="module", name="toy")(on_policy_toy)


def marked(data, rows: np.ndarray, epoch: int, step: int) -> dict:
    """The batch of `rows` as the loader hands it to the loss at (epoch, step): with its position."""
    loader = mark_positions(lambda stage, e: iter([{"input_ids": torch.zeros(1)}] * step + [data.batch(data.train, rows)]))
    return list(loader(None, epoch))[step]


@pytest.mark.slow  # a tiny model's generation: over 2 s
def test_an_on_policy_step_trains_on_the_students_samples_for_the_batchs_prompts(toy):
    tok, data, student = toy
    s = settings(on_policy=1.0, max_seq_length=48, generation={"max_new_tokens": 5})
    policy = OnPolicy(s, 3, data, special_tokens(tok))
    rows = np.array([2, 5, 9, 11, 30, 41])
    fixed = data.batch(data.train, rows)
    out = policy.batch(student, marked(data, rows, 1, 4))
    assert POSITION not in out and torch.equal(out["idx"], fixed["idx"]) and policy.steps == 1
    bos, eos, _ = special_tokens(tok)
    for i, r in enumerate(rows):
        first, length = int(data.train.first_target[r]), int(out["attention_mask"][i].sum())
        ids, labels = out["input_ids"][i].tolist(), out["labels"][i].tolist()
        # the same [BOS] and prompt (short enough to need no cut), then 1..5 sampled tokens ending in [EOS] or cut at 5
        assert ids[:first] == data.train.ids[r, :first].tolist() and ids[0] == bos
        response = ids[first:length]
        assert 1 <= len(response) <= 5 and (response[-1] == eos or len(response) == 5)
        assert eos not in response[:-1]
        # the loss reads exactly the sampled tokens: position t predicts token t+1, prompt and padding masked
        assert labels[first - 1:length - 1] == response
        assert all(v == IGNORE for v in labels[:first - 1] + labels[length - 1:])
    # the student's random samples are not the data's one-word responses
    assert not torch.equal(out["input_ids"], fixed["input_ids"])
    # drawn from (seed, epoch, step, row) alone: the same again, other draws at another step or seed
    assert torch.equal(OnPolicy(s, 3, data, special_tokens(tok)).batch(student, marked(data, rows, 1, 4))["input_ids"],
                       out["input_ids"])
    other = OnPolicy(s, 3, data, special_tokens(tok)).batch(student, marked(data, rows, 1, 5))["input_ids"]
    assert not torch.equal(other, out["input_ids"])


def test_a_step_the_rule_leaves_off_policy_is_the_fixed_batch(toy):
    tok, data, student = toy
    s = settings(on_policy=0.5)
    step = next(k for k in range(100) if not s.on_policy_step(3, 1, k))
    rows = np.arange(6)
    policy = OnPolicy(s, 3, data, special_tokens(tok))
    out = policy.batch(student, marked(data, rows, 1, step))
    fixed = data.batch(data.train, rows)
    assert out.keys() == fixed.keys() and all(torch.equal(out[k], fixed[k]) for k in fixed) and policy.steps == 0

"""procedure.on_policy / seq_kd / generation (the data-source axis of causal_lm): the settings' refusals and hashes,
the seeded choice of on-policy batches, the student's samples, and on-policy jobs run, resumed and run on 2 ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import compose_cfg

from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare

BASE = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=2"]
INSTRUCT = [*BASE, "procedure.data=instructions", "procedure.teacher_steps=60", "procedure.epochs=1",
            "max_steps_per_epoch=4", "objective=fkl"]


@pytest.mark.parametrize("overrides,message", [
    (["procedure.on_policy=0.5", "procedure.data=corpus"],
     r"procedure.on_policy=0.5 generates responses to prompts: it needs procedure.data=instructions"),
    (["procedure.seq_kd=true", "procedure.data=corpus"], r"procedure.seq_kd=true generates responses to prompts"),
    (["procedure.on_policy=1.5"], r"procedure.on_policy=1.5: must be <= 1.0"),
    (["procedure.on_policy=0.5", "procedure.generation.temperature=0"], r"generation.temperature=0: must be > 0"),
    (["procedure.on_policy=0.5", "procedure.generation.top_p=1.5"], r"generation.top_p=1.5: must be <= 1.0"),
    (["procedure.on_policy=0.5", "procedure.generation.top_p=0"], r"generation.top_p=0: must be > 0"),
    (["procedure.on_policy=0.5", "procedure.generation.max_new_tokens=0"], r"max_new_tokens=0: must be >= 1"),
    (["procedure.seq_kd=true", "procedure.max_seq_length=16", "procedure.generation.max_new_tokens=15"],
     r"max_new_tokens=15 does not fit procedure.max_seq_length=16 with \[BOS\] and a prompt token \(at most 14\)"),
    (["procedure.on_policy=1", "procedure.teacher_top_k=4"],
     r"procedure.on_policy=1: the teacher must score the student's sampled tokens, and the stored "
     r"teacher_logits=top_k .* cannot hold them; leave procedure.teacher_top_k null"),
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

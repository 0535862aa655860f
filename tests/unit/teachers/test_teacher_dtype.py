"""Teachers are held in the dtype the run computes in (models/loading.py `inference_dtype`): bf16 under
precision=bf16, read from disk in it (no float32 copy on the device), float32 otherwise; the decoder student built
beside a bf16 teacher still trains in float32."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from helpers import param_dtypes as dtypes
from test_decoder_teacher import CPU, RECIPE, instructions, teacher_settings
from tiny_models import tiny_llama

from distill_sweep.config.schema import RunSettings
from distill_sweep.teachers.decoder import TeacherRecipe, trained_teacher


# "trained" trains the teacher under each precision: over 2 s, `make test-fast` leaves it out
@pytest.mark.parametrize("how", [pytest.param("trained", marks=pytest.mark.slow), "random", "given"])
def test_a_decoder_teacher_is_held_in_bf16_under_bf16_and_in_float32_otherwise(how, tmp_path: Path):
    data, tok = instructions(tmp_path)
    settings, recipe = teacher_settings(), RECIPE
    if how == "random":
        recipe = TeacherRecipe(steps=0, lr=RECIPE.lr, batch_size=RECIPE.batch_size)
    if how == "given":
        model = tiny_llama(layers=2)
        model.resize_token_embeddings(len(tok))
        model.save_pretrained(tmp_path / "given")
        settings = dataclasses.replace(settings, name_or_path=str(tmp_path / "given"), config=None)
    got = {}
    for precision in ("bf16", "fp32"):
        got[precision], _ = trained_teacher(settings, data, tok, recipe, cache_dir=tmp_path / "cache", device=CPU,
                                            precision=precision, run=RunSettings())
    assert dtypes(got["bf16"]) == {torch.bfloat16}
    assert dtypes(got["fp32"]) == {torch.float32}
    assert not any(p.requires_grad for p in got["bf16"].parameters())
    if how != "trained":  # the same weights, rounded (a trained one is trained under each precision)
        for a, b in zip(got["bf16"].parameters(), got["fp32"].parameters(), strict=True):
            torch.testing.assert_close(a, b.bfloat16())
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert got["bf16"](input_ids=ids).logits.dtype == torch.bfloat16  # it runs in the run's autocast

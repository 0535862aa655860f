"""A decoder student with its own tokenizer (student.tokenizer): objectives over one vocabulary refused in one line
naming both vocabularies before any work, and objective=uld trained end to end with two toy tokenizers."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FRESH_STUDENT_FAST as FAST
from helpers import compose_cfg

from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.models.toy_vocabulary import pieces_vocabulary, vocabulary

BOTH = r"the teacher's tokenizer is toy \(68 tokens\) and the student's toy_pieces \(107 tokens\)"


def test_the_toy_vocabularies_differ_in_size_and_ids():
    assert (len(vocabulary()), len(pieces_vocabulary())) == (68, 107)  # the numbers the messages below name
    assert pieces_vocabulary()[:5] == vocabulary()[:5]  # the same special tokens open and close a sequence


@pytest.mark.parametrize("overrides,message", [
    (["objective=fkl"], "term fkl of objective=fkl needs one vocabulary for the teacher and the student, but " + BOTH),
    (["objective=rkl"], "term rkl of objective=rkl needs one vocabulary"),
    (["objective=gjsd"], "term gjsd of objective=gjsd needs one vocabulary"),
    (["objective=fkl_hid_seq"], "term fkl of objective=fkl_hid_seq needs one vocabulary"),
    # the stored top-k's ids are the teacher's: refused whatever the terms
    (["objective=uld", "~objective.terms.uld", "procedure.teacher_top_k=4"],
     "procedure.teacher_logits=top_k needs one vocabulary for the teacher and the student, but " + BOTH),
    (["objective=uld", "~objective.terms.uld", "procedure.teacher_top_k=4", "procedure.teacher_logits=sampled"],
     "procedure.teacher_logits=sampled needs one vocabulary"),
    (["objective=uld", "procedure.data=corpus"], "student.tokenizer=toy_pieces is not the teacher's .toy.: "
                                                 "procedure.data=corpus packs"),
])
def test_one_vocabulary_objectives_refuse_two_tokenizers(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*FAST, "student.tokenizer=toy_pieces", f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c",
                       *overrides])
    with pytest.raises(ConfigError, match=message):
        prepare(cfg)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()  # nothing written, no tokenizer built


def test_uld_refuses_a_stored_top_k_and_a_shared_tokenizer_is_no_pair(tmp_path: Path):
    where = [f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]
    with pytest.raises(ConfigError, match="term uld sorts the teacher's whole next-token distribution"):
        prepare(compose_cfg([*FAST, "objective=uld", "procedure.teacher_top_k=4", *where]))
    # the student naming the teacher's own tokenizer has one vocabulary: fkl runs
    job = prepare(compose_cfg([*FAST, "objective=fkl", "student.tokenizer=toy", *where]))
    assert job.objective_name == "fkl"


def test_the_student_tokenizer_at_its_default_leaves_the_job_hash(tmp_path: Path):
    where = [f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]
    plain = prepare(compose_cfg([*FAST, "objective=fkl", *where]))
    named = prepare(compose_cfg([*FAST, "objective=fkl", "student.tokenizer=null", *where]))
    other = prepare(compose_cfg([*FAST, "objective=uld", "student.tokenizer=toy_pieces", *where]))
    same = prepare(compose_cfg([*FAST, "objective=uld", *where]))
    assert plain.out_dir == named.out_dir
    assert other.out_dir != same.out_dir  # another tokenizer is another job

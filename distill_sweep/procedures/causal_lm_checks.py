"""procedure=causal_lm's rules over the whole job, checked from the configs alone before any model is loaded or
trained (ConfigError, one line): the teacher a decoder, the student type, the objective's terms against the one
distill stage, the two vocabularies (`student.tokenizer`, `procedure.vocab=shared_prefix`), the sparse teacher
logits and the lm-eval tasks. `check_job` is the procedure's hook (procedures/base.Procedure.check_job finds it in
procedures/causal_lm.py, which imports it from here); the run reads `vocabulary_pair`, `shared_ids` and checks the
data with `check_shared_data` (procedures/causal_lm.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from distill_sweep.data.decoder import CausalData
from distill_sweep.errors import ConfigError
from distill_sweep.models.families import FAMILIES, is_causal_type
from distill_sweep.models.loading import tokenizer_source
from distill_sweep.models.toy_vocabulary import vocabulary
from distill_sweep.models.vocabularies import Vocabulary, shared_prefix, vocabulary_of
from distill_sweep.objectives import ANY_VOCAB_TERMS, NEXT_TOKEN_TERMS, TERMS
from distill_sweep.objectives.causal import SAMPLED, TOP_K_FULL, TOP_K_TAIL
from distill_sweep.teachers.engine import check_engine, check_head_size

from .causal_lm_settings import HIDDEN, CausalLMSettings
from .lm_eval_stage import check_tasks

STUDENTS = ("truncated", "fresh")  # the student types built for decoders
SHARED_PREFIX = "shared_prefix"  # procedure.vocab: the next-token terms over the ids both vocabularies share


def check_job(settings: CausalLMSettings, job: Any) -> None:
    """Rules over the whole job, from configs alone (ConfigError, one line)."""
    teacher = job.settings.teacher
    model_type = str(getattr(job.teacher_arch, "model_type", ""))
    if not is_causal_type(model_type):
        known = ", ".join(t for f in FAMILIES.values() if f.causal for t in f.model_types)
        raise ConfigError(f"procedure=causal_lm distils a decoder LM ({known}): teacher={teacher.name} is a "
                          f"{model_type} model (try teacher=tiny_llama or teacher=tiny_gpt2)")
    if teacher.finetuned_path or teacher.ensemble:
        raise ConfigError("procedure=causal_lm takes one decoder teacher: teacher.finetuned_path and "
                          "teacher.ensemble do not apply")
    if job.student_kind.name not in STUDENTS:
        raise ConfigError(f"student={job.student_kind.name} is not built for decoders: procedure=causal_lm takes "
                          f"student={' or student='.join(STUDENTS)}")
    if job.settings.optimizer.batch_size is not None:
        raise ConfigError("procedure=causal_lm takes its batch from procedure.batch_size: leave "
                          "optimizer.batch_size null")
    terms = list(job.objective.terms) if job.objective is not None else []
    if not terms and not settings.ce_weight:
        stages = set(job.objective.stages) if job.objective is not None else set()
        why = (f"objective={job.objective_name} distils a classifier's logits in a prediction stage, which "
               "procedure=causal_lm does not run (its one stage sums the objective's terms)"
               if stages & {"prediction", "combined"} else f"objective={job.objective_name} has no terms")
        raise ConfigError(f"{why}: next-token KD is objective=fkl (or rkl, gjsd; hid_seq for hidden states), or "
                          "set procedure.ce_weight > 0")
    check_vocabularies(settings, job, terms)
    first_token = [t for t in terms if TERMS[t].cls_only]
    if first_token:
        raise ConfigError(f"term {first_token[0]} of objective={job.objective_name} reads the first token's state "
                          "([CLS]); a decoder's first token is [BOS], which the causal mask lets see only itself, so "
                          "its state is the same for every sequence: use hid_seq (every real token)")
    check_logit_stages(job.objective, terms)
    # teacher.engine=vllm: its environment is installed, and its build runs the teacher's attention
    check_head_size(check_engine(teacher.engine, teacher.engine_python), job.teacher_arch)
    if settings.stores_teacher():
        live = [t for t in terms if t not in NEXT_TOKEN_TERMS]
        if live:
            raise ConfigError(f"procedure.teacher_logits={settings.logits_mode()} stores the teacher's outputs so "
                              f"that it need not run, but term {live[0]} reads its hidden states: use it with "
                              "fkl/rkl/gjsd terms only")
    if settings.logits_mode() == HIDDEN:
        check_plain_head(job.teacher_arch)
    if settings.teacher_top_k is not None:
        check_sparse_terms(settings.logits_mode(), job.objective.terms if job.objective is not None else {})
        # a teacher built from its config with the toy tokenizer gets the toy vocabulary (trained_teacher)
        toy = teacher.name_or_path is None and tokenizer_source(teacher) == "toy"
        vocab = len(vocabulary()) if toy else int(job.teacher_arch.vocab_size)
        if settings.teacher_top_k > vocab:
            raise ConfigError(f"procedure.teacher_top_k={settings.teacher_top_k} is larger than the vocabulary "
                              f"({vocab})")
    # last: it imports lm_eval (seconds); a task name the harness does not know is refused before any training
    check_tasks(settings.lm_eval)


def check_logit_stages(objective: Any, terms: list[str]) -> None:
    """An objective with terms whose stages also distil a classifier's logits (a prediction stage, or a combined
    stage with alpha > 0): the one stage here sums the terms alone, so that KD term would be dropped unseen."""
    kd = [s for s in objective.stages if s == "prediction" or (s == "combined" and objective.alpha > 0)]
    if terms and kd:
        what = ("a prediction stage" if kd[0] == "prediction" else
                f"a combined stage that adds alpha={objective.alpha:g} x")
        raise ConfigError(f"objective={objective.name} has {what} KD on a classifier's logits (T="
                          f"{objective.temperature:g}), which procedure=causal_lm does not run: its one stage sums the "
                          f"objective's terms ({', '.join(terms)}) and its next-token KD is the fkl term; use "
                          "objective=fkl_hid_seq, or objective.stages=[intermediate] for the terms alone")


def vocabulary_pair(job: Any) -> tuple[Vocabulary, Vocabulary] | None:
    """(the teacher's, the student's) vocabularies where the student has its own tokenizer (`student.tokenizer`)
    and its tokens are not the teacher's; else None. Reads the toy word lists or the tokenizers' files only."""
    own = getattr(job.student, "tokenizer", None)
    if own is None:
        return None
    trust = bool(job.settings.teacher.trust_remote_code)
    teacher = vocabulary_of(tokenizer_source(job.settings.teacher), "teacher.tokenizer", trust)
    student = vocabulary_of(str(own), "student.tokenizer", trust)
    return None if teacher.tokens == student.tokens else (teacher, student)


def check_vocabularies(settings: CausalLMSettings, job: Any, terms: list[str]) -> None:
    """A teacher/student pair with two vocabularies: only terms that need no shared vocabulary (uld, nll), no
    stored top-k (its ids are the teacher's), and instruction data (each pair tokenised by both sides)."""
    if "uld" in terms and settings.teacher_top_k is not None:
        raise ConfigError("term uld sorts the teacher's whole next-token distribution: leave "
                          "procedure.teacher_top_k null (a stored top-k drops its tail)")
    if settings.vocab == SHARED_PREFIX:
        shared_ids(settings, job)
        return
    pair = vocabulary_pair(job)
    if pair is None:
        return
    teacher, student = pair
    one_vocab = [t for t in terms if t not in ANY_VOCAB_TERMS]
    if one_vocab or settings.stores_teacher():
        what = (f"term {one_vocab[0]} of objective={job.objective_name}" if one_vocab else
                f"procedure.teacher_logits={settings.logits_mode()}")
        raise ConfigError(f"{what} needs one vocabulary for the teacher and the student, but the teacher's tokenizer "
                          f"is {teacher.describe()} and the student's {student.describe()}: use objective=uld "
                          "(sorted probabilities, any two vocabularies) or leave student.tokenizer null")
    if settings.data != "instructions":
        raise ConfigError(f"student.tokenizer={student.source} is not the teacher's ({teacher.source}): "
                          "procedure.data=corpus packs each tokenizer's tokens into other sequences, so the two "
                          "sides would read different text; use procedure.data=instructions")
    if settings.generates():
        what = f"procedure.on_policy={settings.on_policy:g}" if settings.on_policy > 0 else "procedure.seq_kd=true"
        raise ConfigError(f"{what} trains on generated tokens, which exist in the generating model's vocabulary "
                          f"only, but the teacher's tokenizer is {teacher.describe()} and the student's "
                          f"{student.describe()}: leave student.tokenizer null")


def shared_ids(settings: CausalLMSettings, job: Any) -> int:
    """procedure.vocab=shared_prefix: n, the ids 0..n-1 the two vocabularies share (refused in one line where the
    student has the teacher's vocabulary, where they differ, or with what needs all the teacher's ids)."""
    pair = vocabulary_pair(job)
    if pair is None:
        raise ConfigError("procedure.vocab=shared_prefix distils over the ids two vocabularies share, but the student "
                          "has the teacher's (student.tokenizer null or the same tokens): leave procedure.vocab=full")
    n = shared_prefix(*pair)
    if settings.stores_teacher():
        what = ("procedure.teacher_top_k stores the teacher's top ids over all of its own: leave it null"
                if settings.teacher_top_k is not None else "procedure.teacher_logits=hidden makes the teacher's "
                "logits over all of its own ids: leave it full")
        raise ConfigError(f"procedure.vocab=shared_prefix compares the ids 0..{n - 1} both vocabularies have, but {what}")
    if settings.generates():
        raise ConfigError("procedure.vocab=shared_prefix: the generated responses of procedure.on_policy / seq_kd "
                          "may hold ids the other side does not have: leave procedure.vocab=full")
    return n


def check_shared_data(data: CausalData, n: int, tokenizer: Any) -> None:
    """Every token of the data in the ids 0..n-1 the student has (ConfigError, one line, naming the first other)."""
    for split in (data.train, data.dev):
        real = np.arange(split.ids.shape[1])[None, :] < split.lengths[:, None]
        beyond = split.ids[real & (split.ids >= n)]
        if len(beyond):
            raise ConfigError(f"procedure.vocab=shared_prefix: the student has ids 0..{n - 1} but {data.name} holds "
                              f"id {int(beyond[0])} ({tokenizer.convert_ids_to_tokens(int(beyond[0]))!r}), which only "
                              "the teacher's vocabulary has; use objective=uld")


# config attributes by which some families scale or cap their logits after the LM head (Gemma 2's soft-capping,
# Cohere's logit_scale, Granite's logits_scaling): a head applied from stored hidden states would miss them
HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def check_plain_head(config: Any) -> None:
    """procedure.teacher_logits=hidden makes the teacher's logits as `lm_head(last hidden state)` (models/lm_head.py):
    refused in one line for a teacher whose config scales or caps its logits after the head."""
    extras = {a: getattr(config, a) for a in HEAD_EXTRAS if getattr(config, a, None) not in (None, 1, 1.0)}
    if extras:
        name, value = next(iter(extras.items()))
        raise ConfigError(f"procedure.teacher_logits=hidden applies the teacher's LM head to its stored hidden "
                          f"states, and this teacher's config also has {name}={value} after its head, which that "
                          "does not apply: use teacher_logits=full (live)")


def check_sparse_terms(mode: str, terms: Mapping[str, Any]) -> None:
    """What each sparse estimator can serve (objectives/causal.py says why): top_k_tail and sampled read the
    teacher's probabilities at T = 1, and sampled estimates forward KL only."""
    for name, term in terms.items():
        temperature = getattr(term, "temperature", 1.0)
        if mode in (TOP_K_TAIL, SAMPLED) and temperature != 1.0:
            raise ConfigError(f"procedure.teacher_logits={mode} stores the teacher's probabilities at T = 1 (its "
                              f"tail or its draws at another T would need the whole vocabulary): term {name} has "
                              f"temperature {temperature}; set it to 1 or use teacher_logits=top_k")
        if mode == TOP_K_FULL and name != "fkl":
            raise ConfigError(f"procedure.teacher_logits=top_k_full compares the teacher's k tokens with the student's "
                              f"full softmax, a forward KL: term {name} is not fkl; use objective=fkl, or "
                              "teacher_logits=top_k or top_k_tail")
        if mode == SAMPLED and name != "fkl":
            raise ConfigError(f"procedure.teacher_logits=sampled estimates forward KL without bias, and only it: "
                              f"term {name} is not linear in the teacher's probabilities; use objective=fkl, or "
                              "teacher_logits=top_k_tail")

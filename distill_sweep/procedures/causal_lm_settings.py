"""procedure=causal_lm: decoder-LM distillation, a causal-LM teacher (teacher=tiny_llama | tiny_gpt2 offline, or a hub
id / directory) into a smaller decoder, on a text corpus (`corpus=`, toy unless the command line chooses another)
or prompt/response pairs, with the next-token terms of the objective (objective=fkl | rkl | gjsd | fkl_hid_seq).
Its code: procedures/causal_lm.py (docs/methods/decoder.md).

    python -m distill_sweep procedure=causal_lm teacher=tiny_llama objective=fkl init=prune

Torch-free: the procedure's settings (their defaults' one home: `procedure=causal_lm` composes them,
procedures/base.declare) and its declaration, with the rules they check from the config alone; the rules that
need the models' configs are procedures/causal_lm_checks.py's `check_job`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from distill_sweep.config.parse import (
    IDENTITY,
    LEARNING_RATE,
    LOSS_WEIGHT,
    SEED_RANGE,
    TEACHER,
    TEMPERATURE,
    UNHASHED_AT_DEFAULT,
    parse,
)
from distill_sweep.config.schema import RecipeSettings, TaskSettings
from distill_sweep.config.seeds import derived_uniform
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.data.decoder_settings import CHOICE, InstructionSettings
from distill_sweep.data.decoder_settings import PRIMARY as TOKEN_ACCURACY
from distill_sweep.data.instruction_files import check_file as check_instruction_file
from distill_sweep.errors import ConfigError
from distill_sweep.teachers.output_plan import HIDDEN_TAG as HIDDEN  # teacher_logits=hidden, its store's mode
from distill_sweep.training.processes import requested_size

from .base import Procedure, ProcedureSettings, declare

# The smallest procedure.generation.temperature. Sampling divides float32 logits by it (HF's generate scores in
# float32, whose largest value is 3.4e38): at 1e-300 the divisor rounds to 0 and every score is inf or NaN (the
# draw was then [EOS] alone, silently). From 1e-6 up a logit overflows only beyond 3.4e32, which no model
# emits; and nothing is lost below it: the Gumbel noise of a draw spans under 50, so at 1e-6 any logit gap over
# 5e-5 already decides the draw, as greedy decoding would.
MIN_TEMPERATURE = 1e-6


@dataclass
class GenerationSettings:
    """How responses are generated (procedure.generation): the student's samples of procedure.on_policy (the
    teacher's greedy responses of procedure.seq_kd read max_new_tokens only)."""

    # the sampling temperature: tokens drawn from softmax(logits / temperature)
    temperature: float = field(default=1.0, metadata=IDENTITY | {"gt": 0.0})
    # nucleus sampling: draw from the most likely tokens whose probabilities first reach top_p (1: all tokens)
    top_p: float = field(default=1.0, metadata=IDENTITY | {"gt": 0.0, "le": 1.0})
    # tokens generated per response at most, its [EOS] included ([BOS] + a prompt token + these fit max_seq_length)
    max_new_tokens: int = field(default=16, metadata=IDENTITY | {"ge": 1})


# How the lm-eval stage draws its responses (procedures/lm_eval_stage.py), in the teacher's cache key, the record's
# sampling block and, for a job with lm-eval tasks, its config hash (job/hashed.py): records and cached teacher scores
# from before rows ended at EOS and sampled requests drew from generators of their own (both depended on the eval batch
# size) are another job, not reused.
LM_EVAL_DRAWS = "per-request generators, rows end at EOS"


@dataclass
class LMEvalSettings:
    """The lm-eval stage (procedure.lm_eval): EleutherAI's lm-evaluation-harness run on the trained student in memory
    after its last epoch (procedures/lm_eval_stage.py). Off (no tasks) by default."""

    # task names: the shipped offline ones (toy_instruct_rouge, toy_instruct_choice), the harness's own (their data
    # from the hub or its cache) or the ones in include_path; empty: the stage is off
    tasks: list[str] = field(default_factory=list, metadata=IDENTITY)
    include_path: str | None = field(default=None, metadata=IDENTITY)  # a directory of the user's own task YAMLs (searched with the shipped ones)
    limit: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})  # documents per task at most (null: all)
    num_fewshot: int | None = field(default=None, metadata=IDENTITY | {"ge": 0})  # few-shot examples (null: each task's own)
    # the generate-until tasks sampled once per seed (torch's seed for the harness's run; MiniLLM's and DistiLLM's
    # "5 seeds"), the other tasks scored once; empty: greedy, each task's own generation settings. Added after
    # jobs with tasks were hashed, so out of the hash at their defaults (as are temperature and top_p)
    sampling_seeds: list[int] = field(default_factory=list, metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    temperature: float = field(default=1.0, metadata=IDENTITY | {**UNHASHED_AT_DEFAULT, **TEMPERATURE})  # with sampling_seeds
    top_p: float = field(default=1.0, metadata=IDENTITY | {**UNHASHED_AT_DEFAULT, "gt": 0.0, "le": 1.0})  # with sampling_seeds

    def gen_kwargs(self) -> dict[str, Any] | None:
        """lm-eval's `gen_kwargs` (laid over each generate-until task's own): sampling, or None (greedy)."""
        if not self.sampling_seeds:
            return None
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}

    def validate(self, where: str) -> None:
        if self.include_path is not None and not Path(self.include_path).expanduser().is_dir():
            raise ConfigError(f"{where}.include_path={self.include_path}: not a directory of task YAMLs")
        self._check_sampling(where)
        if not self.tasks and (self.include_path is not None or self.limit is not None or
                               self.num_fewshot is not None or self.sampling_seeds):
            raise ConfigError(f"{where}.tasks is empty, so the lm-eval stage is off and its other settings are "
                              f"unread: name the tasks ({where}.tasks=[toy_instruct_rouge]) or leave them null")
        if self.tasks and requested_size() > 1:  # rank 0 alone runs the harness; a sharded student needs them all
            raise ConfigError(f"{where}.tasks runs in one process, and this job would start {requested_size()}: "
                              "evaluate with one process, or leave the tasks out and evaluate the student the job "
                              "saves (its record's student_dir) afterwards: lm_eval --model hf --model_args "
                              "pretrained=<student_dir>,add_bos_token=True --tasks ... (docs/guide/gpus.md)")

    def _check_sampling(self, where: str) -> None:
        bad = [s for s in self.sampling_seeds if isinstance(s, bool) or not SEED_RANGE["ge"] <= s < SEED_RANGE["lt"]]
        if bad:
            raise ConfigError(f"{where}.sampling_seeds: {bad[0]!r} is not a seed (an integer in [0, 2**32))")
        twice = sorted({s for s in self.sampling_seeds if self.sampling_seeds.count(s) > 1})
        if twice:  # the same seed twice draws the same samples: a spread of 0 counted as evidence
            raise ConfigError(f"{where}.sampling_seeds: {twice[0]} is given twice (each seed draws the same samples "
                              "every time: give distinct seeds)")
        if not self.sampling_seeds and (self.temperature != 1.0 or self.top_p != 1.0):
            raise ConfigError(f"{where}.temperature/top_p set the sampling of the generate-until tasks, and "
                              f"{where}.sampling_seeds is empty (greedy): name the seeds "
                              f"({where}.sampling_seeds=[1,2,3,4,5]) or leave them at 1.0")


@dataclass
class CausalLMSettings(ProcedureSettings):
    data: Literal["corpus", "instructions"] = field(default="corpus", metadata=TEACHER)  # what it distils on: the corpus group or instructions
    # prompt/response pairs (data=instructions): toy, a local JSONL file or a hub dataset
    instructions: InstructionSettings = field(default_factory=InstructionSettings, metadata=TEACHER)
    # data=instructions: tokens per sequence, [BOS] and [EOS] included (the corpus has its own max_seq_length)
    max_seq_length: int = field(default=64, metadata=TEACHER | {"ge": 4})
    batch_size: int = field(default=16, metadata=TEACHER | {"ge": 1})  # sequences per step
    epochs: int = field(default=2, metadata=IDENTITY | {"ge": 1})  # passes over the training sequences (unless max_steps)
    max_steps: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})  # steps in all (null: by epochs)
    lr: float = field(default=1e-3, metadata=IDENTITY | LEARNING_RATE)  # learning rate, unless optimizer.lr is set
    # warmup share, unless optimizer.warmup_ratio is set
    warmup_ratio: float = field(default=0.06, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})
    # weight of the next-token cross-entropy on the data's targets, added to the objective's terms
    ce_weight: float = field(default=0.0, metadata=IDENTITY | LOSS_WEIGHT)
    # a teacher built from teacher.config is first trained this many steps on the training sequences (0: random)
    teacher_steps: int = field(default=400, metadata=TEACHER | {"ge": 0})
    teacher_lr: float = field(default=3e-3, metadata=TEACHER | LEARNING_RATE)  # its learning rate
    # what the next-token terms read of the teacher: full (all its logits, the teacher running live); top_k (its
    # k most likely tokens, stored; both distributions renormalised over them: biased, the tail's mass is
    # dropped, the student's mass off the k unconstrained; k = 1 refused: it trains nothing); top_k_full (the same
    # k, the teacher renormalised over them, the student's full softmax: its mass off the k is pushed down, as
    # DistillKit's top-k; fkl terms); top_k_tail (those k plus the rest of the mass as one more class; T = 1);
    # sampled (k tokens drawn from its distribution, stored: forward KL unbiased in expectation; fkl terms at
    # T = 1); hidden (its last hidden states, after its final norm, stored in the run's compute dtype; its LM head
    # applied at train time in the student's chunks: the exact full distribution, every term and T; no teacher_top_k).
    # null: top_k when teacher_top_k is set, else full
    teacher_logits: Literal["full", "top_k", "top_k_full", "top_k_tail", "sampled", "hidden"] | None = field(
        default=None, metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    # k: the tokens stored per position for a sparse teacher_logits (null: the full logits)
    teacher_top_k: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})
    # a student with its own tokenizer (student.tokenizer): full (one vocabulary for both sides) or shared_prefix
    # (a same-family pair whose vocabularies differ in size but share ids 0..n-1, n the smaller size, refused unless
    # those decode identically: the student reads the teacher's tokens, the next-token terms over the n ids)
    vocab: Literal["full", "shared_prefix"] = field(default="full", metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    # the next-token terms and the CE make the logits this many predicting positions at a time, from the last
    # hidden states and the LM head, so a batch's full-vocabulary logits never exist at once (0: all at once). 1024
    # rows of a 128k vocabulary are 0.5 GB of float32 logits per model, whatever the sequence length
    logit_chunk: int = field(default=1024, metadata=IDENTITY | {"ge": 0, **UNHASHED_AT_DEFAULT})
    # init=prune: training sequences the block importance is computed on
    calibration: int = field(default=64, metadata=IDENTITY | {"ge": 1})
    # data=instructions: the share of training batches (GKD's lambda, drawn per step from the seed) whose responses
    # are the student's own samples for the batch's prompts, scored by the teacher live; 0: the fixed responses
    on_policy: float = field(default=0.0, metadata=IDENTITY | {"ge": 0.0, "le": 1.0, **UNHASHED_AT_DEFAULT})
    # data=instructions: sequence-level KD, the training responses are the teacher's greedy generations for the
    # prompts (made once per teacher, data and max_new_tokens, stored), not the data's responses
    seq_kd: bool = field(default=False, metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    # how on_policy samples and seq_kd generates (read only when one of them is on)
    generation: GenerationSettings = field(default_factory=GenerationSettings, metadata=IDENTITY)
    # the lm-eval stage after the last epoch (off: no tasks; then out of the job's hash, as before the key)
    lm_eval: LMEvalSettings = field(default_factory=LMEvalSettings, metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    reads_task = False  # its data is the corpus or `instructions`, not `task` (left out of the job's hash)

    def validate(self, where: str) -> None:
        ranks = requested_size()
        if self.batch_size % ranks:
            raise ConfigError(f"{where}.batch_size={self.batch_size} is not a multiple of the {ranks} processes (each "
                              "takes an equal slice of every batch)")
        self.check_generation(where)
        mode = self.logits_mode()
        if mode == "full" and self.teacher_top_k is not None:
            raise ConfigError(f"{where}.teacher_logits=full reads all the teacher's logits live: leave "
                              f"{where}.teacher_top_k null, or choose top_k, top_k_full, top_k_tail or sampled")
        if mode == HIDDEN and self.teacher_top_k is not None:
            raise ConfigError(f"{where}.teacher_logits=hidden stores the teacher's whole last hidden state per "
                              f"position (every token's logit made from it): leave {where}.teacher_top_k null")
        if mode not in ("full", HIDDEN) and self.teacher_top_k is None:
            raise ConfigError(f"{where}.teacher_logits={mode} stores k tokens per position: set {where}.teacher_top_k")
        if mode == "top_k" and self.teacher_top_k == 1:
            # both sides renormalised over one id are both 1 there: every divergence and gradient is exactly 0
            raise ConfigError(f"{where}.teacher_logits=top_k with {where}.teacher_top_k=1 trains nothing (both "
                              "distributions renormalised over one token are 1 there: the loss and every gradient are "
                              f"0); set {where}.teacher_top_k >= 2, or {where}.teacher_logits=top_k_full, top_k_tail "
                              "or sampled")
        if self.teacher_logits == ("top_k" if self.teacher_top_k is not None else "full"):
            self.teacher_logits = None  # what null means: the same job as before the key, with the same hash

    def generates(self) -> bool:
        """Whether some training responses are generated (on_policy > 0 or seq_kd), not the data's."""
        return self.on_policy > 0 or self.seq_kd

    def check_generation(self, where: str) -> None:
        """The rules of on_policy and seq_kd over the other settings (their own ranges: the fields')."""
        if not self.generates():
            return
        what = f"{where}.on_policy={self.on_policy:g}" if self.on_policy > 0 else f"{where}.seq_kd=true"
        if self.data != "instructions":
            raise ConfigError(f"{what} generates responses to prompts: it needs {where}.data=instructions (a "
                              "corpus has no prompts)")
        if self.on_policy > 0 and self.stores_teacher():
            raise ConfigError(f"{what}: the teacher must score the student's sampled tokens, and the stored "
                              f"teacher_logits={self.logits_mode()} (built once over fixed sequences) cannot hold "
                              f"them; leave {where}.teacher_top_k null and {where}.teacher_logits=full (the "
                              "teacher runs live)")
        if self.generation.temperature < MIN_TEMPERATURE:
            raise ConfigError(f"{where}.generation.temperature={self.generation.temperature:g} is below "
                              f"{MIN_TEMPERATURE:g}: the logits divided by it overflow float32 (inf/NaN scores), and "
                              f"any temperature below {MIN_TEMPERATURE:g} already samples as greedy decoding does")
        new = self.generation.max_new_tokens
        if new + 2 > self.max_seq_length:
            raise ConfigError(f"{where}.generation.max_new_tokens={new} does not fit {where}.max_seq_length="
                              f"{self.max_seq_length} with [BOS] and a prompt token (at most {self.max_seq_length - 2})")

    def on_policy_step(self, seed: int, epoch: int, step: int) -> bool:
        """Whether step `step` (0-based) of epoch `epoch` trains on the student's samples: a uniform number
        derived from (seed, epoch, step) alone is below on_policy, so a resumed job, every rank and the dry run
        make the same choice, and about on_policy of the steps are chosen."""
        return self.on_policy > 0 and derived_uniform("on_policy", seed, epoch, step) < self.on_policy

    def known_train_rows(self) -> int | None:
        """Training sequences of the job as its settings state them (toy instructions), else None (a corpus or a
        file: known once read)."""
        if self.data != "instructions" or self.instructions.source != "toy":
            return None
        return min(self.instructions.num_examples, self.instructions.max_examples or self.instructions.num_examples) \
            - self.instructions.dev_examples

    def on_policy_steps(self, seed: int, epochs: int, steps: int) -> list[int]:
        """The on-policy steps of each of `epochs` epochs of `steps` steps."""
        return [sum(self.on_policy_step(seed, e, s) for s in range(steps)) for e in range(1, epochs + 1)]

    def unread_keys(self, objective: Any) -> set[str]:
        # the generation settings make another job only where responses are generated
        return set() if self.generates() else {"generation"}

    def logits_mode(self) -> str:
        """teacher_logits with null resolved: top_k when teacher_top_k is set, else full."""
        return self.teacher_logits or ("top_k" if self.teacher_top_k is not None else "full")

    def stores_teacher(self) -> bool:
        """Whether the job reads its teacher from a store (a sparse one or its hidden states), not live."""
        return self.logits_mode() != "full"

    def store_mode(self) -> str:
        """The store the job reads (output_store's mode): top_k serves top_k, top_k_full and top_k_tail; sampled;
        hidden (the teacher's last hidden states)."""
        mode = self.logits_mode()
        return mode if mode in ("sampled", HIDDEN) else "top_k"
    prunes_layers = True  # init=prune: block importance on a calibration slice (students/prune.py)
    decoders = True  # its teacher is a decoder LM (families.py)

    def sequences_per_step(self) -> int:
        return self.batch_size

    def reads_corpus(self) -> bool:
        return self.data == "corpus"  # instructions: the corpus its defaults list composes is not read

    def check_files(self) -> None:
        if self.data == "instructions":  # a local JSONL or Parquet file, read whole (instruction_files.py)
            check_instruction_file(self.instructions, self.batch_size)

    def own_task(self, corpus: Mapping[str, Any] | None) -> TaskSettings:
        """The job's task in the data's terms: causal_<corpus or instructions name>, scored by token accuracy."""
        if self.data == "corpus":
            if corpus is None:
                raise ConfigError("procedure=causal_lm data=corpus needs a corpus (corpus=toy|text_files|...)")
            self.corpus = parse(CorpusSettings, corpus, "corpus")
            name, length = self.corpus.name, self.corpus.max_seq_length
        else:
            name, length = self.instructions.name, self.max_seq_length
        metrics = [TOKEN_ACCURACY, "perplexity", "nll"]
        if self.data == "instructions" and self.instructions.choice_words():
            metrics.append(CHOICE)
        return TaskSettings(name=f"causal_{name}", source="toy", num_labels=2, primary_metric=TOKEN_ACCURACY,
                            metrics=metrics, max_seq_length=length, recipe=RecipeSettings(lr=self.lr))


declare(Procedure("causal_lm", distils=True, settings=CausalLMSettings, shards=True, corpus="toy"))

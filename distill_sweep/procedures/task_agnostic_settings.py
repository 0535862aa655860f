"""procedure=task_agnostic: distillation during pre-training (the paper's second half, Tables 2 and 4), a teacher with
its MLM head (not fine-tuned) distilled into the student on a text corpus (`corpus=`, toy unless the command line
chooses another), with the objective's terms on the mapped layers; the student is saved for the GLUE fine-tuning.
Its code: procedures/task_agnostic.py.

    python -m distill_sweep procedure=task_agnostic corpus=toy teacher=tiny_mlm objective=att_mse

Torch-free: the procedure's settings (their defaults' one home: `procedure=task_agnostic` composes them,
procedures/base.declare) and its declaration, with the rules they check from the config alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from distill_sweep.config.parse import IDENTITY, LEARNING_RATE, LOSS_WEIGHT, UNHASHED_AT_DEFAULT, parse
from distill_sweep.config.schema import RecipeSettings, TaskSettings
from distill_sweep.data.corpus_settings import CorpusSettings, parquet_files, sources, text_files
from distill_sweep.errors import ConfigError
from distill_sweep.objectives.registry import TERMS
from distill_sweep.training.processes import requested_size

from .base import Procedure, ProcedureSettings, declare

MLM_ACCURACY = "mlm_accuracy"  # task_agnostic's primary metric: the student's dev MLM accuracy


@dataclass
class KDSettings:
    kd_weight: float | None = field(default=None, metadata=IDENTITY | LOSS_WEIGHT)  # null: objective.alpha
    mlm_weight: float | None = field(default=None, metadata=IDENTITY | LOSS_WEIGHT)  # null: 1 - objective.alpha
    positions: Literal["masked", "all"] = field(default="masked", metadata=IDENTITY)  # where the KL is averaged


@dataclass
class TaskAgnosticSettings(ProcedureSettings):
    map: Any = field(default="top", metadata=IDENTITY)  # used when the top-level `map` is left at `init`
    # sequences per update, over all processes (the paper: 1024)
    global_batch: int = field(default=32, metadata=IDENTITY | {"ge": 1})
    # sequences per forward; global_batch / micro_batch are accumulated per update
    micro_batch: int = field(default=16, metadata=IDENTITY | {"ge": 1})
    epochs: int = field(default=2, metadata=IDENTITY | {"ge": 1})  # passes over the corpus (unless max_steps)
    max_steps: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})  # updates in all (null: by epochs)
    lr: float = field(default=5e-4, metadata=IDENTITY | LEARNING_RATE)  # learning rate, unless optimizer.lr is set
    # warmup share, unless optimizer.warmup_ratio is set
    warmup_ratio: float = field(default=0.06, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})
    kd: KDSettings = field(default_factory=KDSettings, metadata=IDENTITY)  # the KD term on the MLM logits
    # the hidden-state terms (hid_seq, hid_cls) also pair the embedding outputs, as in task-specific runs;
    # false: the mapped layers only, as the paper's reference code (its presets paper_table2/4 say false)
    embeddings_pair: bool = field(default=True, metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    reads_task = False  # its data is `corpus`, not `task` (the task is left out of the job's hash)

    def validate(self, where: str) -> None:
        ranks = requested_size()
        if self.global_batch % (self.micro_batch * ranks):
            raise ConfigError(f"{where}.global_batch={self.global_batch} is not a multiple of {where}.micro_batch="
                              f"{self.micro_batch} x {ranks} process(es) (global batch = micro-batch x accumulation "
                              "steps x processes)")

    def sequences_per_step(self) -> int:
        return self.global_batch

    def unread_keys(self, objective: Any) -> set[str]:
        # embeddings_pair changes only terms that pair the embeddings: the presets' other rows keep their hash
        terms = objective.terms if objective is not None else {}
        return set() if any(TERMS[name].pairs_embeddings for name in terms) else {"embeddings_pair"}

    def own_task(self, corpus: Mapping[str, Any] | None) -> TaskSettings:
        """The corpus' settings (checked) and the job's task in their terms: `pretrain_<corpus>`, scored by
        the dev MLM accuracy."""
        if corpus is None:
            raise ConfigError("procedure=task_agnostic needs a corpus (corpus=toy|text_files|wikitext103|...)")
        self.corpus = parse(CorpusSettings, corpus, "corpus")
        for src in sources(self.corpus):  # an empty folder, no text, no parquet column: refused first
            if src.source == "text_files":
                text_files(str(src.path))
            elif src.source == "parquet":
                parquet_files(str(src.path), src.text_field)
        return TaskSettings(name=f"pretrain_{self.corpus.name}", source=self.corpus.source,  # type: ignore[arg-type]
                            num_labels=2, primary_metric=MLM_ACCURACY, metrics=[MLM_ACCURACY, "mlm_loss"],
                            max_seq_length=self.corpus.max_seq_length, recipe=RecipeSettings(lr=self.lr))


declare(Procedure("task_agnostic", distils=True, settings=TaskAgnosticSettings, shards=True, corpus="toy"))

"""student=bilstm, Tang et al. 2019's student: word embeddings -> one BiLSTM layer -> [h_fwd_last, h_bwd_first]
-> ReLU MLP -> classifier; sentence pairs share the encoder and classify [h1, h2, h1*h2, |h1-h2|]. Its own word
vocabulary is built from the training split (cache_dir/vocab/). No init and no intermediate-layer terms apply:
use a prediction-only objective, e.g.

    python -m distill_sweep task=toy teacher=tiny student=bilstm objective=logit_mse

Its code: students/bilstm.py. Torch-free: the type's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from distill_sweep.config.parse import IDENTITY, LEARNING_RATE
from distill_sweep.errors import ConfigError

from .base import StudentType, register_student


@dataclass
class BiLSTMSettings:
    name: str = field(default="bilstm", metadata=IDENTITY)  # the student type
    embedding_dim: int = field(default=300, metadata=IDENTITY | {"ge": 1})  # Tang: 300-d word2vec
    hidden_size: int = field(default=300, metadata=IDENTITY | {"ge": 1})  # per direction (Tang: 150 or 300, by dev score)
    mlp_hidden: int = field(default=400, metadata=IDENTITY | {"ge": 1})  # the ReLU layer (Tang: 200 or 400, by dev score)
    dropout: float = field(default=0.1, metadata=IDENTITY | {"ge": 0.0, "lt": 1.0})  # on the embeddings and the ReLU layer
    min_count: int = field(default=1, metadata=IDENTITY | {"ge": 1})  # a training-set word needs this many occurrences
    max_vocab: int | None = field(default=None, metadata=IDENTITY | {"ge": 3})  # most frequent words kept ([PAD], [UNK] incl.)
    lowercase: bool = field(default=True, metadata=IDENTITY)  # lower-case the text before it is split into words
    embeddings: str | None = field(default=None, metadata=IDENTITY)  # a local word2vec/GloVe text file of embedding_dim vectors (None: random)
    # its learning rate when `optimizer.lr` is not set: a BiLSTM from random weights needs far more than the
    # 1e-5..2e-5 of the GLUE recipes, which are for fine-tuning a pre-trained BERT
    lr: float | None = field(default=1.0e-3, metadata=IDENTITY | LEARNING_RATE)

    def validate(self, where: str) -> None:
        if self.embeddings is not None and not Path(self.embeddings).expanduser().is_file():
            raise ConfigError(f"{where}.embeddings={self.embeddings!r} is not a file (a word2vec/GloVe text file)")


register_student(StudentType("bilstm", BiLSTMSettings, "distill_sweep.students.bilstm",
                             uses_init=False, needs_teacher_weights=False, has_tokenizer=True, has_layers=False,
                             procedures=("task_specific", "finetune")))

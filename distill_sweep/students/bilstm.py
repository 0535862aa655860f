"""`student=bilstm`: Tang et al. 2019's student ("Distilling Task-Specific Knowledge from BERT into Simple Neural
Networks"): word embeddings -> one bidirectional LSTM layer -> sentence vector -> ReLU MLP -> classifier.

* Its own tokenizer: a word vocabulary of the training split (distill_sweep/data/student_words.py); the batches carry its
  word ids (`student_ids_<field>`) next to the teacher's word pieces, and the model reads only its own
  (`input_keys`).
* Sentence vector: the LSTM's last states, forward and backward concatenated (h_fwd at the last real word,
  h_bwd at the first), read from packed sequences so padding never enters the recurrence.
* Sentence pairs: one encoder for both sentences (siamese), classified from [h1, h2, h1*h2, |h1-h2|].
* Embeddings: 300-d, randomly initialised (N(0, 1), PAD row zero), or read from a local word2vec/GloVe text
  file (`embeddings=<path>`); there is no download.

It has no transformer layers: no init applies, intermediate-layer terms are refused (job.identify), and its
architecture config says it provides no hidden states or q/k/v to the objectives.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PretrainedConfig
from transformers.modeling_outputs import SequenceClassifierOutput

from distill_sweep.data.batching import STUDENT_IDS
from distill_sweep.data.student_words import load_or_build, read_vectors

from .base import BuildInputs
from .bilstm_settings import BiLSTMSettings

log = logging.getLogger("distill_sweep")


class BiLSTMConfig(PretrainedConfig):
    """The BiLSTM's shape as the job sees it (ModelInfo: one layer, no hidden states, no attention)."""

    model_type = "bilstm"
    exposes_hidden_states = False  # students.model_info: no hidden states or q/k/v for the objectives

    def __init__(self, embedding_dim: int = 300, hidden_size: int = 300, mlp_hidden: int = 400, dropout: float = 0.1,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.embedding_dim, self.hidden_size, self.mlp_hidden, self.dropout = embedding_dim, hidden_size, mlp_hidden, dropout
        self.num_hidden_layers = 1
        self.num_attention_heads = 0


def describe(settings: BiLSTMSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    return BiLSTMConfig(embedding_dim=settings.embedding_dim, hidden_size=settings.hidden_size,
                        mlp_hidden=settings.mlp_hidden, dropout=settings.dropout)


class BiLSTMClassifier(nn.Module):
    """Words -> BiLSTM -> [h_fwd_last, h_bwd_first] (per sentence; pairs: [h1, h2, h1*h2, |h1-h2|]) -> ReLU MLP
    -> logits. `forward(student_ids_0, [student_ids_1])` returns an output with `.logits`."""

    def __init__(self, config: BiLSTMConfig, vocab_size: int, num_labels: int, num_fields: int) -> None:
        super().__init__()
        if num_fields not in (1, 2):
            raise ValueError(f"a BiLSTM student classifies one sentence or a pair, not {num_fields} text fields")
        self.config = config
        self.num_fields = num_fields
        # the batch keys this model reads (loop.model_inputs): its own word ids only, never the word pieces
        self.input_keys = tuple(f"{STUDENT_IDS}{i}" for i in range(num_fields))
        self.embed = nn.Embedding(vocab_size, config.embedding_dim, padding_idx=0)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_size, num_layers=1, batch_first=True,
                            bidirectional=True)
        width = 2 * config.hidden_size * (4 if num_fields == 2 else 1)
        self.dropout = nn.Dropout(config.dropout)
        self.mlp = nn.Sequential(nn.Linear(width, config.mlp_hidden), nn.ReLU(), nn.Dropout(config.dropout))
        self.classifier = nn.Linear(config.mlp_hidden, num_labels)

    def encode(self, ids: Tensor) -> Tensor:
        """(B, S) word ids, right-padded with 0 -> (B, 2 * hidden): the last forward state and the last
        backward state (the one at the first word)."""
        lengths = (ids != 0).sum(-1).clamp_min(1).cpu()  # words.encode never gives an empty row; clamp anyway
        x = self.dropout(self.embed(ids))
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)  # (2, B, hidden): direction 0 forward, 1 backward; in the batch's order
        return torch.cat([h_n[0], h_n[1]], dim=-1)

    @staticmethod
    def pair_features(h1: Tensor, h2: Tensor) -> Tensor:
        """Tang et al.'s siamese features [h1, h2, h1*h2, |h1-h2|]."""
        return torch.cat([h1, h2, h1 * h2, (h1 - h2).abs()], dim=-1)

    def forward(self, student_ids_0: Tensor, student_ids_1: Tensor | None = None, **_: Any) -> SequenceClassifierOutput:
        h = self.encode(student_ids_0)
        if self.num_fields == 2:
            if student_ids_1 is None:
                raise ValueError("this BiLSTM student classifies sentence pairs: the batch has no student_ids_1")
            h = self.pair_features(h, self.encode(student_ids_1))
        return SequenceClassifierOutput(logits=self.classifier(self.mlp(h)))


def build(settings: BiLSTMSettings, inputs: BuildInputs) -> nn.Module:
    vocab = inputs.tokenizer
    if vocab is None:
        raise ValueError("student=bilstm is built with its word vocabulary (BuildInputs.tokenizer)")
    config = inputs.arch if isinstance(inputs.arch, BiLSTMConfig) else describe(settings, inputs.arch)
    model = BiLSTMClassifier(config, len(vocab), inputs.num_labels, len(vocab.fields))
    if settings.embeddings is not None:
        matrix, found = read_vectors(Path(settings.embeddings).expanduser(), vocab, settings.embedding_dim)
        with torch.no_grad():
            rows = matrix.abs().sum(-1) > 0
            model.embed.weight[rows] = matrix[rows]  # words without a vector keep their random row
        log.info("student embeddings: %d of %d words from %s", found, len(vocab) - 2, settings.embeddings)
    return model


def tokenizer(settings: BiLSTMSettings, train: Any, fields: list[str], cache_dir: Any, task: str) -> Any:
    """The word vocabulary of the raw training split (shared by the jobs of a sweep through cache_dir)."""
    vocab, _ = load_or_build(train, fields, cache_dir, task, min_count=settings.min_count,
                             max_size=settings.max_vocab, lowercase=settings.lowercase)
    return vocab

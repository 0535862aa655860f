"""Hid-CLS-Contrast: CoDIR-style contrastive distillation of [CLS] states (Sun et al., 2020).

Features.  The [CLS] states of the hidden pairs (embeddings (0, 0) + the layer map) are concatenated per
side, mapped to the term setting ``dim`` (128) by one learnable Linear per side and L2-normalised.  (The reference
code concatenates ALL teacher layers; we use the mapped ones, like every other objective here.)

Memory bank.  One bank per side, one row per TRAINING example (``train_labels`` gives their number and
labels), keyed by ``batch["idx"]``; rows start as random unit vectors and are updated only in training
mode: row <- normalise(momentum * row + (1 - momentum) * feature).  In eval mode ``idx`` indexes another
split, so the bank is neither read at ``idx`` nor written: the positive is the current other-side feature.

Negatives.  ``num_negatives`` (K) training examples per anchor, drawn uniformly with replacement among
the training examples whose label differs from the anchor's (CoDIR's label-aware sampling for
fine-tuning); given float labels (regression) among all other examples.  ``train_labels=None`` is a
ConfigError: without the training set there is no bank (the pipeline passes None for regression tasks).

Size: two banks of N x dim float32 buffers (MNLI: 393k x 128 x 2 = 400 MB), part of the state_dict so a
resumed run continues with the same bank.

Loss (the term setting ``loss``):
* ``nce`` (default, the form of the CRD code the reference uses): two symmetric halves, the student
  feature as anchor against teacher-bank rows (L_s) and the teacher feature against student-bank rows
  (L_t), averaged as in CRD/CoDIR: L = (L_s + L_t) / 2.  With P_j = exp(<anchor, row_j> / tau) / Z
  (row_0 = positive, the bank row of the same example) and noise probability 1/N (N = training-set size),
  each half is
  L_x = -1/B sum_b [ log P_0 / (P_0 + K/N + eps) + sum_{j>=1} log (K/N) / (P_j + K/N + eps) ].
  Z (one per half) is set once, from the first training batch: mean(exp(<.,.>/tau)) * N, then fixed.
* ``infonce`` (the CoDIR paper's formula): student anchor only, positive = the current teacher feature,
  negatives = teacher-bank rows, L = CE([<f_s, f_t>, <f_s, row_1..K>] / tau, target 0), batch mean.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from .inputs import STUDENT, TEACHER, LossInputs
from .spec import TermSpec

__all__ = ["HidCLSContrast", "info_nce_loss", "nce_loss"]

NCE_EPS = 1e-7


def nce_loss(out: Tensor, n_data: int) -> Tensor:
    """One half of CRD's NCE criterion on normalised scores ``out`` (B, K+1), column 0 = positive."""
    k = out.shape[1] - 1
    noise = k / float(n_data)
    pos, neg = out[:, 0], out[:, 1:]
    log_d1 = torch.log(pos / (pos + noise + NCE_EPS))
    log_d0 = torch.log(noise / (neg + noise + NCE_EPS))
    return -(log_d1.sum() + log_d0.sum()) / out.shape[0]


def info_nce_loss(anchor: Tensor, positive: Tensor, negatives: Tensor, temperature: float) -> Tensor:
    """InfoNCE: anchor (B, D), positive (B, D), negatives (B, K, D); cross-entropy with target 0."""
    pos = (anchor * positive).sum(-1, keepdim=True)
    neg = torch.bmm(negatives, anchor.unsqueeze(-1)).squeeze(-1)
    logits = torch.cat([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(anchor.shape[0], dtype=torch.long, device=anchor.device))


class HidCLSContrast(nn.Module):
    """Hid-CLS-Contrast: CoDIR contrastive [CLS] distillation with a training-set memory bank."""

    def __init__(self, spec: TermSpec) -> None:
        super().__init__()
        c = spec.settings
        self.dim, self.temperature, self.momentum = c.dim, c.temperature, c.momentum
        self.num_negatives, self.loss_form = c.num_negatives, c.loss
        if spec.train_labels is None:
            raise ConfigError(
                "hid_cls_contrast needs the class labels of the training set (its memory bank spans the "
                "training set and negatives are drawn from other classes): not available for regression tasks"
            )
        labels = torch.as_tensor(spec.train_labels).flatten()
        n = int(labels.numel())
        if n < 2:
            raise ConfigError("hid_cls_contrast needs at least 2 training examples")
        self.n_data = n
        n_pairs = len(spec.hidden_pairs)
        self.embed_s = nn.Linear(n_pairs * spec.student_hidden, self.dim)
        self.embed_t = nn.Linear(n_pairs * spec.teacher_hidden, self.dim)
        stdv = 1.0 / math.sqrt(self.dim / 3)
        for name in ("bank_s", "bank_t"):
            bank = torch.rand(n, self.dim).mul_(2 * stdv).sub_(stdv)
            self.register_buffer(name, F.normalize(bank, dim=1))
        # NCE normalising constants (student-anchor half, teacher-anchor half); < 0 = not set yet.
        self.register_buffer("z", torch.full((2,), -1.0))

        self.by_label = not labels.is_floating_point()
        if self.by_label:
            labels = labels.long()
            if int(labels.min()) < 0:
                raise ConfigError("hid_cls_contrast: training labels must be >= 0")
            num_classes = max(int(labels.max()) + 1, int(spec.num_labels))
            counts = torch.bincount(labels, minlength=num_classes)
            present = counts > 0
            if bool((counts[present] == n).any()):
                raise ConfigError("hid_cls_contrast: all training examples share one label, no negatives")
            starts = torch.cumsum(counts, 0) - counts
            # Examples sorted by label: the negatives of class c are everything outside its block.
            self.register_buffer("order", torch.argsort(labels, stable=True))
            self.register_buffer("class_start", starts)
            self.register_buffer("class_count", counts)
            self.register_buffer("labels", labels)

    # ------------------------------------------------------------------ sampling
    def sample_negatives(self, labels: Tensor | None, own_idx: Tensor | None, size: int) -> Tensor:
        """(size, K) training-set indices, drawn with replacement.

        With ``labels``: examples of a different label.  Otherwise examples other than ``own_idx`` (when
        given, training mode) or any example (eval mode, unlabeled or regression).
        """
        device = self.bank_t.device
        u = torch.rand(size, self.num_negatives, device=device)
        if labels is not None and self.by_label:
            labels = labels.to(device)
            start = self.class_start[labels].unsqueeze(1)
            count = self.class_count[labels].unsqueeze(1)
            r = (u * (self.n_data - count)).long().clamp_max(self.n_data - count - 1)
            r = r + (r >= start).long() * count  # skip the anchor's own label block
            return self.order[r]
        if own_idx is not None:
            own = own_idx.to(device).unsqueeze(1)
            r = (u * (self.n_data - 1)).long().clamp_max(self.n_data - 2)
            return r + (r >= own).long()
        return (u * self.n_data).long().clamp_max(self.n_data - 1)

    def _eval_labels(self, batch_labels: Tensor | None) -> Tensor | None:
        if not self.by_label or batch_labels is None or batch_labels.is_floating_point():
            return None
        labels = batch_labels.long()
        if bool(((labels < 0) | (labels >= self.class_count.numel())).any()):
            return None  # unlabeled split (e.g. GLUE test): any negative will do
        return labels

    # ------------------------------------------------------------------ forward
    def features(self, x: LossInputs) -> tuple[Tensor, Tensor]:
        hs = torch.cat([x.cls(STUDENT, s) for s, _ in x.hidden_pairs], dim=-1)
        ht = torch.cat([x.cls(TEACHER, t) for _, t in x.hidden_pairs], dim=-1)
        return F.normalize(self.embed_s(hs), dim=-1), F.normalize(self.embed_t(ht), dim=-1)

    def forward(self, x: LossInputs) -> Tensor:
        f_s, f_t = self.features(x)
        idx: Tensor | None = None
        if self.training:
            if "idx" not in x.batch:
                raise KeyError("hid_cls_contrast needs batch['idx'] (training-set row of each example)")
            idx = x.batch["idx"].to(self.bank_t.device).long()
            if bool(((idx < 0) | (idx >= self.n_data)).any()):
                raise IndexError(f"batch['idx'] outside the training set (0..{self.n_data - 1})")
            neg = self.sample_negatives(self.labels[idx] if self.by_label else None, idx, idx.shape[0])
            pos_t, pos_s = self.bank_t[idx], self.bank_s[idx]
        else:
            neg = self.sample_negatives(self._eval_labels(x.batch.get("labels")), None, f_s.shape[0])
            pos_t, pos_s = f_t.detach(), f_s.detach()

        if self.loss_form == "infonce":
            # The paper's form: the positive is the current teacher feature, not its bank row.
            loss = info_nce_loss(f_s, f_t, self.bank_t[neg], self.temperature)
        else:
            rows_t = torch.cat([pos_t.unsqueeze(1), self.bank_t[neg]], dim=1)  # (B, K+1, dim)
            rows_s = torch.cat([pos_s.unsqueeze(1), self.bank_s[neg]], dim=1)
            out_s = torch.exp(torch.bmm(rows_t, f_s.unsqueeze(-1)).squeeze(-1) / self.temperature)
            out_t = torch.exp(torch.bmm(rows_s, f_t.unsqueeze(-1)).squeeze(-1) / self.temperature)
            z_s, z_t = self._normalisers(out_s, out_t)
            loss = 0.5 * (nce_loss(out_s / z_s, self.n_data) + nce_loss(out_t / z_t, self.n_data))

        if self.training:
            assert idx is not None
            self._update_bank(idx, f_s.detach(), f_t.detach())
        return loss

    def _normalisers(self, out_s: Tensor, out_t: Tensor) -> tuple[float, float]:
        if float(self.z[0]) > 0:
            return float(self.z[0]), float(self.z[1])
        z_s = float(out_s.detach().mean()) * self.n_data
        z_t = float(out_t.detach().mean()) * self.n_data
        if self.training:  # fixed from the first training batch on, as in CRD
            self.z[0], self.z[1] = z_s, z_t
        return z_s, z_t

    @torch.no_grad()
    def _update_bank(self, idx: Tensor, f_s: Tensor, f_t: Tensor) -> None:
        m = self.momentum
        for bank, feat in ((self.bank_s, f_s), (self.bank_t, f_t)):
            rows = F.normalize(bank[idx] * m + feat.to(bank.dtype) * (1 - m), dim=1)
            bank.index_copy_(0, idx, rows)

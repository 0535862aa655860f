"""A decoder job (`procedure=causal_lm`) as a member of a pack (sweep/packs.py, training/pack.py).

Three things join it to its pack: its student's stage driver hands the turn on after every step (`join`); its
loss reads the teacher's features through the pack's shared forward (`SharedTeacher`), which runs the frozen
teacher once per batch for every member that asks for that batch (keyed by the batch's content: an on-policy
member's sampled batch is its own, and gets a forward of its own); and the members hold one teacher between them
(`once`: the first member loads it, the others take the same module, where alone each would load its own copy of
the same weights; a pack's members have one teacher by sweep/packs.pack_key). The rest of the job is as alone.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor, nn

from distill_sweep.models.capture import Features
from distill_sweep.training.pack import PackMember
from distill_sweep.training.stages import StageDriver


class SharedTeacher:
    """`terms` (an objective from objectives.core.build_objective) whose teacher-side features come from the
    pack's shared forward; the student's side and the loss are the terms' own."""

    def __init__(self, terms: Any, pack: PackMember) -> None:
        self.terms, self.pack = terms, pack

    def features(self, model: nn.Module, batch: Mapping[str, Tensor], side: str) -> Features:
        if side != "teacher":
            return self.terms.features(model, batch, side)
        # what terms.features asks of one forward (objectives/core.py), asked of the pack's shared forward
        return self.pack.teacher_forward(model, batch, hidden=bool(self.terms.needs_hidden),
                                         qkv_layers=list(self.terms.teacher_qkv_layers))

    def forward_without_head(self, model: nn.Module, batch: Mapping[str, Tensor], *, hidden: bool,
                             chunk: int) -> Features:
        """The teacher's side of a chunked loss (objectives/chunked.lm_features), from the pack's shared forward."""
        return self.pack.teacher_forward.without_head(model, batch, hidden=hidden, chunk=chunk)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.terms(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # anything else the loss reads of the terms
        if name == "terms":  # not set yet (a copy being made): no recursion through the line below
            raise AttributeError(name)
        return getattr(self.terms, name)


def shared_teacher(terms: Any, pack: PackMember | None) -> Any:
    """`terms` as a pack member reads them (unchanged alone, or with no terms)."""
    return terms if pack is None or terms is None else SharedTeacher(terms, pack)


def join(driver: StageDriver, pack: PackMember | None) -> StageDriver:
    """The student's stage driver taking its turns in the pack (as RunContext.driver does for encoder jobs) and
    labelling its log lines with the member's settings."""
    if pack is not None:
        driver.turn = pack.turn
        driver.label = driver.label or pack.label
    return driver


def once(pack: PackMember | None, load: Callable[..., tuple[nn.Module, dict[str, Any]]]
         ) -> Callable[..., tuple[nn.Module, dict[str, Any]]]:
    """`load` (the teacher's loader: (model, what the record says of it)) as a pack member calls it: alone, `load`
    itself; in a pack, the first member's call loads the teacher and later members get the same frozen module,
    each with its own copy of the record's part, where a teacher the first member built is "reused" (as a job
    alone finds a teacher that another job built in the cache)."""
    models = getattr(pack.teacher_forward, "models", None) if pack is not None else None
    if models is None:
        return load

    @functools.wraps(load)
    def shared(*args: Any, **kwargs: Any) -> tuple[nn.Module, dict[str, Any]]:
        if "teacher" not in models:
            models["teacher"] = load(*args, **kwargs)
            return models["teacher"][0], copy.deepcopy(models["teacher"][1])
        teacher, info = models["teacher"]
        info = copy.deepcopy(info)
        if info.get("cache") == "built":
            info["cache"] = "reused"
        return teacher, info

    return shared

"""Whether a job reads its teacher's outputs from the store, and where the store is (config alone, no torch).

The sweeper plans the store builds with these before launching (`store_request`: an encoder job's logits, a
decoder job's top-k logits), and job.identify refuses `teacher_outputs=store` where the store would be wrong;
output_store.py builds and reads the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distill_sweep.config.parse import as_dict
from distill_sweep.objectives import TERMS
from distill_sweep.records.record import part_id
from distill_sweep.teachers.cache import TeacherSpec

META = "meta.json"  # a finished store's description, written last
# procedure.teacher_logits=hidden: its value, the store mode it reads (the decoder teacher's last hidden states) and
# that store's tag in its directory name
HIDDEN_TAG = "hidden"
GENERATION_BATCH = 32  # prompts per generate call while the teacher's generations (seq_kd) are made


@dataclass(frozen=True)
class Plan:
    """Whether a job reads the teacher's logits from the store, and if not, why."""

    use_store: bool
    reason: str | None  # why not (None when it does)


def plan(setting: str, procedure: Any, objective: Any) -> Plan:
    """`setting`: the job's `teacher_outputs`. The store is exact for procedures that distil from a frozen
    teacher fine-tuned on the task's fixed training split, in stages that read its logits."""
    if setting == "live":
        return Plan(False, "teacher_outputs=live")
    if not procedure.stores_teacher_outputs:
        return Plan(False, f"procedure={procedure.name} does not distil from a frozen task teacher's logits "
                           "on a fixed training split")
    if objective is None or not {"prediction", "combined"} & set(objective.stages):
        return Plan(False, "no stage of the objective reads the teacher's logits")
    return Plan(True, None)


def stored_cls_layers(objective: Any, layer_map: Any) -> list[int]:
    """Teacher layers whose [CLS] states the store also holds for this job (0 = embeddings): those of the
    mapped layers when every term of the objective reads only [CLS] states (Hid-CLS, its contrastive form,
    PKD); then no stage runs the teacher at all. [] when a term reads more (whole sequences, q/k/v)."""
    if objective is None or not objective.terms or not layer_map:
        return []
    if not all(TERMS[name].cls_only for name in objective.terms):
        return []
    return sorted({0, *(int(t) for _, t in layer_map)})


def topk_tag(k: int, mode: str = "top_k") -> str:
    """A sparse store's tag in its directory name: `top<k>` (top_k and top_k_tail read the same store) or
    `sampled<k>`."""
    return f"sampled{int(k)}" if mode == "sampled" else f"top{int(k)}"


def generations_tag(max_new_tokens: int) -> str:
    """The tag of a store of the teacher's greedy generations (seq_kd; teachers/generations.py) in its directory name."""
    return f"greedy{int(max_new_tokens)}"


def decoder_group(teacher: TeacherSpec, settings: Any) -> str:
    """A decoder job's top-k store prefix from its config alone: the teacher and the procedure's data and teacher
    recipe (`settings`: CausalLMSettings), with file paths reduced to their names (the content key after the
    prefix tells stores apart; a moved file keeps its stores)."""
    data = as_dict(settings.instructions) if settings.data == "instructions" else as_dict(settings.corpus)
    # seq_kd: the responses are the teacher's (another data, hence other stores); absent otherwise (earlier groups)
    responses = {"responses": "seq_kd"} if getattr(settings, "seq_kd", False) else {}
    # a vLLM engine's stores (teacher.engine=vllm) are other stores: absent for transformers' (earlier groups)
    engine = getattr(teacher.settings, "engine", "hf")
    return part_id({"teacher": teacher.key, "data": settings.data, "source": _names_only(data),
                    "max_seq_length": settings.max_seq_length if settings.data == "instructions" else None,
                    "recipe": [settings.teacher_steps, settings.teacher_lr, settings.batch_size], **responses,
                    **({"engine": engine} if engine != "hf" else {})})


def _names_only(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: Path(str(v)).name if k == "path" and v else _names_only(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_names_only(v) for v in node]
    return node


@dataclass(frozen=True)
class StoreRequest:
    """The store a job will read, as the sweeper can name it before any job runs: its data (the task), its
    config-derived group and its features (`logits...` or `top<k>`)."""

    task: str
    group: str
    tag: str

    def prepared(self, cache_dir: Path) -> bool:
        """A finished store of this request exists (the sweeper skips its build job)."""
        return any(store_root(cache_dir, self.task).glob(f"{self.group}-{self.tag}-*/{META}"))


def store_request(ident: Any) -> StoreRequest | None:
    """The store the job `ident` (a job identity) reads, or None when it reads none: an encoder job's logits
    where `plan` says so; a decoder job's sparse store (top-k or sampled) when `procedure.teacher_top_k` is set, its hidden store with
    `procedure.teacher_logits=hidden`."""
    settings = ident.procedure_settings
    if getattr(settings, "decoders", False):
        if settings.store_mode() == HIDDEN_TAG:
            return StoreRequest(ident.task, decoder_group(ident.teacher, settings), HIDDEN_TAG)
        k = getattr(settings, "teacher_top_k", None)
        if k is None:
            return None
        return StoreRequest(ident.task, decoder_group(ident.teacher, settings), topk_tag(k, settings.store_mode()))
    if not plan(ident.settings.run.teacher_outputs, ident.procedure, ident.objective).use_store:
        return None
    cls_layers = stored_cls_layers(ident.objective, getattr(ident, "layer_map", None))
    return StoreRequest(ident.task, group_id(ident.teacher), feature_tag(cls_layers))


def feature_tag(cls_layers: list[int]) -> str:
    return "logits" if not cls_layers else "logits-cls" + "-".join(map(str, cls_layers))


def group_id(teacher: TeacherSpec) -> str:
    """The store's teacher and data as the config names them (no weights read): stores built from the same
    config share this prefix, so the sweeper can tell which tasks already have one before launching."""
    return part_id({"teacher": teacher.key, "finetuned_path": teacher.settings.finetuned_path})


def store_root(cache_dir: Path, task: str) -> Path:
    return Path(cache_dir) / "teacher_outputs" / task

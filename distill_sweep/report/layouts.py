"""Other systems' own tables: which records are a layout's rows, in what order, against which baselines.

A layout is selected by `table=<key>` or by `preset=<name>` with `table=all` (`PRESET_LAYOUTS`); it is
built by `report.layout_table` into the same Table model as Tables 1 and 3. A record is one of a layout's
rows when `classify` gives it labels (one per row header); the rows are the labels' (system, init) units
of `distill_sweep.analysis.frames`, so two setups that get the same labels (two teachers, two inits) stay apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from distill_sweep.analysis.paper import GLUE_TASKS, as_float

Labels = tuple[str, ...]
Pair = tuple[Labels, Labels]  # (row, the row it is tested against)

EARLY_EXIT = "fastbert"  # FastBERT's speed-accuracy section (report.build), a layout of its own kind
NO_PTP, PTP = "without PTP", "with PTP"


@dataclass(frozen=True)
class Layout:
    key: str  # the table= choice and the file names: <key>.md/.tex/.csv, ttests_<key>.csv, paper_<key>.csv
    title: str
    row_headers: tuple[str, ...]
    classify: Callable[[dict[str, Any]], Labels | None]  # a records-frame row -> its labels, None = not a row
    order: tuple[tuple[str, ...], ...]  # per label position, the known values in display order (others after)
    skeleton: tuple[Labels, ...]  # the system's own rows: shown even before any run (missing cells)
    group_by: int  # the label position whose value groups rows for the best-per-column mark
    pairs: Callable[[Sequence[Labels]], list[Pair]]  # the t-tests, given the rows of the table
    tasks: tuple[str, ...] = ()  # the system's own columns, first and all of them once the store has any
    metric_mode: str | None = None  # fixed column metrics (paper.column_metric mode); None: the report's metric=
    avg_tasks: tuple[str, ...] = GLUE_TASKS
    teacher_row: bool = False  # a first row with the fine-tuned teacher's own dev scores
    paper_file: str | None = None  # results/paper/<file> (paper.load_method_table)
    paper_rows: dict[str, Labels] = field(default_factory=dict)  # the paper's method -> our row
    paper_teacher_layers: int | None = None  # our rows get a delta only with a teacher of this depth
    notes: tuple[str, ...] = ()


def student_label(r: dict[str, Any]) -> str | None:
    """BERT<k> (the truncated student), SPS-1 / SPS-2 (`student.settings.swap_qk`), BiLSTM."""
    name = r["student_name"]
    if name == "truncated":
        layers = as_float(r["student_layers"])
        return f"BERT{int(layers)}" if layers == layers else "BERT"
    if name == "sps":
        return "SPS-2" if (r["student_settings"] or {}).get("swap_qk") else "SPS-1"
    return {"bilstm": "BiLSTM"}.get(str(name))


KD_LABELS = {"vanilla_kd": "vanilla KD", "pkd": "PKD", "logit_mse": "logit MSE"}
NO_KD = "no KD"


def kd_label(r: dict[str, Any], objectives: Sequence[str]) -> str | None:
    """The distillation of a row: "no KD" for procedure finetune, else the objective's label (if listed)."""
    if r["procedure"] == "finetune":
        return NO_KD
    return KD_LABELS.get(r["objective"]) if r["objective"] in objectives else None


# ----------------------------------------------------------------------------- PEA-KD (seed 003)

PEAKD_TASKS = ("rte", "mrpc", "sst2", "qnli")  # its columns: RTE acc, MRPC F1, SST-2 acc, QNLI acc (= metric=header)
PEAKD_STUDENTS = ("BERT3", "SPS-1", "SPS-2")
PEAKD_KD = ("vanilla KD", "PKD")
PEAKD_TEACHER_LAYERS = 12  # its teacher: BERT-base, fine-tuned per task
PEAKD_NOTE = ("columns as PEA-KD's tables: RTE acc, MRPC F1, SST-2 acc, QNLI acc, whatever metric= says; Avg over "
              "these four, as the paper's")


def _peakd4_row(r: dict[str, Any]) -> Labels | None:
    kd, student = kd_label(r, ("vanilla_kd", "pkd")), student_label(r)
    if r["procedure"] != "task_specific" or kd is None or student is None or student == "BiLSTM":
        return None
    return kd, student


def _peakd4_pairs(rows: Sequence[Labels]) -> list[Pair]:
    """Every row against BERT3 with vanilla KD; and the paper's two steps under PKD: SPS-1 vs BERT3, SPS-2 vs
    SPS-1."""
    base = ("vanilla KD", "BERT3")
    pairs = [(row, base) for row in rows if row != base]
    steps = [(("PKD", "SPS-1"), ("PKD", "BERT3")), (("PKD", "SPS-2"), ("PKD", "SPS-1"))]
    return pairs + [p for p in steps if p[0] in rows and p[1] in rows]


PEAKD4 = Layout(
    key="peakd4", title="PEA-KD Table 4: shuffled parameter sharing (BERT3 vs SPS-1 vs SPS-2)",
    row_headers=("KD", "Student"), classify=_peakd4_row, order=(PEAKD_KD, PEAKD_STUDENTS),
    skeleton=tuple((kd, s) for kd in PEAKD_KD for s in PEAKD_STUDENTS), group_by=0, pairs=_peakd4_pairs,
    tasks=PEAKD_TASKS, metric_mode="header", avg_tasks=PEAKD_TASKS, paper_file="peakd_table4_sps.csv",
    paper_rows={"BERT3": ("PKD", "BERT3"), "SPS-1": ("PKD", "SPS-1"), "SPS-2": ("PKD", "SPS-2")},
    paper_teacher_layers=PEAKD_TEACHER_LAYERS,
    notes=(PEAKD_NOTE, "procedure task_specific; BERT3 = student=truncated, SPS-1 = student=sps, SPS-2 = "
           "student=sps2; the paper's rows are PKD"),
)


def _peakd5_row(r: dict[str, Any]) -> Labels | None:
    kd, student = kd_label(r, ("vanilla_kd", "pkd")), student_label(r)
    ptp = {"task_specific": NO_PTP, "ptp": PTP}.get(r["procedure"])
    if ptp is None or kd is None or student is None or student == "BiLSTM":
        return None
    return student, kd, ptp


def _peakd5_pairs(rows: Sequence[Labels]) -> list[Pair]:
    """Per student: with PTP vs without (same KD); PKD without and with PTP vs vanilla KD without PTP."""
    pairs: list[Pair] = []
    for student in dict.fromkeys(row[0] for row in rows):
        base = (student, "vanilla KD", NO_PTP)
        for kd in PEAKD_KD:
            pairs.append(((student, kd, PTP), (student, kd, NO_PTP)))
        pairs += [((student, "PKD", NO_PTP), base), ((student, "PKD", PTP), base)]
    return [p for p in pairs if p[0] in rows and p[1] in rows]


PEAKD5 = Layout(
    key="peakd5", title="PEA-KD Table 5: pre-training with teacher predictions (without vs with PTP)",
    row_headers=("Student", "KD", "PTP"), classify=_peakd5_row, order=(PEAKD_STUDENTS, PEAKD_KD, (NO_PTP, PTP)),
    skeleton=tuple(("SPS-2", kd, ptp) for kd in PEAKD_KD for ptp in (NO_PTP, PTP)), group_by=0,
    pairs=_peakd5_pairs, tasks=PEAKD_TASKS, metric_mode="header", avg_tasks=PEAKD_TASKS,
    paper_file="peakd_table5_ptp.csv",
    paper_rows={"PeaBERT3-p": ("SPS-2", "PKD", NO_PTP), "PeaBERT3": ("SPS-2", "PKD", PTP)},
    paper_teacher_layers=PEAKD_TEACHER_LAYERS,
    notes=(PEAKD_NOTE, "without PTP = procedure task_specific, with PTP = procedure ptp; the paper's rows are "
           "SPS-2 with PKD (PeaBERT3-p, PeaBERT3); other students are shown when the store has them"),
)


# ----------------------------------------------------------------------------- BiLSTM (Tang et al. 2019)

BILSTM_STUDENTS = ("BiLSTM", "BERT3")
BILSTM_KD = (NO_KD, "vanilla KD", "logit MSE")


def _bilstm_row(r: dict[str, Any]) -> Labels | None:
    kd, student = kd_label(r, ("vanilla_kd", "logit_mse")), student_label(r)
    if r["procedure"] not in ("task_specific", "finetune") or kd is None or student is None or "SPS" in student:
        return None
    return student, kd


def _bilstm_pairs(rows: Sequence[Labels]) -> list[Pair]:
    """Per student: logit MSE and no KD against vanilla KD."""
    pairs = [((s, kd), (s, "vanilla KD")) for s in dict.fromkeys(row[0] for row in rows) for kd in ("logit MSE", NO_KD)]
    return [p for p in pairs if p[0] in rows and p[1] in rows]


BILSTM = Layout(
    key="bilstm", title="BiLSTM vs BERT students vs the teacher (Tang et al. 2019)",
    row_headers=("Student", "KD"), classify=_bilstm_row, order=(BILSTM_STUDENTS, BILSTM_KD),
    skeleton=tuple((s, kd) for s in BILSTM_STUDENTS for kd in BILSTM_KD), group_by=0, pairs=_bilstm_pairs,
    teacher_row=True,
    notes=("no KD = procedure finetune; vanilla KD = softened KL (T 2), logit MSE = Tang's squared logit distance; "
           "BERT3 = student=truncated",),
)

LAYOUTS: dict[str, Layout] = {layout.key: layout for layout in (PEAKD4, PEAKD5, BILSTM)}
# The presets (conf/experiment/) whose report has layouts of its own, shown by `preset=<name>` with table=all.
PRESET_LAYOUTS: dict[str, tuple[str, ...]] = {
    "peakd_table4": ("peakd4",), "peakd_table5": ("peakd5",), "peakd_demo": ("peakd4", "peakd5"),
    "bilstm": ("bilstm",), "fastbert": (EARLY_EXIT,),
}
LAYOUT_CHOICES: tuple[str, ...] = (*LAYOUTS, EARLY_EXIT)

"""The decoder table's lm-eval section (report/decoder_lm_eval.py): the records' lm-eval scores, mean±std over seeds
per objective, init and data source; records without them left out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from distill_sweep.records.lm_eval_results import SAMPLES, TaskSamples, write_samples
from distill_sweep.report import decoder_lm_eval

ACC = {("fkl", 1): 0.5, ("fkl", 2): 0.75, ("fkl", 3): 0.25, ("rkl", 1): 0.4, ("rkl", 2): 0.6}


def _part(tmp_path: Path, with_block: bool = True) -> pd.DataFrame:
    rows = []
    for (objective, seed), acc in ACC.items():
        path = tmp_path / f"{objective}{seed}" / "result.json"
        path.parent.mkdir()
        block = {"lm_eval": {"scores": {"toy_instruct_choice": {"acc": acc},
                                        "toy_instruct_rouge": {"rouge_l": seed / 4}},
                             "teacher": {"scores": {"toy_instruct_choice": {"acc": 0.875}}}}} if with_block else {}
        path.write_text(json.dumps(block))
        rows.append({"setting": "s", "objective": objective, "init": "skip", "data": "fixed", "seed": seed,
                     "path": str(path)})
    return pd.DataFrame(rows)


def test_the_lm_eval_table_is_mean_and_std_over_seeds_per_task_and_metric(tmp_path: Path):
    headers, rows = decoder_lm_eval.table(_part(tmp_path), ddof=1)
    assert headers == ["objective", "init", "toy_instruct_choice: acc", "toy_instruct_rouge: rouge_l"]
    cells = {r[0]: r for r in rows}
    assert list(cells) == ["teacher", "fkl", "rkl"]  # the teacher, then fkl (the baseline objective) first
    assert cells["teacher"] == ["teacher", "", "0.875", "—"]
    assert cells["fkl"][2] == f"0.500±{np.std([0.5, 0.75, 0.25], ddof=1):.3f} (3)"  # std 0.25
    assert cells["fkl"][3] == "0.500±0.250 (3)"  # rouge_l = seed / 4: 0.25, 0.5, 0.75
    assert cells["rkl"][2] == f"0.500±{np.std([0.4, 0.6], ddof=1):.3f} (2)"


def _with_samples(tmp_path: Path, values: dict[tuple[str, int], np.ndarray], hashes: dict | None = None) -> pd.DataFrame:
    rows = []
    for (objective, seed), acc in values.items():
        out = tmp_path / f"{objective}{seed}"
        out.mkdir()
        (out / "result.json").write_text(json.dumps({"lm_eval": {"scores": {"t": {"acc": float(acc.mean())}}}}))
        docs = (hashes or {}).get((objective, seed), "h")
        write_samples(out, {"t": TaskSamples(docs, np.arange(len(acc)), {"acc": acc})})
        rows.append({"setting": "s", "objective": objective, "init": "skip", "data": "fixed", "seed": seed,
                     "path": str(out / "result.json")})
    return pd.DataFrame(rows)


def test_the_objectives_are_compared_over_seeds_and_documents(tmp_path: Path):
    rng = np.random.default_rng(0)
    values = {(o, s): (rng.random(30) < (0.8 if o == "rkl" else 0.3)).astype(float)
              for o in ("fkl", "rkl") for s in (1, 2, 3, 4)}
    # seed 4's rkl run scored other documents: its pair is left out
    rows, notes = decoder_lm_eval.comparisons(_with_samples(tmp_path, values, {("rkl", 4): "other"}))
    ((label, init, metric, seeds, docs, diff, ci, p, holm),) = rows
    assert (label, init, metric, seeds, docs) == ("rkl vs fkl", "skip", "t: acc", "3", "30")
    by_hand = np.mean([values[("rkl", s)] - values[("fkl", s)] for s in (1, 2, 3)])  # over seeds and documents
    assert diff == f"{by_hand:+.3f}"
    low, high = (float(x) for x in ci.strip("[]").split(","))
    assert low < by_hand < high and low > 0  # 0.8 vs 0.3 over 90 documents: clearly apart
    assert float(p) < 0.05 and "multi-bootstrap" in notes[0]


def test_a_damaged_samples_file_is_named_and_left_out(tmp_path: Path):
    values = {(o, s): np.array([1.0, 0.0, 1.0]) for o in ("fkl", "rkl") for s in (1, 2)}
    part = _with_samples(tmp_path, values)
    (tmp_path / "rkl2" / SAMPLES).write_bytes(b"not a zip")
    rows, notes = decoder_lm_eval.comparisons(part)
    assert rows == []  # one seed pair left: no multi-bootstrap
    assert any("rkl2" in n and "unreadable" in n for n in notes)


def test_records_without_lm_eval_scores_give_no_section(tmp_path: Path):
    assert decoder_lm_eval.table(_part(tmp_path, with_block=False), ddof=1) is None


def _sampled_part(tmp_path: Path) -> pd.DataFrame:
    """fkl: two trained models (seeds 1, 2), each sampled with 3 evaluation seeds; rkl: greedy only."""
    per_seed = {1: [0.2, 0.4, 0.6], 2: [0.5, 0.6, 0.7]}
    rows = []
    for objective, seed in (("fkl", 1), ("fkl", 2), ("rkl", 1)):
        out = tmp_path / f"s{objective}{seed}"
        out.mkdir()
        block: dict = {"scores": {"toy_instruct_choice": {"acc": 0.5}}}
        if objective == "fkl":
            block["scores"]["toy_instruct_rouge"] = {"rouge_l": float(np.mean(per_seed[seed]))}
            block["sampling"] = {"seeds": [1, 2, 3], "scores": {"toy_instruct_rouge": {"rouge_l": per_seed[seed]}}}
        (out / "result.json").write_text(json.dumps({"lm_eval": block}))
        rows.append({"setting": "s", "objective": objective, "init": "skip", "data": "fixed", "seed": seed,
                     "path": str(out / "result.json")})
    return pd.DataFrame(rows)


def test_the_sampling_spread_is_set_beside_the_training_spread(tmp_path: Path):
    part = _sampled_part(tmp_path)
    headers, rows = decoder_lm_eval.spread(part)
    assert headers[:4] == ["objective", "init", "task: metric", "mean"]
    ((objective, init, metric, mean, sd_t, sd_s, design, var_t, var_s, share),) = rows  # rkl was greedy: no row
    # worked by hand (tests/unit/analysis/test_nested_spread.py): model means 0.4, 0.6; s_T^2 = 0.02, s_S^2 = 0.025;
    # both drew with seeds 1, 2, 3 (crossed): MS_I = 0.005, var_T = 0.02 - 0.005 / 3 = 11/600, share 11/26
    assert (objective, init, metric, mean, design) == ("fkl", "skip", "toy_instruct_rouge: rouge_l", "0.500", "crossed")
    assert sd_t == f"{np.sqrt(0.02):.3f} (2)" and sd_s == f"{np.sqrt(0.025):.3f} (3)"
    assert var_t == f"{11 / 600:.2e}" and var_s == f"{0.025:.2e}" and share == f"{100 * 11 / 26:.0f}%"
    # the main table's cell: the mean ± sd over training seeds of the per-model means (the same 0.141)
    _, main = decoder_lm_eval.table(part, ddof=1)
    assert {r[0]: r for r in main}["fkl"][3] == f"0.500±{np.sqrt(0.02):.3f} (2)"
    (tmp_path / "greedy").mkdir()
    assert decoder_lm_eval.spread(_part(tmp_path / "greedy")) is None  # no run sampled: no table


def test_sampled_runs_are_compared_on_each_documents_mean_over_sampling_seeds(tmp_path: Path):
    rng = np.random.default_rng(1)
    rows = []
    means = {}
    for objective in ("fkl", "rkl"):
        for seed in (1, 2, 3):
            out = tmp_path / f"{objective}{seed}"
            out.mkdir()
            values = (rng.random((4, 20)) < (0.7 if objective == "rkl" else 0.4)).astype(float)  # 4 sampling seeds
            means[(objective, seed)] = values.mean(axis=0)
            (out / "result.json").write_text(json.dumps({"lm_eval": {"scores": {"t": {"acc": float(values.mean())}}}}))
            write_samples(out, {"t": TaskSamples("h", np.arange(20), {"acc": values}, [1, 2, 3, 4])})
            rows.append({"setting": "s", "objective": objective, "init": "skip", "data": "fixed", "seed": seed,
                         "path": str(out / "result.json")})
    got, _ = decoder_lm_eval.comparisons(pd.DataFrame(rows))
    ((label, _, metric, seeds, docs, diff, *_),) = got
    by_hand = np.mean([means[("rkl", s)] - means[("fkl", s)] for s in (1, 2, 3)])
    assert (label, metric, seeds, docs, diff) == ("rkl vs fkl", "t: acc", "3", "20", f"{by_hand:+.3f}")


def test_a_teacher_at_chance_is_flagged_as_its_students_are(tmp_path: Path):
    """toy_instruct_choice at 4 choices a document: chance 1/4. The teacher at 0.255 (within a point of it) and the
    rkl seed at 0.25 carry the mark and a note; fkl (0.5) and a teacher at 0.875 elsewhere do not."""
    rows = []
    for name, student, teacher in (("fkl1", 0.5, 0.255), ("rkl1", 0.25, 0.255)):
        path = tmp_path / name / "result.json"
        path.parent.mkdir()
        chance = {"toy_instruct_choice": {"acc": 1 / 4}}
        path.write_text(json.dumps({"lm_eval": {
            "scores": {"toy_instruct_choice": {"acc": student}}, "chance": chance,
            "teacher": {"scores": {"toy_instruct_choice": {"acc": teacher}}, "chance": chance}}}))
        rows.append({"setting": "s", "objective": name[:3], "init": "skip", "data": "fixed", "seed": 1,
                     "path": str(path)})
    part = pd.DataFrame(rows)
    _, table = decoder_lm_eval.table(part, ddof=1)
    cells = {r[0]: r[2] for r in table}
    assert cells == {"teacher": "0.255 ‡", "fkl": "0.500 (1)", "rkl": "0.250 (1) ‡"}
    notes = decoder_lm_eval.chance_notes(part)
    assert notes[0].startswith("‡ the teacher's lm-eval toy_instruct_choice: acc 0.255 is at chance (0.250")
    assert "rkl / skip / seed 1" in notes[1] and "acc 0.250 at chance (0.250)" in notes[1]
    assert len(notes) == 3  # and the rule
    # a teacher that knows the task (0.875, as the other tests' records): no mark, no note
    (tmp_path / "other").mkdir()
    _, table = decoder_lm_eval.table(_part(tmp_path / "other"), ddof=1)
    assert table[0] == ["teacher", "", "0.875", "—"]

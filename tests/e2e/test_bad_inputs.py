"""The bad-input corpus: every refused input is one line, exit code 2, named, with nothing written; every
corrupt file the tool finds is recovered.

CLI cases run `python -m distill_sweep ...` with the user's argv, two at a time, all in one module fixture
(each case is then its own test), in processes forked from an interpreter that has already imported the
package (`PreloadedPython`); the kill -9 test runs fresh interpreters. Config-only cases call
`prepare.prepare` in-process, which is what the sweeper calls for every job (the CLI calls its first half,
`job.identify`, before torch is imported).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import (
    CAUSAL_BASE,
    FAST,
    PreloadedPython,
    cli_env,
    compose_cfg,
    path_without_sbatch,
    records,
    run_cli_preloaded,
)

from distill_sweep.__main__ import check_environment, check_overrides
from distill_sweep.cli.run_job import run_job
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.records.record import RECORD, completed_record, is_complete
from distill_sweep.training.checkpoint_files import CHECKPOINT

RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"
# the tiny teacher has 64 positions; RTE's own 128 would be refused before the data is looked at
RTE_BASE = ("teacher=tiny", "logger=none", "threads=1", "task=rte", "task.max_seq_length=64")






def _snapshot(*roots: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under `roots`, and the roots themselves."""
    out: dict[str, bytes | None] = {}
    for root in roots:
        if root.exists():
            out[str(root)] = root.read_bytes() if root.is_file() else None
            for p in root.rglob("*"):
                out[str(p)] = p.read_bytes() if p.is_file() else None
    return out






# ------------------------------------------------------------------------------------- the CLI corpus
@dataclass(frozen=True)
class Refusal:
    """`python -m distill_sweep <base> <args>`: refused with one line naming each of `names`."""

    id: str
    args: tuple[str, ...]
    names: tuple[str, ...]
    base: tuple[str, ...] = tuple(FAST)
    not_named: tuple[str, ...] = ()  # what the line must NOT say (e.g. blame the hub for a local path)
    in_job: bool = False  # refused by the sweeper, job by job: "distill_sweep: error in job [...]"


@dataclass(frozen=True)
class Recovery:
    """A job run over a damaged store or cache: `damage` prepares the case's directory from the seeded one (a
    completed job and its cache), `check` judges the run."""

    id: str
    args: tuple[str, ...]
    damage: Callable[[Path, Path], None]  # (case_dir, seeded) -> None
    check: Callable[[subprocess.CompletedProcess, Path], None]


REFUSALS = [
    Refusal("epochs-word", ("epochs=abc",), ("epochs='abc'",)),
    Refusal("seed-word", ("seed=abc",), ("seed='abc'",)),
    # a sweep's schema errors are refused by the command line's check, each swept value composed once
    Refusal("seed-word-sweep", ("seed=abc", "-m"), ("seed='abc'",)),
    Refusal("one-bad-job-of-a-sweep", ("optimizer.lr=0.001,fast", "-m"), ("optimizer.lr='fast'",)),
    # a part's setting (an objective's) in a sweep: each swept value is checked before the sweep starts
    Refusal("part-setting-in-a-sweep", ("objective.alpha=0.5,7", "-m"), ("objective.alpha=7",)),
    # a layer rule on numbers the teacher's config states (teacher=tiny), each swept value before the sweep
    Refusal("layer-rule-in-a-sweep", ("init=[1,2,3],[1,2]", "-m"), ("init=[1, 2] names 2 teacher layers",)),
    # a rule on transformers' configs (the student's heads) is checked with each job, by the sweeper, naming it
    Refusal("models-rule-in-a-sweep", ("objective=vanilla_kd,att_mse", "student=fresh", "-m"),
            ("objective=att_mse", "compares attention heads one to one"), in_job=True),
    Refusal("sweep-without-m", ("optimizer.lr=0.001,fast",), ("optimizer.lr=0.001,fast", "-m")),
    Refusal("unknown-key-plus", ("+epoch=3",), ("epoch:", "unknown top-level key")),
    Refusal("unknown-key", ("epoch=3",), ("'epoch'", "+epoch=3")),
    Refusal("override-grammar", ("epochs=[1",), ("epochs=[1",)),
    # where quoting would not help, the line says what would (it used to advise quoting)
    Refusal("space-before-equals", ("epochs =1",), ("a space around '='", "write epochs=1"), not_named=("quote",)),
    Refusal("full-width-digit", ("epochs=１",), ("not an ASCII digit", "write epochs=1"), not_named=("quote",)),
    # oc.env gives text: the line says how to read it as a number
    Refusal("env-text-for-a-number", ("seed=${oc.env:HOME}",), ("expected an integer", "${oc.decode:${oc.env:HOME}}")),
    Refusal("unknown-launcher", ("hydra/launcher=nosuch",), ("hydra/launcher/nosuch", "slurm")),
    Refusal("dry-run-without-m", ("+dry_run=true",), ("dry_run", "-m")),
    Refusal("train-tsv-binary", ("task.data_dir=DATA/binary",), ("DATA/binary/RTE/train.tsv", "binary"),
            base=RTE_BASE),
    Refusal("train-tsv-missing-column", ("task.data_dir=DATA/nocol",),
            ("DATA/nocol/RTE/train.tsv", "missing column 'sentence2'"), base=RTE_BASE),
    # a bad row far from the header: read before any work, not a failed record
    Refusal("train-tsv-bad-label-deep", ("task.data_dir=DATA/badlabel",),
            ("DATA/badlabel/RTE/train.tsv:52", "unknown label 'maybe'"), base=RTE_BASE),
    Refusal("results-dir-under-a-file", ("results_dir=CASE/afile/sub",), ("results_dir=", "afile is not a directory")),
    # round two: values a library refused only after the teacher was fine-tuned; a directory nothing can create
    Refusal("negative-seed", ("seed=-1",), ("seed=-1", ">= 0")),
    Refusal("seed-past-numpy", ("teacher.finetune.seed=4294967296",), ("teacher.finetune.seed=4294967296", "< 4294967296")),
    Refusal("negative-subset-seed", ("task.subset_seed=-3",), ("task.subset_seed=-3",)),
    # an empty directory would be the launch directory (an empty $DISTILL_SWEEP_CACHE did that to the cache)
    Refusal("empty-results-dir", ("results_dir=",), ("results_dir is empty",)),
    Refusal("empty-cache-dir", ("cache_dir=' '",), ("cache_dir is empty",)),
    Refusal("results-dir-in-proc", ("results_dir=/proc/distill_sweep/r",), ("results_dir=", "cannot create directories in /proc")),
    Refusal("adam-eps-that-underflows", ("optimizer.eps=1e-300",), ("optimizer.eps=1e-300", ">= 1e-12")),
    # finite values that overflowed the loss or the weights at step 1-2, after a record: now refused up front
    Refusal("temperature-that-overflows", ("objective.temperature=1e-300",), ("objective.temperature=1e-300", ">= 0.001")),
    Refusal("temperature-too-high", ("objective.temperature=1e300",), ("objective.temperature=1e+300", "<= 1000.0")),
    Refusal("lr-that-overflows", ("optimizer.lr=1e30",), ("optimizer.lr=1e+30", "<= 1.0")),
    # a generation setting typed where no job generates (a preset's own stay quiet: they serve its generating rows)
    Refusal("generation-key-unread", ("procedure.generation.temperature=0.7",),
            ("procedure.generation.temperature=0.7 is not read", "procedure.on_policy > 0"), base=tuple(CAUSAL_BASE)),
    Refusal("term-weight-that-overflows", ("objective=hid_seq", "objective.terms.hid_seq.weight=1e308"),
            ("objective.terms.hid_seq.weight=1e+308", "<= 1000000.0")),
    # a chosen part the procedure would not read: one job is refused (a sweep's cross product runs it once)
    Refusal("objective-under-finetune", ("procedure=finetune", "objective=att_mse"),
            ("objective=att_mse is ignored", "procedure=finetune does not distil")),
    Refusal("student-under-fastbert", ("procedure=fastbert", "student=bilstm"),
            ("student=bilstm is ignored", "procedure=fastbert trains no student")),
    Refusal("corpus-under-a-task-procedure", ("+corpus=toy",), ("corpus=toy is ignored", "reads the task")),
    Refusal("slurm-without-sbatch", ("hydra/launcher=slurm", "-m"), ("hydra/launcher=slurm", "sbatch")),
    Refusal("finetuned-path-missing", ("teacher.finetuned_path=/nonexistent/x",),
            ("teacher.finetuned_path='/nonexistent/x'", "no such directory"), not_named=("hub",)),
]


def _damage_record(case: Path, seeded: Path) -> None:
    """A completed job whose result.json was cut short (a full disk): the sweeper must run it again."""
    shutil.copytree(seeded / "results", case / "results")
    shutil.copytree(seeded / "cache", case / "cache")
    (record,) = (case / "results").rglob(RECORD)
    record.write_bytes(record.read_bytes()[:100])


def _check_record(proc: subprocess.CompletedProcess, case: Path) -> None:
    assert "1 jobs in the grid, 0 already completed, 1 to run" in proc.stdout
    (record,) = records(case / "results")
    assert record["status"] == "completed" and is_complete(record)


def _damage_checkpoint(case: Path, seeded: Path) -> None:
    """Garbage where the job's checkpoint.pt would be: moved aside, the job starts over and completes."""
    shutil.copytree(seeded / "cache", case / "cache")
    job = identify(compose_cfg([*FAST, f"results_dir={case / 'results'}", f"cache_dir={case / 'cache'}"]))
    job.out_dir.mkdir(parents=True)
    (job.out_dir / CHECKPOINT).write_bytes(b"\x80\x02not a checkpoint" * 64)


def _check_checkpoint(proc: subprocess.CompletedProcess, case: Path) -> None:
    (record,) = records(case / "results")
    assert record["status"] == "completed"
    (aside,) = (case / "results").rglob(f"{CHECKPOINT}.corrupt-*")
    assert aside.read_bytes() == b"\x80\x02not a checkpoint" * 64
    assert str(aside) in proc.stdout + proc.stderr  # the warning names where it went


def _damage_teacher(case: Path, seeded: Path) -> None:
    """The cached teacher's weights truncated: the entry is set aside and the teacher fine-tuned again."""
    shutil.copytree(seeded / "cache", case / "cache")
    (weights,) = (case / "cache" / "teachers").rglob("model.safetensors")
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _check_teacher(proc: subprocess.CompletedProcess, case: Path) -> None:
    (record,) = records(case / "results")
    assert record["status"] == "completed" and record["teacher"]["source"] == "trained"
    (aside,) = (case / "cache" / "teachers" / "toy").glob("*.corrupt-*")
    assert (aside / "model.safetensors").exists() and "model.safetensors unreadable" in proc.stdout + proc.stderr
    assert (Path(record["teacher"]["path"]) / "teacher.json").exists()


def _damage_tokenized(case: Path, seeded: Path) -> None:
    """The cached tokenised training split cut short (a partial copy): set aside and tokenised again."""
    shutil.copytree(seeded / "cache", case / "cache")
    (split,) = (case / "cache" / "tokenized").glob("toy-train-*.arrow")
    split.write_bytes(split.read_bytes()[:3000])


def _check_tokenized(proc: subprocess.CompletedProcess, case: Path) -> None:
    (record,) = records(case / "results")
    assert record["status"] == "completed"
    (aside,) = (case / "cache" / "tokenized").glob("toy-train-*.arrow.corrupt-*")
    assert aside.stat().st_size == 3000 and str(aside) in proc.stdout + proc.stderr


def _damage_tokenizer(case: Path, seeded: Path) -> None:
    """The cached toy tokenizer's tokenizer.json cut short: set aside and built again."""
    shutil.copytree(seeded / "cache", case / "cache")
    (saved,) = (case / "cache").glob("toy_tokenizer-*/tokenizer.json")
    saved.write_text('{"trunc')


def _check_tokenizer(proc: subprocess.CompletedProcess, case: Path) -> None:
    (record,) = records(case / "results")
    assert record["status"] == "completed"
    (aside,) = (case / "cache").glob("toy_tokenizer-*.corrupt-*")
    assert (aside / "tokenizer.json").read_text() == '{"trunc' and str(aside) in proc.stdout + proc.stderr


RECOVERIES = [
    Recovery("truncated-record", ("-m",), _damage_record, _check_record),
    Recovery("truncated-tokenized-split", (), _damage_tokenized, _check_tokenized),
    Recovery("truncated-cached-tokenizer", (), _damage_tokenizer, _check_tokenizer),
    Recovery("garbage-checkpoint", (), _damage_checkpoint, _check_checkpoint),
    Recovery("truncated-cached-teacher", (), _damage_teacher, _check_teacher),
]


@dataclass
class Ran:
    proc: subprocess.CompletedProcess
    case_dir: Path
    before: dict[str, bytes | None] = field(default_factory=dict)
    after: dict[str, bytes | None] = field(default_factory=dict)


def _data_dirs(root: Path) -> None:
    dev = RTE_HEADER + "0\ta\tb\tentailment\n1\tc\td\tnot_entailment\n"
    nocol = b"index\tsentence1\tlabel\n0\ta\tentailment\n"
    badlabel = (RTE_HEADER + "0\ta\tb\tentailment\n" * 50 + "1\ta\tb\tmaybe\n").encode()
    for name, train in (("binary", os.urandom(64) + b"\x00" * 64), ("nocol", nocol), ("badlabel", badlabel)):
        (root / name / "RTE").mkdir(parents=True)
        (root / name / "RTE" / "train.tsv").write_bytes(train)
        (root / name / "RTE" / "dev.tsv").write_text(dev)


def _refusal_setup(case: Refusal, root: Path) -> tuple[list[str], Path, dict[str, bytes | None]]:
    """The case's command line and directory, and what its store, cache and file in the way hold before."""
    case_dir = root / case.id
    case_dir.mkdir()
    (case_dir / "afile").write_text("a regular file\n")
    args = [a.replace("DATA/", f"{root / 'data'}/").replace("CASE/", f"{case_dir}/") for a in (*case.base, *case.args)]
    # a store and a cache that already hold something: they must come out byte-identical
    for key in ("results_dir", "cache_dir"):
        if not any(a.startswith(f"{key}=") for a in args):
            (case_dir / key).mkdir()
            (case_dir / key / "keep.txt").write_text(case.id)
            args.append(f"{key}={case_dir / key}")
    return ["-m", "distill_sweep", *args], case_dir, _refusal_snapshot(case_dir)


def _refusal_snapshot(case_dir: Path) -> dict[str, bytes | None]:
    return _snapshot(case_dir / "results_dir", case_dir / "cache_dir", case_dir / "afile")


def _recovery_setup(case: Recovery, root: Path, seeded: Path) -> tuple[list[str], Path]:
    case_dir = root / case.id
    case_dir.mkdir()
    case.damage(case_dir, seeded)
    args = [*FAST, *case.args, f"results_dir={case_dir / 'results'}", f"cache_dir={case_dir / 'cache'}"]
    return ["-m", "distill_sweep", *args], case_dir


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ran]:
    """Every CLI case of this module, two at a time, the recoveries (real jobs) first."""
    root = tmp_path_factory.mktemp("bad_inputs")
    with PreloadedPython(root / "logs", {"PATH": path_without_sbatch(root)}) as python:  # no sbatch: as on a laptop
        _data_dirs(root / "data")
        seeded = root / "seeded"  # one completed job and its fine-tuned teacher, copied by the recovery cases
        run_job(compose_cfg([*FAST, f"results_dir={seeded / 'results'}", f"cache_dir={seeded / 'cache'}"]))
        recoveries = {c.id: _recovery_setup(c, root, seeded) for c in RECOVERIES}
        refusals = {c.id: _refusal_setup(c, root) for c in REFUSALS}
        requests = [*recoveries.values(), *((argv, cwd) for argv, cwd, _ in refusals.values())]
        finished = iter(proc for proc, _ in python.run(requests))
    ran = {case_id: Ran(next(finished), cwd) for case_id, (_, cwd) in recoveries.items()}
    for case_id, (_, cwd, before) in refusals.items():
        ran[case_id] = Ran(next(finished), cwd, before, _refusal_snapshot(cwd))
    return ran


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.id)
def test_refused_on_the_command_line(case: Refusal, cli_runs: dict[str, Ran]) -> None:
    ran = cli_runs[case.id]
    proc = ran.proc
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, f"rc {proc.returncode}\n{proc.stderr[-3000:]}"
    line = lines[0].replace(f"{ran.case_dir.parent / 'data'}/", "DATA/")
    prefix = "distill_sweep: error in job [" if case.in_job else "distill_sweep: error: "
    assert line.startswith(prefix), line
    for name in case.names:
        assert name in line, f"{name!r} not in: {line}"
    for word in case.not_named:
        assert word not in line, line
    assert "Traceback" not in proc.stdout
    assert ran.after == ran.before  # the store, the cache and the file in the way: untouched
    assert not (ran.case_dir / "afile" / "sub").exists()


@pytest.mark.parametrize("case", RECOVERIES, ids=lambda c: c.id)
def test_corrupt_file_is_recovered(case: Recovery, cli_runs: dict[str, Ran]) -> None:
    ran = cli_runs[case.id]
    assert ran.proc.returncode == 0, ran.proc.stderr[-3000:]
    case.check(ran.proc, ran.case_dir)


# ------------------------------------------------------------------------------ config-only, in-process
IN_PROCESS = [
    # (overrides, what the line names); TMP/ is the test's directory, holding a regular file `afile`
    (["epochs=0"], ["epochs=0"]),
    (["epochs=-1"], ["epochs=-1"]),
    (["max_steps_per_epoch=-5"], ["max_steps_per_epoch=-5"]),
    (["objective.alpha=2"], ["objective.alpha=2"]),
    (["optimizer.lr=fast"], ["optimizer.lr='fast'"]),
    (["init=[1,2,3.5]"], ["init", "3.5"]),
    (["cache_dir=TMP/afile/sub"], ["cache_dir=", "afile is not a directory"]),
    (["precision=fp16"], ["precision='fp16'"]),
    # a GQA teacher whose heads do not share its key/value heads evenly: a shape error in the first forward
    (["procedure=causal_lm", "teacher=tiny_llama", "objective=fkl", "teacher.config.num_key_value_heads=3"],
     ["num_attention_heads=4 is not a multiple of its num_key_value_heads=3"]),
    # a student tokenizer directory with no tokenizer in it: transformers' 47-line ValueError
    (["procedure=causal_lm", "teacher=tiny_llama", "objective=fkl", "student=fresh", "optimizer.batch_size=null",
      "student.tokenizer=TMP/."],
     ["student.tokenizer=", "the directory holds no tokenizer"]),
    # transformers refused it only when the model was built, in a 55-line traceback
    (["teacher.attn_implementation=flash_bogus"], ["teacher.attn_implementation='flash_bogus'", "sdpa"]),
    (["batching=sorted"], ["batching='sorted'"]),
    (["teacher_outputs=cached"], ["teacher_outputs='cached'"]),
    (["task.augment={name: tang, samples: 0}"], ["task.augment.samples=0"]),
    (["task.augment={name: tinybert, p: 0}"], ["task.augment.p=0"]),
    (["device=tpu"], ["device='tpu'"]),
    (["optimizer.betas=[0.9]"], ["optimizer.betas"]),
    (["optimizer.betas=[0.9,1.5]"], ["optimizer.betas"]),
    (["optimizer.warmup_ratio=1.5"], ["optimizer.warmup_ratio=1.5"]),
    (["optimizer.lr=nan"], ["optimizer.lr=nan"]),
    (["seed=1.5"], ["seed=1.5"]),
    (["task.max_seq_length=100000"], ["task.max_seq_length=100000", "max_position_embeddings"]),
    (["checkpoint.every_steps=-1"], ["checkpoint.every_steps=-1"]),
    (["guards.teacher_margin=-0.1"], ["guards.teacher_margin"]),
    (["logger.mode=sometimes"], ["logger.mode='sometimes'"]),
    (["teacher.finetune.epochs=0"], ["teacher.finetune.epochs=0"]),
    (["task.max_train_samples=0"], ["task.max_train_samples=0"]),
    (["+dry_run=maybe"], ["dry_run='maybe'"]),
    (["init=[1,2,true]"], ["init", "True"]),
    (["init=[1,2]"], ["init=[1, 2]", "student.num_layers"]),
    (["init=[0,1,2]"], ["init layer 0"]),
    (["init=7"], ["init='7'"]),
    (["student.num_layers=0"], ["student.num_layers=0"]),
    (["student.num_layers=7"], ["student.num_layers=7", "deeper than the teacher"]),
    (["+student.foo=1"], ["student.foo"]),
    (["student=fresh", "student.hidden_size=100", "student.num_attention_heads=3"],
     ["student.hidden_size=100", "student.num_attention_heads=3"]),
    (["student=fresh", "init=2"], ["init=2", "student=fresh"]),
    (["student=tinybert4", "objective=att_kl"], ["att_kl", "12 heads"]),
    (["student=pretrained"], ["student.name_or_path"]),
    (["student=bilstm", "objective=att_kl"], ["objective=att_kl", "student=bilstm", "logit_mse"]),
    (["student=bilstm", "objective=pkd"], ["objective=pkd", "pkd_cls", "student=bilstm"]),
    (["student=bilstm", "init=3"], ["init=3", "student=bilstm"]),
    (["student=bilstm", "procedure=ptp"], ["student=bilstm", "procedure=ptp"]),
    (["student=bilstm", "student.embeddings=TMP/nofile.txt"], ["student.embeddings=", "nofile.txt"]),
    (["objective.kd_loss=huber"], ["objective.kd_loss='huber'"]),
    (["objective=hid_cls_contrast", "objective.terms.hid_cls_contrast.num_negatives=-1"],
     ["objective.terms.hid_cls_contrast.num_negatives=-1"]),
    (["objective=hid_cls_contrast", "objective.terms.hid_cls_contrast.loss=bogus"],
     ["objective.terms.hid_cls_contrast.loss='bogus'"]),
    (["objective=hid_cls", "objective.terms.hid_cls.weight=heavy"], ["objective.terms.hid_cls.weight='heavy'"]),
    (["+objective.terms.nosuch.weight=1"], ["objective.terms", "'nosuch'"]),
    (["objective.stages=[bogus]"], ["objective.stages", "'bogus'"]),
    (["objective.temperature=0"], ["objective.temperature=0"]),
    (["objective=hid_cls", "map=[1,2,99]"], ["map", "99"]),
    (["objective=hid_cls", "map=sideways"], ["map='sideways'"]),
    (["objective=hid_cls", "map=[[1,2,3]]"], ["map pairs", "[1, 2, 3]"]),
    (["objective=hid_cls", "map=[[1,2],[1,3]]"], ["map=", "student layer twice"]),
    (["teacher.config.num_attention_heads=5"],
     ["teacher.config.hidden_size=64", "teacher.config.num_attention_heads=5"]),
    (["teacher.config.num_hidden_layers=abc"], ["teacher.config", "num_hidden_layers"]),
    (["teacher.config.hidden_size=-1"], ["teacher.config.hidden_size=-1"]),
    (["teacher.config.model_type=nosuch"], ["teacher.config.model_type='nosuch'"]),
    (["+teacher.config.hiden_size=64"], ["teacher.config.hiden_size"]),
    (["teacher.tokenizer=null"], ["teacher.tokenizer"]),
    (["teacher.tokenizer=/nonexistent/tok"], ["teacher.tokenizer='/nonexistent/tok'", "no such directory"]),
]


@pytest.mark.parametrize(("overrides", "names"), IN_PROCESS, ids=[" ".join(o) for o, _ in IN_PROCESS])
def test_refused_before_anything_is_written(overrides: list[str], names: list[str], tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("a regular file\n")
    overrides = [o.replace("TMP/", f"{tmp_path}/") for o in overrides]
    cfg = compose_cfg([*FAST, f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}", *overrides])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)
    line = str(err.value)
    assert "\n" not in line and all(name in line for name in names), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing created


def test_only_a_launch_needs_sbatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert "no SLURM on this host" in check_environment(["hydra/launcher=slurm", "-m"])
    printing = (["--cfg", "hydra", "-p", "hydra.launcher"], ["--help"], ["-m", "+dry_run=true"], ["-m", "++dry_run=True"])
    for flags in printing:
        assert check_environment(["hydra/launcher=slurm", *flags]) is None, flags


def test_a_sweep_over_hydras_own_settings_is_one_line() -> None:
    line = check_overrides(["experiment=demo", "hydra.sweeper.params.seed=1,2,3,4", "-m"])
    assert line == ("hydra.sweeper.params.seed=1,2,3,4: Hydra's own settings cannot be swept; to set a sweep axis, "
                    "quote the list: hydra.sweeper.params.seed='1,2,3,4'")
    assert check_overrides(["experiment=demo", "hydra.sweeper.params.seed='1,2,3,4'", "-m"]) is None


def test_a_local_directory_that_is_not_a_model_is_not_blamed_on_the_hub(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for overrides, key in ((["teacher.name_or_path=EMPTY"], "teacher.name_or_path"),
                           (["teacher.finetuned_path=EMPTY"], "teacher.finetuned_path"),
                           (["student=pretrained", "student.name_or_path=EMPTY"], "student.name_or_path")):
        args = [o.replace("EMPTY", str(empty)) for o in overrides]
        cfg = compose_cfg([*FAST, *args, f"results_dir={tmp_path / 'r'}"])
        with pytest.raises(ConfigError) as err:
            prepare(cfg)
        line = str(err.value)
        assert line.startswith(f"{key}={str(empty)!r}: cannot load a model") and "hub" not in line, line


def test_a_given_fine_tuned_teacher_is_described_by_its_own_config(tmp_path: Path) -> None:
    """teacher=tiny builds its architecture from `teacher.config`, but a given fine-tuned teacher is what runs."""
    from transformers import BertConfig

    other = tmp_path / "teacher"
    BertConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64, vocab_size=100, num_labels=3).save_pretrained(other)
    job = prepare(compose_cfg([*FAST, f"teacher.finetuned_path={other}", f"results_dir={tmp_path / 'r'}"]))
    assert (job.teacher_info.num_layers, job.teacher_info.hidden_size) == (4, 32)


@pytest.mark.parametrize(("files", "names"), [
    ({"train.tsv": b""}, ["train.tsv", "empty file"]),
    ({"train.tsv": "index\tsentence1\tsentence2\tlabel\n".encode("utf-16")}, ["train.tsv", "binary"]),
    ({"train.tsv": "index\tsentence1\tcaf\xe9\tlabel\n".encode("latin-1")}, ["train.tsv", "not UTF-8"]),
    ({"train.tsv": b"index,sentence1,sentence2,label\n"}, ["train.tsv", "comma-separated?"]),
    ({"dev.tsv": None}, ["dev.tsv not found"]),
    (None, ["task.data_dir=", "is not a directory"]),
    # every row is read before the job starts: a bad label or too many malformed rows deep in a file
    ({"train.tsv": (RTE_HEADER + "".join(f"{i}\ta\tb\tentailment\n" for i in range(150)) + "150\ta\tb\tmaybe\n"
                    ).encode()}, ["train.tsv:152", "unknown label 'maybe'"]),
    ({"dev.tsv": (RTE_HEADER + "0\ta\tb\tentailment\n" * 10 + "1\ta\tentailment\n" * 10).encode()},
     ["dev.tsv", "10/20 rows have the wrong number of fields (first at line 12)"]),
], ids=["empty", "utf-16", "latin-1-header", "comma-separated", "dev-missing", "no-data-dir", "bad-label-deep",
        "malformed-rows"])
def test_data_files_are_checked_before_the_job_starts(files: dict[str, bytes | None] | None, names: list[str],
                                                      tmp_path: Path) -> None:
    """`files`: what replaces a valid RTE train.tsv / dev.tsv (None: the file is missing); None: no data_dir."""
    rte = tmp_path / "glue" / "RTE"
    for name in ("train.tsv", "dev.tsv") if files is not None else ():
        rte.mkdir(parents=True, exist_ok=True)
        content = files.get(name, (RTE_HEADER + "0\ta\tb\tentailment\n").encode())
        if content is not None:
            (rte / name).write_bytes(content)
    cfg = compose_cfg([*RTE_BASE, f"task.data_dir={tmp_path / 'glue'}", f"results_dir={tmp_path / 'r'}",
                       f"cache_dir={tmp_path / 'c'}"])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)
    line = str(err.value)
    assert "\n" not in line and all(name in line for name in names), line
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


# --------------------------------------------------------------------------- records that are not dicts
def test_a_binary_record_is_read_as_no_record(tmp_path: Path) -> None:
    (tmp_path / RECORD).write_bytes(b"\x00\xff\xfe garbage")
    assert completed_record(tmp_path) is None


def test_a_record_that_is_not_an_object_is_run_again(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "max_steps_per_epoch=2", f"results_dir={tmp_path}", f"cache_dir={shared_cache}"])
    out = identify(cfg).out_dir
    out.mkdir(parents=True)
    (out / RECORD).write_text("[1, 2]")
    assert run_job(cfg)["status"] == "completed"


# ------------------------------------------------------------------------------ kill -9, then corruption
def test_killed_job_with_a_corrupted_checkpoint_completes_on_rerun(tmp_path: Path, shared_cache: Path) -> None:
    """kill -9 mid-stage, the last checkpoint then cut in half (a crash while the disk filled): the same
    command completes, keeps the damaged file as checkpoint.pt.corrupt-*, and says so."""
    out = tmp_path / "results"
    # 2 stages x 3 epochs x 4 steps, a checkpoint at each: the kill lands at the first, 23 steps before the end
    args = [*FAST, "objective=hid_seq", "epochs=3", "max_steps_per_epoch=4", "checkpoint.every_steps=1",
            f"results_dir={out}", f"cache_dir={shared_cache}"]
    run_job(compose_cfg([*FAST, "objective=hid_seq", "max_steps_per_epoch=1", f"results_dir={tmp_path / 'warm'}",
                         f"cache_dir={shared_cache}"]))  # the teacher is cached: the kill lands in the student
    job_dir = identify(compose_cfg(args)).out_dir
    proc = subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=cli_env())
    try:
        deadline = time.monotonic() + 300
        while not (job_dir / CHECKPOINT).exists():
            assert proc.poll() is None, "the job ended before it could be killed"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (record,) = records(out)
    assert record["status"] == "running"  # killed: nothing claims it finished
    ckpt = job_dir / CHECKPOINT
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    damaged = ckpt.read_bytes()

    rerun = subprocess.run([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600, env=cli_env())
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    (record,) = records(out)
    assert record["status"] == "completed" and record["attempts"] == 2
    (aside,) = job_dir.glob(f"{CHECKPOINT}.corrupt-*")
    assert aside.read_bytes() == damaged
    output = rerun.stdout + rerun.stderr
    assert f"unreadable checkpoint {ckpt}" in output and str(aside) in output


@pytest.mark.parametrize(("files", "names"), [
    ({"experiment/broken.yaml": "# @package _global_\nepochs: [1\n"},
     ["broken.yaml, line 3, column 1: not valid YAML", "expected ',' or ']'"]),
    ({}, ["config directory", "not a directory"]),
    # no package line: the preset's keys were composed under `experiment.` and ignored (seed: 5 ran at seed 1)
    ({"experiment/broken.yaml": "seed: 5\nepochs: 2\n"},
     ["composed as experiment.epochs, experiment.seed", "`# @package _global_`"]),
    # a file at the path of one of conf/'s: conf/ is read first, and yours was ignored
    ({"experiment/broken.yaml": "# @package _global_\nepochs: 2\n", "optimizer/adamw.yaml": "lr: 0.5\n"},
     ["optimizer/adamw.yaml: conf/optimizer/adamw.yaml has its name and is read instead", "would be ignored"]),
])
def test_the_users_config_dir_is_checked_in_one_line(files: dict[str, str], names: list[str], tmp_path: Path) -> None:
    """A YAML syntax error in the user's own config file was a 95-line traceback; a missing --config-dir was
    taken for an unknown option."""
    own = tmp_path / "conf"
    for name, text in files.items():
        (own / name).parent.mkdir(parents=True, exist_ok=True)
        (own / name).write_text(text)
    proc = run_cli_preloaded(["--config-dir", str(own), "experiment=broken", *FAST, f"results_dir={tmp_path / 'r'}"],
                   cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    for name in names:
        assert name in proc.stderr
    assert not (tmp_path / "r").exists()

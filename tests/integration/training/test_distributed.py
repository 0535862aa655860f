"""Several processes with torch.distributed (gloo ranks on CPU): task_agnostic on 2 ranks, its student sharded by
FSDP2, is the 1-process job within float tolerance; its checkpoints resume under another number of processes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import run_cli_preloaded
from safetensors.torch import load_file

from distill_sweep.training import distributed
from distill_sweep.training.checkpoint_files import CHECKPOINT

# the default dropout (0.1): its masks are drawn per row of the global batch (training/row_dropout.py), so the 2
# ranks draw the 1-process run's
AGNOSTIC = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1", "corpus.num_documents=100",
            "corpus.dev_documents=20", "procedure.epochs=1", "procedure.global_batch=16", "procedure.micro_batch=8",
            "guards.allow_weak_teacher=true"]  # the tiny random teacher
ENV = {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_cmd(args: list[str], ranks: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}", f"--master_port={_free_port()}",
            "-m", "distill_sweep", *args]


def _torchrun(args: list[str], cwd: Path, ranks: int = 2) -> subprocess.CompletedProcess:
    return subprocess.run(_torchrun_cmd(args, ranks), cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **ENV})


def _record(results: Path) -> dict:
    (path,) = results.rglob("result.json")
    return json.loads(path.read_text())


def _student(record: dict) -> dict[str, torch.Tensor]:
    (weights,) = Path(record["student_dir"]).glob("*.safetensors")
    return load_file(weights)


# FSDP reduce-scatters in its own order: equal to one process within this (test_fsdp.py's; measured: 0 here, the
# 2 ranks' sums of 2 terms being one process's)
REL = 1e-5


def _one(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_cli_preloaded(args, cwd, env=ENV)


def _same_within(a: dict, b: dict) -> None:
    """Two records' epochs: the same steps, losses (per term too) and dev metrics within REL."""
    assert len(a["epochs"]) == len(b["epochs"]) > 0
    for x, y in zip(a["epochs"], b["epochs"], strict=True):
        assert (x["stage"], x["epoch"], x["step"]) == (y["stage"], y["epoch"], y["step"])
        losses = [k for k in x if k == "train_loss" or k.startswith("loss_")]
        assert losses and {k: y[k] for k in losses} == pytest.approx({k: x[k] for k in losses}, rel=REL)
        assert y["dev"] == pytest.approx(x["dev"], rel=REL, abs=1e-6)


def _same_student(a: dict, b: dict) -> None:
    sa, sb = _student(a), _student(b)
    assert sa.keys() == sb.keys()  # a tied weight once (BERT's MLM decoder is its word embeddings), as one process
    assert max(float((sa[k] - sb[k]).abs().max()) for k in sa) < 1e-5


def test_two_sharded_ranks_train_the_student_one_process_trains(tmp_path: Path) -> None:
    # DistilBERT's loss: a hidden-state term, and the KD on the MLM heads, applied outside the models' forwards to
    # the masked positions (the student's head in its root unit, the sharded teacher's gathered for it)
    common = [*AGNOSTIC, "objective=distilbert", f"cache_dir={tmp_path / 'cache'}"]
    one = _one([*common, f"results_dir={tmp_path / 'one'}"], tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    two = _torchrun([*common, "fsdp.teacher=shard", f"results_dir={tmp_path / 'two'}"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = _record(tmp_path / "one"), _record(tmp_path / "two")  # one record: only rank 0 writes
    assert (a["task_agnostic"]["ranks"], a["task_agnostic"]["accumulation_steps"]) == (1, 2)
    assert (b["task_agnostic"]["ranks"], b["task_agnostic"]["accumulation_steps"]) == (2, 1)
    assert a["task_agnostic"]["steps"] == b["task_agnostic"]["steps"] > 1
    # the student sharded (its blocks, then the root: embeddings and MLM head, tied), the teacher too
    assert "fsdp" not in a and b["fsdp"] == {
        "ranks": 2, "student_units": b["student"]["num_layers"] + 1, "teacher": "shard",
        "student_resharded_after_forward": True, "param_dtype": "float32", "reduce_dtype": "float32"}
    # the same global batches and micro-batches: every epoch's losses (per term too), dev metrics and padding
    _same_within(a, b)
    assert [e["padding"] for e in a["epochs"]] == [e["padding"] for e in b["epochs"]]  # summed over ranks
    # the saved student (gathered from the shards onto rank 0): one process's weights, under the same names
    _same_student(a, b)


# ~60 updates in 2 epochs, a checkpoint every 4 (the kill lands mid-epoch 1), a log line per step (which steps ran)
KILLABLE = [*(a for a in AGNOSTIC if a.split("=")[0] not in ("corpus.num_documents", "procedure.epochs")),
            "corpus.num_documents=200", "procedure.epochs=2", "objective=vanilla_kd", "checkpoint.every_steps=4",
            "log_every=1"]


@pytest.fixture(scope="module")
def killable_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root where one process ran KILLABLE uninterrupted (root/one), its corpus cache in root/cache."""
    root = tmp_path_factory.mktemp("agnostic")
    one = _one([*KILLABLE, f"cache_dir={root / 'cache'}", f"results_dir={root / 'one'}"], root)
    assert one.returncode == 0, one.stderr[-2000:]
    return root


def _process_tree(root: int) -> list[int]:
    """`root` and every process below it (/proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_tree(root: int) -> None:
    """SIGKILL `root` and everything below it, as a lost node would: torchrun starts each rank in a session of
    its own, so the tree is frozen first (SIGSTOP), then every process group in it is killed."""
    tree = [pid for pid in _process_tree(root) if _alive(pid)]
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    for group in {os.getpgid(pid) for pid in tree if _alive(pid)}:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in tree):
        assert time.monotonic() < deadline, [pid for pid in tree if _alive(pid)]
        time.sleep(0.05)


def _steps_run(output: str) -> set[tuple[int, int]]:
    """(epoch, step) of every update a run logged (log_every=1; rank 0 alone logs them)."""
    return {(int(e), int(s)) for e, s in re.findall(r"pretrain epoch (\d+) step (\d+)/\d+ loss", output)}


def _killed_after_a_checkpoint(cmd: list[str], out: Path, cwd: Path) -> tuple[dict, str]:
    """Start `cmd`, SIGKILL its whole tree once a step checkpoint is committed (mid-step: no signal handler, no
    `finally` runs); returns the checkpoint's content and what the run printed."""
    run = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, **ENV}, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(out.rglob(CHECKPOINT)):  # written by an atomic rename: there, it is whole
            assert run.poll() is None, f"the job ended before it could be killed:\n{run.communicate()[0][-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.02)
        _kill_tree(run.pid)
        killed_output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            _kill_tree(run.pid)
            run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL
    (ckpt,) = out.rglob(CHECKPOINT)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    at = state["position"]
    assert at["stage"] == 0 and at["step"] > 0, at  # killed mid-epoch, after at least one step checkpoint
    assert _record(out)["status"] == "running"  # what the kill left: a record of a job that never ended
    assert (at["epoch"], at["step"]) in _steps_run(killed_output)
    return state, killed_output


def _resumed_to_the_end(again: subprocess.CompletedProcess, at: dict, out: Path, reference: dict, ranks: int
                        ) -> None:
    """`again` resumed from the checkpoint at `at` on every rank, ran only the updates after it and ended with the
    uninterrupted job's record and student within REL."""
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    output = again.stdout + again.stderr
    resumed_at = re.findall(r"resuming from \S+ at pretrain epoch (\d+) step (\d+)", output)
    assert resumed_at == [(str(at["epoch"]), str(at["step"]))] * ranks, resumed_at  # each rank says where it resumed
    steps_per_epoch = reference["epochs"][0]["step"]
    expected = {(e, s) for e in range(at["epoch"], 3) for s in range(1, steps_per_epoch + 1)
                if (e, s) > (at["epoch"], at["step"])}
    assert _steps_run(output) == expected
    # one record, completed; nothing left behind: no checkpoint, no shard directory, no temp file of a cut-short write
    record = _record(out)
    assert record["status"] == "completed" and record["task_agnostic"]["ranks"] == ranks
    assert (record["attempts"], record["resumed"]) == (2, 1)
    left = [p.name for p in out.rglob("*")
            if p.name == CHECKPOINT or ".shards-" in p.name or p.suffix == ".tmp" or ".corrupt-" in p.name]
    assert not left, left
    _same_within(reference, record)
    _same_student(reference, record)


def test_two_sharded_ranks_killed_with_sigkill_resume_in_one_process(tmp_path: Path, killable_one: Path) -> None:
    common = [*KILLABLE, f"cache_dir={killable_one / 'cache'}"]
    out = tmp_path / "two"
    state, _ = _killed_after_a_checkpoint(_torchrun_cmd([*common, f"results_dir={out}"]), out, tmp_path)
    assert state["shards"]  # each rank wrote its shards; one process reads them whole
    again = _one([*common, f"results_dir={out}"], tmp_path)
    _resumed_to_the_end(again, state["position"], out, _record(killable_one / "one"), ranks=1)


def test_a_one_process_checkpoint_as_the_old_data_parallel_path_wrote_resumes_sharded(tmp_path: Path,
                                                                                    killable_one: Path) -> None:
    """Before FSDP2, task_agnostic's ranks each held the whole student and rank 0 wrote one process's checkpoint
    (whole tensors, the optimizer's state by position): such a checkpoint resumes on 2 sharded ranks, each keeping
    its shards of it."""
    common = [*KILLABLE, f"cache_dir={killable_one / 'cache'}"]
    out = tmp_path / "one"
    cmd = [sys.executable, "-m", "distill_sweep", *common, f"results_dir={out}"]
    state, _ = _killed_after_a_checkpoint(cmd, out, tmp_path)
    assert "shards" not in state and state["student"] and state["optimizer"]["state"]
    again = _torchrun([*common, f"results_dir={out}"], tmp_path)
    _resumed_to_the_end(again, state["position"], out, _record(killable_one / "one"), ranks=2)


def test_what_cannot_run_on_several_ranks_is_refused_in_one_line(tmp_path: Path) -> None:
    task = _torchrun(["procedure=finetune", "task=toy", "teacher=tiny", "logger=none", f"results_dir={tmp_path / 'r'}",
                      f"cache_dir={tmp_path / 'c'}"], tmp_path)
    assert task.returncode != 0
    assert "distill_sweep: error: procedure=finetune runs in one process; 2 would be started" in task.stderr
    batch = _torchrun([*AGNOSTIC, "objective=att_mse", "procedure.micro_batch=16", f"results_dir={tmp_path / 'r'}",
                       f"cache_dir={tmp_path / 'c'}"], tmp_path)
    assert batch.returncode != 0
    assert "procedure.global_batch=16 is not a multiple of procedure.micro_batch=16 x 2 process(es)" in batch.stderr
    assert not (tmp_path / "r").exists()  # nothing written


def test_a_launch_that_cannot_start_the_job_is_one_line_said_once(tmp_path: Path) -> None:
    job = ["task=toy", "teacher=tiny", "logger=none", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"]
    for env, args, line in (
            ({"WORLD_SIZE": "two"}, job, "WORLD_SIZE='two' is not a number of processes"),
            ({"WORLD_SIZE": "2"}, job, "WORLD_SIZE=2 but RANK, MASTER_ADDR, MASTER_PORT are not set"),
            ({}, [*job, "fsdp.teacher=shard"], "fsdp.teacher=shard shards the teacher over several processes, and "
                                                "this job runs in one")):
        run = subprocess.run([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300, env={**os.environ, **ENV, **env})
        assert run.returncode == 2 and run.stderr.startswith(f"distill_sweep: error: {line}"), run.stderr[-2000:]
        assert run.stderr.count("\n") == 1, run.stderr  # the one line, no traceback
    # a sweep under torchrun would run in every rank: refused, said by rank 0 alone
    sweep = _torchrun([*job, "seed=1,2", "-m"], tmp_path)
    assert sweep.returncode != 0
    assert sweep.stderr.count("distill_sweep: error: -m under torchrun: each of the 2 processes would run the whole "
                              "sweep") == 1, sweep.stderr[-2000:]
    assert not (tmp_path / "r").exists()  # nothing written


CRASHING = """
import sys
from distill_sweep.cli import run_job
from distill_sweep.__main__ import _cli


def crash(*args, **kwargs):  # an unexpected exception in every rank, as a bug would raise
    raise RuntimeError("a crash of the job itself")


run_job.run_job = crash
sys.argv = ["distill_sweep", *sys.argv[1:]]
_cli()
"""


def test_a_crash_under_torchrun_is_printed_once(tmp_path: Path) -> None:
    """Not a refusal: rank 0 prints the traceback once (Hydra's report), rank 1 one line naming its own traceback's
    file; torchrun's own report follows (docs/guide/gpus.md says which line to read)."""
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    cmd = _torchrun_cmd(["task=toy", "teacher=tiny", "logger=none", f"results_dir={tmp_path / 'r'}",
                         f"cache_dir={tmp_path / 'c'}"])
    at = cmd.index("distill_sweep")
    cmd[at - 1:at + 1] = [str(script)]  # (torchrun runs the script, which runs the command line)
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, **ENV, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode != 0
    err = run.stderr
    assert err.count("RuntimeError: a crash of the job itself") == 2, err  # rank 0's traceback, rank 1's line
    assert err.count("Error executing job") == 1 and err.count("in crash") == 1, err  # one traceback
    line = next(x for x in err.splitlines() if x.startswith("distill_sweep: error: rank 1 failed: "))
    where = Path(line.rsplit("(its traceback: ", 1)[1].rstrip(")"))
    assert "in crash" in where.read_text()  # its own traceback kept


def test_a_sweep_checks_its_jobs_as_the_launcher_will_start_them(tmp_path: Path) -> None:
    from helpers import run_cli_preloaded

    slurm = ["hydra/launcher=slurm", "hydra.launcher.tasks_per_node=2", "+dry_run=true", "-m",
             f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"]
    task = run_cli_preloaded(["procedure=finetune", "task=toy", "teacher=tiny", "logger=none", *slurm], tmp_path)
    assert task.returncode == 2 and "procedure=finetune runs in one process; 2 would be started" in task.stderr
    odd = run_cli_preloaded(["task=toy", "teacher=tiny", "logger=none", "optimizer.batch_size=33", *slurm], tmp_path)
    assert odd.returncode == 2 and "optimizer.batch_size=33 is not a multiple of the 2 processes" in odd.stderr
    batch = run_cli_preloaded([*AGNOSTIC, "objective=att_mse", "procedure.micro_batch=16", *slurm], tmp_path)
    assert batch.returncode == 2, batch.stderr[-2000:]
    assert "procedure.global_batch=16 is not a multiple of procedure.micro_batch=16 x 2 process(es)" in batch.stderr
    fits = run_cli_preloaded([*AGNOSTIC, "objective=att_mse", "procedure.micro_batch=8", *slurm], tmp_path)
    assert fits.returncode == 0 and "1 to run" in fits.stdout, fits.stderr[-2000:]
    assert not (tmp_path / "r").exists()  # nothing written


def test_ranks_that_disagree_on_the_config_stop_before_any_work(tmp_path: Path) -> None:
    port = str(_free_port())
    procs = []
    for rank, seed in ((0, 1), (1, 2)):  # the same job but for its seed: another config hash
        env = {**os.environ, **ENV, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        procs.append(subprocess.Popen([sys.executable, "-m", "distill_sweep", *AGNOSTIC, "objective=att_mse",
                                       f"seed={seed}", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"],
                                      cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env))
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 2, err[-2000:]
    # said once: by rank 0 (rank 1 stops as quietly, with the same exit status)
    assert [err.count("the 2 ranks disagree on the config hash") for _, err in outs] == [1, 0]
    assert not list((tmp_path / "r").rglob("result.json"))


def _flag_worker(rank: int, port: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    distributed.setup(torch.device("cpu"))
    try:
        out[rank] = (distributed.any_rank(rank == 1, torch.device("cpu")),
                     distributed.any_rank(False, torch.device("cpu")))
        out[f"sum{rank}"] = distributed.sum_floats([0.25 * (rank + 1), 1.0], torch.device("cpu"))
    finally:
        dist.destroy_process_group()


def test_a_stop_flag_on_one_rank_stops_every_rank_and_sums_are_global() -> None:
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_flag_worker, args=(_free_port(), out), nprocs=2)
        assert out[0] == out[1] == (True, False)  # rank 1 was signalled: both stop; nobody: nobody
        # loss values 0.25 + 0.5 and 1 + 1, on both ranks
        assert out["sum0"] == out["sum1"] == [0.75, 2.0]

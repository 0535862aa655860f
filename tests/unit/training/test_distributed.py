"""Data parallelism with torch.distributed (gloo ranks on CPU): task_agnostic on 2 ranks is the 1-process job."""

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

# dropout off: the 1-process run and the 2 ranks must draw nothing at random that the other does not
AGNOSTIC = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1", "corpus.num_documents=100",
            "corpus.dev_documents=20", "procedure.epochs=1", "teacher.config.hidden_dropout_prob=0",
            "teacher.config.attention_probs_dropout_prob=0", "procedure.global_batch=16", "procedure.micro_batch=8",
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


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_two_ranks_train_the_student_one_process_trains(tmp_path: Path) -> None:
    common = [*AGNOSTIC, "objective=att_mse", f"cache_dir={tmp_path / 'cache'}"]
    one = run_cli_preloaded([*common, f"results_dir={tmp_path / 'one'}"], tmp_path, env=ENV)
    assert one.returncode == 0, one.stderr[-2000:]
    two = _torchrun([*common, f"results_dir={tmp_path / 'two'}"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = _record(tmp_path / "one"), _record(tmp_path / "two")  # one record: only rank 0 writes
    assert (a["task_agnostic"]["ranks"], a["task_agnostic"]["accumulation_steps"]) == (1, 2)
    assert (b["task_agnostic"]["ranks"], b["task_agnostic"]["accumulation_steps"]) == (2, 1)
    assert a["task_agnostic"]["steps"] == b["task_agnostic"]["steps"] > 1
    # the same global batches, each micro-batch weighing the same: the same updates, to the bit here
    sa, sb = _student(a), _student(b)
    assert sa.keys() == sb.keys() and max(float((sa[k] - sb[k]).abs().max()) for k in sa) <= 1e-6
    # every epoch's losses (per term too), dev metrics and padding (the global batches': summed over ranks)
    assert a["epochs"] == b["epochs"]
    assert a["best"]["dev"] == b["best"]["dev"]


# ~60 updates in 2 epochs, a checkpoint every 4 (the kill lands mid-epoch 1), a log line per step (which steps ran)
KILLABLE = [*(a for a in AGNOSTIC if a.split("=")[0] not in ("corpus.num_documents", "procedure.epochs")),
            "corpus.num_documents=200", "procedure.epochs=2", "objective=vanilla_kd", "checkpoint.every_steps=4",
            "log_every=1"]


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
    """(epoch, step) of every update a run logged (log_every=1; both ranks log the same lines)."""
    return {(int(e), int(s)) for e, s in re.findall(r"pretrain epoch (\d+) step (\d+)/\d+ loss", output)}


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_two_ranks_killed_with_sigkill_resume_to_the_uninterrupted_student(tmp_path: Path) -> None:
    common = [*KILLABLE, f"cache_dir={tmp_path / 'cache'}"]
    one = run_cli_preloaded([*common, f"results_dir={tmp_path / 'one'}"], tmp_path, env=ENV)
    assert one.returncode == 0, one.stderr[-2000:]
    reference = _record(tmp_path / "one")

    out = tmp_path / "two"
    run = subprocess.Popen(_torchrun_cmd([*common, f"results_dir={out}"]), cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env={**os.environ, **ENV}, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(out.rglob(CHECKPOINT)):  # written by an atomic rename: there, it is whole
            assert run.poll() is None, f"the job ended before it could be killed:\n{run.communicate()[0][-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.02)
        assert len(_process_tree(run.pid)) >= 3  # torchrun and its 2 ranks
        _kill_tree(run.pid)  # mid-step: no signal handler, no `finally` runs
        killed_output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            _kill_tree(run.pid)
            run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL
    (ckpt,) = out.rglob(CHECKPOINT)
    at = torch.load(ckpt, map_location="cpu", weights_only=True)["position"]
    assert at["stage"] == 0 and at["step"] > 0, at  # killed mid-epoch, after at least one step checkpoint
    assert _record(out)["status"] == "running"  # what the kill left: a record of a job that never ended
    steps_per_epoch = reference["epochs"][0]["step"]
    assert (at["epoch"], at["step"]) in _steps_run(killed_output)

    again = _torchrun([*common, f"results_dir={out}"], tmp_path)  # the same command (another free port)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    # both ranks resumed from rank 0's checkpoint at the step it holds, and ran only the updates after it
    resumed_at = re.findall(r"resuming from \S+ at pretrain epoch (\d+) step (\d+)", again.stdout)
    assert resumed_at == [(str(at["epoch"]), str(at["step"]))] * 2, resumed_at
    expected = {(e, s) for e in range(at["epoch"], 3) for s in range(1, steps_per_epoch + 1)
                if (e, s) > (at["epoch"], at["step"])}
    assert _steps_run(again.stdout) == expected

    # one record, completed; nothing left behind: no checkpoint, no temp file of a cut-short write
    (path,) = out.rglob("result.json")
    record = json.loads(path.read_text())
    assert record["status"] == "completed" and record["task_agnostic"]["ranks"] == 2
    assert (record["attempts"], record["resumed"]) == (2, 1)
    left = [p.name for p in out.rglob("*") if p.name == CHECKPOINT or p.suffix == ".tmp" or ".corrupt-" in p.name]
    assert not left, left
    # the uninterrupted job's losses, dev metrics and student, to the bit (2 ranks = 1 process, tested above)
    assert record["epochs"] == reference["epochs"]
    assert record["best"] == reference["best"]
    resumed_student, uninterrupted = _student(record), _student(reference)
    assert resumed_student.keys() == uninterrupted.keys()
    assert all(torch.equal(resumed_student[k], uninterrupted[k]) for k in uninterrupted)


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
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


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
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


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
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
        assert "the 2 ranks disagree on the config hash" in err
    assert not list((tmp_path / "r").rglob("result.json"))


def _flag_worker(rank: int, port: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    distributed.setup(torch.device("cpu"))
    try:
        out[rank] = (distributed.any_rank(rank == 1, torch.device("cpu")),
                     distributed.any_rank(False, torch.device("cpu")))
        grads, scalars, bad = distributed.sum_over_ranks([torch.full((2,), float(rank + 1))], [0.25 * (rank + 1)],
                                                         rank == 0, torch.device("cpu"))
        out[f"sum{rank}"] = (grads[0].tolist(), scalars, bad)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_a_stop_flag_on_one_rank_stops_every_rank_and_sums_are_global() -> None:
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_flag_worker, args=(_free_port(), out), nprocs=2)
        assert out[0] == out[1] == (True, False)  # rank 1 was signalled: both stop; nobody: nobody
        # gradients 1 and 2 sum to 3 on both ranks; loss values 0.25 + 0.5; rank 0's non-finite flag reaches rank 1
        assert out["sum0"] == out["sum1"] == ([3.0, 3.0], [0.75], True)

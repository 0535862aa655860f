"""Real SLURM: a single-node cluster on 127.0.0.1 (tests/slurm_cluster.sh), a toy sweep through
`hydra/launcher=slurm`, every record written and every job COMPLETED in sacct, then the cluster torn down.

Needs root and apt (the script installs slurm, munge and mariadb when missing). Outside CI the tests skip
when those are missing; with CI=true they fail instead, so a CI machine cannot silently skip them.
Select or deselect with `-m slurm` / `-m "not slurm"`. See tests/SLURM.md.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT

pytestmark = pytest.mark.slurm

REPO = ROOT
SCRIPT = REPO / "tests" / "slurm_cluster.sh"
CLUSTER_DIR = Path(os.environ.get("SLURM_TEST_DIR", "/tmp/distill_sweep_slurm"))
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "slurmdbd", "mariadb-server")

# The toy grid submitted through SLURM: 2 objectives x 2 inits = one array of 4 jobs. Adjust here; a
# comma in a value is a sweep axis (the expected job count is the product of the axis lengths).
SWEEP_OVERRIDES = [
    "task=toy",
    "teacher=tiny",
    "logger=none",
    "objective=vanilla_kd,att_mse",
    "init=1,3",
    "seed=1",
    "epochs=1",
    "max_steps_per_epoch=4",
    # a small, quickly fine-tuned teacher: the point here is the launcher, not the numbers
    "task.recipe.num_train=256",
    "task.recipe.num_dev=64",
    "teacher.finetune.epochs=1",
    "teacher.finetune.max_steps_per_epoch=4",
    "guards.allow_weak_teacher=true",  # 4 steps of fine-tuning may leave it at the majority class
]
# What one toy job may ask of the 2-core CI machine (no GPU GRES there: a GPU request is rejected).
LAUNCHER_OVERRIDES = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=2",
    "hydra.launcher.timeout_min=15",
]
SWEEP_TIMEOUT_S = 900


@dataclass(frozen=True)
class Cluster:
    conf: Path  # SLURM_CONF for clients (sbatch, sacct, submitit)

    def env(self) -> dict[str, str]:
        env = dict(os.environ, SLURM_CONF=str(self.conf))
        # SLURM jobs must import the INSTALLED package: nothing the submitting side puts on the path may help.
        env.pop("PYTHONPATH", None)
        return env


def _packages_installed() -> bool:
    if shutil.which("dpkg-query") is None:
        return False
    for package in PACKAGES:
        query = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
        if not query.stdout.endswith("ok installed"):
            return False
    return True


def _unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to start slurmctld/slurmd/munged/mariadbd"
    if not _packages_installed() and shutil.which("apt-get") is None:
        return "slurm/munge/mariadb are not installed and apt-get is unavailable"
    return None


def _script(action: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SLURM_TEST_DIR=str(CLUSTER_DIR))
    return subprocess.run(["bash", str(SCRIPT), action], capture_output=True, text=True, timeout=timeout, env=env)


def _cluster_pids() -> list[int]:
    """Processes started by the script (it tags every daemon's environment with the cluster directory)."""
    marker = f"DISTILL_SWEEP_SLURM_DIR={CLUSTER_DIR}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
        except OSError:  # exited meanwhile, or not ours to read
            continue
    return pids


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    reason = _unavailable_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"SLURM test cannot run under CI: {reason}")
        pytest.skip(reason)
    try:
        up = _script("up")
        if up.returncode != 0:
            pytest.fail(f"slurm_cluster.sh up failed (rc {up.returncode}):\n{up.stdout}\n{up.stderr}")
        yield Cluster(conf=CLUSTER_DIR / "etc" / "slurm.conf")
    finally:
        down = _script("down", timeout=180)
        status = _script("status", timeout=60)
        left = _cluster_pids()
        assert down.returncode == 0, f"slurm_cluster.sh down failed:\n{down.stdout}\n{down.stderr}"
        assert not left, f"processes of the test cluster still run after down: {left}"
        assert status.returncode == 3, f"daemons still run after down:\n{status.stdout}\n{status.stderr}"


def _sacct_states(cluster: Cluster, job_ids: list[str], timeout_s: float = 30) -> dict[str, str]:
    """`sacct` State per allocation for job_ids (`123` or array tasks `123_4`), polling over its ~1 s lag."""
    parents = sorted({j.split("_")[0] for j in job_ids})
    cmd = ["sacct", "-n", "-X", "-P", "-o", "JobID,State"] + [a for p in parents for a in ("-j", p)]
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(cmd, capture_output=True, text=True, env=cluster.env(), check=True).stdout
        states = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
        # a state is "CANCELLED by 0" etc.: keep the first word
        states = {k: v.split()[0] for k, v in states.items()}
        if all(states.get(j) in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
               for j in job_ids) or time.monotonic() > deadline:
            return {j: states.get(j, "MISSING") for j in job_ids}
        time.sleep(0.5)


def _submitted_job_ids(submitit_root: Path) -> list[str]:
    """Job ids (`123_0`, ...) submitit used, from its `<id>_submitted.pkl` files."""
    ids = [p.name[: -len("_submitted.pkl")] for p in submitit_root.rglob("*_submitted.pkl")]
    return sorted(i for i in ids if re.fullmatch(r"\d+(_\d+)?", i))


def _expected_jobs(overrides: list[str]) -> int:
    return math.prod(len(o.split("=", 1)[1].split(",")) for o in overrides)


def test_cluster_runs_submitit_job(slurm_cluster: Cluster, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster alone (no pipeline): an `sbatch --wrap` job and a submitit function job complete."""
    env = slurm_cluster.env()
    out = tmp_path / "wrap.out"
    sub = subprocess.run(["sbatch", "--parsable", "-o", str(out), "--wrap", "echo wrapped on $(hostname)"],
                         capture_output=True, text=True, env=env, check=True)
    wrap_id = sub.stdout.strip().split(";")[0]

    import submitit

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))

    # defined here so cloudpickle ships it by value (the job cannot import this test module)
    def where() -> tuple[str, str | None]:
        import os
        import sys

        return sys.executable, os.environ.get("SLURM_JOB_ID")

    executor = submitit.AutoExecutor(folder=tmp_path / "submitit" / "%j", cluster="slurm")
    executor.update_parameters(timeout_min=5, cpus_per_task=1, mem_gb=1)
    job = executor.submit(where)
    executable, job_id = job.result()
    assert executable == sys.executable  # the job runs the submitting venv's python
    assert job_id == job.job_id

    states = _sacct_states(slurm_cluster, [wrap_id, job.job_id])
    assert states == {wrap_id: "COMPLETED", job.job_id: "COMPLETED"}
    assert out.read_text().startswith("wrapped on ")


def test_cancelled_job_is_noticed(slurm_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job killed before writing its result must raise, not hang: submitit learns it from sacct, which is
    why the cluster runs slurmdbd (with accounting_storage/none submitit polls forever)."""
    import submitit

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit" / "%j", cluster="slurm")
    executor.update_parameters(timeout_min=5, cpus_per_task=1, mem_gb=1)
    job = executor.submit(time.sleep, 300)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # cancel it while it runs, not while it is still queued
        squeue = subprocess.run(["squeue", "-h", "-j", job.job_id, "-o", "%T"], capture_output=True, text=True,
                                env=slurm_cluster.env())
        if squeue.stdout.strip() == "RUNNING":
            break
        time.sleep(0.5)
    job.cancel(check=True)
    start = time.monotonic()
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    assert time.monotonic() - start < 90


def test_toy_sweep_on_slurm(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """`python -m distill_sweep ... hydra/launcher=slurm -m pack=off`: the store's build job, then one array of
    one task per job, a completed record per job."""
    env = slurm_cluster.env()
    # Run from outside the repository: the jobs must find distill_sweep installed in the venv
    # (`pip install -e .`, done by `make install`), not through the working directory.
    probe = subprocess.run([sys.executable, "-c", "import distill_sweep"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert probe.returncode == 0, (
        f"distill_sweep is not importable by {sys.executable} outside the repo; SLURM jobs need it installed "
        f"(run `make install`, i.e. pip install -e .):\n{probe.stderr}"
    )
    results_dir, sweep_dir = tmp_path / "results", tmp_path / "sweep"
    cmd = [
        sys.executable, "-m", "distill_sweep", *SWEEP_OVERRIDES, *LAUNCHER_OVERRIDES, "pack=off",
        f"results_dir={results_dir}", f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={sweep_dir}", "-m",
    ]
    started = time.monotonic()
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    elapsed = time.monotonic() - started
    logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(sweep_dir.rglob("*_log.*"))[:12])
    if run.returncode != 0:
        pytest.fail(f"sweep failed (rc {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}\n{logs}")

    expected = _expected_jobs(SWEEP_OVERRIDES)
    records = sorted(results_dir.rglob("result.json"))
    assert len(records) == expected, f"{len(records)} records for {expected} jobs: {records}"
    for path in records:
        record = json.loads(path.read_text())
        assert record["status"] == "completed", f"{path}: {record.get('status')} {record.get('error')}"

    # first the build job of the task's teacher-output store (an array of one), then the grid as one array
    assert "building the teacher outputs of 1 task(s) first" in run.stdout, run.stdout[-2000:]
    job_ids = _submitted_job_ids(sweep_dir / ".submitit")
    arrays = sorted({j.split("_")[0] for j in job_ids}, key=int)
    assert len(job_ids) == expected + 1 and len(arrays) == 2, f"submitit submitted {job_ids}"
    assert len([j for j in job_ids if j.split("_")[0] == arrays[-1]]) == expected, f"not one grid array: {job_ids}"
    states = _sacct_states(slurm_cluster, job_ids)
    assert set(states.values()) == {"COMPLETED"}, states
    print(f"{expected} SLURM jobs completed in {elapsed:.1f} s")


def test_toy_sweep_in_packs_on_slurm(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """`pack=auto` (the default): the grid's four jobs share batches (sweep/packs.py), so the grid is one array task, one
    process training them in lockstep, with a completed record per job."""
    env = slurm_cluster.env()
    results_dir, sweep_dir = tmp_path / "results", tmp_path / "sweep"
    cmd = [sys.executable, "-m", "distill_sweep", *SWEEP_OVERRIDES, *LAUNCHER_OVERRIDES,
           f"results_dir={results_dir}", f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={sweep_dir}", "-m"]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(sweep_dir.rglob("*_log.*"))[:12])
    if run.returncode != 0:
        pytest.fail(f"sweep failed (rc {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}\n{logs}")
    expected = _expected_jobs(SWEEP_OVERRIDES)
    assert f"{expected} jobs in 1 process(es): 1 pack(s) trained in lockstep" in run.stdout, run.stdout[-2000:]
    records = [json.loads(p.read_text()) for p in sorted(results_dir.rglob("result.json"))]
    assert len(records) == expected and {r["status"] for r in records} == {"completed"}, records
    job_ids = _submitted_job_ids(sweep_dir / ".submitit")
    assert len(job_ids) == 2 and len({j.split("_")[0] for j in job_ids}) == 2, job_ids  # the store's build, the pack
    assert set(_sacct_states(slurm_cluster, job_ids).values()) == {"COMPLETED"}


# Preemption / time limit: SLURM sends USR2 before a job's time limit (`signal_delay_s`), or on preemption;
# the job checkpoints at the next step, submitit requeues it, and the requeued job resumes from the checkpoint.
# The test delivers that USR2 itself (`scancel --signal=USR2`) once the student is training: with a
# 1-minute limit SLURM's coarse signal timer (it may fire up to 60 s early) raced the job's start-up here and
# killed a requeued allocation before any handler was installed. SLURM also holds a requeued job back
# cred_expire + 1 s (11 s on the test cluster) and then starts it only at its scheduler's next periodic pass;
# the test starts it as soon as it is eligible (`_start_requeued`).
REQUEUE_OVERRIDES = [
    "task=toy", "teacher=tiny", "logger=none", "objective=hid_seq", "seed=1",
    "task.recipe.num_train=1024", "task.recipe.num_dev=64", "epochs=2", "checkpoint.every_steps=4",
    "teacher.finetune.epochs=1", "teacher.finetune.max_steps_per_epoch=4", "guards.allow_weak_teacher=true",
]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _start_requeued(env: dict[str, str], job_id: str) -> None:
    """Start a requeued (pending) job now instead of at the scheduler's next periodic pass, but not before the
    begin time SLURM gave it (cred_expire + 1 s after the requeue, 11 s here: slurm_cluster.sh): started earlier,
    slurmd still remembers the credential it revoked and kills the job ("Job credential revoked", seen here)."""
    begin = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%S"], env=env, capture_output=True,
                           text=True).stdout.strip()
    try:
        eligible = datetime.datetime.fromisoformat(begin).timestamp()  # local time, as squeue prints it
    except ValueError:  # N/A: already eligible
        eligible = 0.0
    _wait(lambda: time.time() >= eligible + 1, 180, f"requeued job {job_id} to become eligible ({begin})")
    update = subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=env,
                            capture_output=True, text=True)
    if update.returncode != 0:
        # The scheduler's own pass may have started it between the wait and the update ("Job is no longer
        # pending execution"): that is the state we wanted. Anything else, still pending, is a failure.
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                               text=True).stdout.strip()
        assert "no longer pending" in update.stderr and state != "PENDING", (update.stderr, state)


def test_preempted_job_is_requeued_and_resumes_to_completion(slurm_cluster: Cluster, tmp_path: Path) -> None:
    env = slurm_cluster.env()
    results_dir, cache, sweep_dir = tmp_path / "results", tmp_path / "cache", tmp_path / "sweep"
    # Fine-tune the (tiny) teacher beforehand, outside SLURM, so the job goes straight to the student.
    warm = subprocess.run([sys.executable, "-m", "distill_sweep", *REQUEUE_OVERRIDES, "epochs=1",
                           "max_steps_per_epoch=1", f"results_dir={tmp_path / 'warm'}", f"cache_dir={cache}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr[-3000:]
    cmd = [sys.executable, "-m", "distill_sweep", *REQUEUE_OVERRIDES, "hydra/launcher=slurm",
           "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=2", "hydra.launcher.mem_gb=2",
           "hydra.launcher.timeout_min=20", "hydra.launcher.max_num_timeout=3",
           f"results_dir={results_dir}", f"cache_dir={cache}", f"hydra.sweep.dir={sweep_dir}", "-m"]
    sweep = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: any(results_dir.rglob("checkpoint.pt")) or sweep.poll() is not None, 600, "a checkpoint")
        assert sweep.poll() is None, "the job finished before it could be preempted"
        (job_id,) = _submitted_job_ids(sweep_dir / ".submitit")
        subprocess.run(["scancel", "--signal=USR2", job_id], env=env, check=True)

        def requeued() -> bool:
            out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                                 text=True).stdout
            return "PENDING" in out

        _wait(requeued, 120, "the job to be requeued")
        _start_requeued(env, job_id)
        output, _ = sweep.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    logs = "\n".join(f"--- {p}\n{p.read_text()[-2000:]}" for p in sorted(sweep_dir.rglob("*_log.*"))[:4])
    assert sweep.returncode == 0, f"{output[-3000:]}\n{logs}"

    (path,) = results_dir.rglob("result.json")
    record = json.loads(path.read_text())
    assert record["status"] == "completed", record.get("error")
    assert record["requeued"] == 1 and record["resumed"] == 1 and record["attempts"] == 2, record
    assert [(e["stage"], e["epoch"]) for e in record["epochs"]] == [
        ("intermediate", 1), ("intermediate", 2), ("prediction", 1), ("prediction", 2)]
    assert not list(results_dir.rglob("checkpoint.pt"))  # removed once the job completed
    states = _allocation_states(env, job_id)
    assert states[0] == "REQUEUED" and states[-1] == "COMPLETED", states


# Task-agnostic distillation as ONE torch.distributed job of 2 ranks: `hydra.launcher.tasks_per_node=2` makes
# srun start 2 tasks, each runs the Hydra job, and submitit's TorchDistributedEnvironment (distributed.setup)
# joins them over gloo. Preempted twice: first by `scancel --signal=USR2` (every rank gets it), then by a USR2
# to rank 1 alone (ranks get SLURM's signal at different steps; rank 0 must still checkpoint and requeue).
# The result must be the uninterrupted job's: 2 sharded ranks x 1 micro-batch = 1 process x 2 within float
# tolerance (FSDP2's reduce order; test_distributed.py), so the reference is one local process. Dropout off: 2
# ranks draw the same masks for different rows.
AGNOSTIC_OVERRIDES = [
    "procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1", "objective=vanilla_kd", "seed=1",
    "corpus.num_documents=300", "corpus.dev_documents=20", "procedure.epochs=2", "procedure.global_batch=16",
    "procedure.micro_batch=8", "checkpoint.every_steps=4", "teacher.config.hidden_dropout_prob=0",
    "teacher.config.attention_probs_dropout_prob=0", "guards.allow_weak_teacher=true",
]
RESUMING = re.compile(r"resuming from \S+ at pretrain epoch (\d+) step (\d+)")


def _position(results_dir: Path) -> tuple[int, int] | None:
    """(epoch, step) of the job's checkpoint, or None when there is none (yet, or any more)."""
    import torch

    for path in results_dir.rglob("checkpoint.pt"):
        try:
            position = torch.load(path, map_location="cpu", weights_only=True)["position"]
        except (OSError, RuntimeError, EOFError):  # deleted meanwhile (the job completed)
            return None
        return position["epoch"], position["step"]
    return None


def _rank_pids(job_id: str) -> dict[int, int]:
    """SLURM_PROCID -> pid of each task (the python that srun started) of a running job (root reads /proc)."""
    pids = {}
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            argv = (environ.parent / "cmdline").read_bytes().split(b"\0")
            env = dict(item.split(b"=", 1) for item in environ.read_bytes().split(b"\0") if b"=" in item)
        except OSError:
            continue
        ids = {env.get(b"SLURM_JOB_ID", b"").decode(),
               f"{env.get(b'SLURM_ARRAY_JOB_ID', b'').decode()}_{env.get(b'SLURM_ARRAY_TASK_ID', b'').decode()}"}
        if argv[1:4] == [b"-u", b"-m", b"submitit.core._submit"] and job_id in ids:
            pids[int(env[b"SLURM_PROCID"])] = int(environ.parent.name)
    return pids


def test_two_rank_task_agnostic_job_is_preempted_requeued_and_resumes(slurm_cluster: Cluster, tmp_path: Path) -> None:
    env = slurm_cluster.env()
    results_dir, cache, sweep_dir = tmp_path / "results", tmp_path / "cache", tmp_path / "sweep"
    # the uninterrupted job in one local process (it also builds the corpus cache the ranks then read)
    reference = subprocess.run([sys.executable, "-m", "distill_sweep", *AGNOSTIC_OVERRIDES,
                                f"results_dir={tmp_path / 'reference'}", f"cache_dir={cache}"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert reference.returncode == 0, reference.stderr[-3000:]
    (ref_path,) = (tmp_path / "reference").rglob("result.json")
    expected = json.loads(ref_path.read_text())

    cmd = [sys.executable, "-m", "distill_sweep", *AGNOSTIC_OVERRIDES, "hydra/launcher=slurm",
           "hydra.launcher.gpus_per_node=0", "hydra.launcher.tasks_per_node=2", "hydra.launcher.cpus_per_task=1",
           "hydra.launcher.mem_gb=2", "hydra.launcher.timeout_min=20", "hydra.launcher.max_num_timeout=3",
           f"results_dir={results_dir}", f"cache_dir={cache}", f"hydra.sweep.dir={sweep_dir}", "-m"]
    sweep = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def requeued() -> bool:
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                             text=True).stdout
        return "PENDING" in out

    try:
        _wait(lambda: _position(results_dir) is not None or sweep.poll() is not None, 600, "a checkpoint")
        assert sweep.poll() is None, "the job finished before it could be preempted"
        (job_id,) = _submitted_job_ids(sweep_dir / ".submitit")
        subprocess.run(["scancel", "--signal=USR2", job_id], env=env, check=True)  # every rank
        _wait(lambda: requeued() or sweep.poll() is not None, 120, "the job to be requeued")
        assert sweep.poll() is None, f"the job was not requeued:\n{sweep.communicate()[0][-3000:]}"
        first = _position(results_dir)  # where it stopped (nothing runs while it is pending)
        assert first is not None and first > (1, 0), first
        _start_requeued(env, job_id)

        # resumed and training again (its signal handler is in place once it has passed its checkpoint)
        _wait(lambda: (_position(results_dir) or (0, 0)) > first or sweep.poll() is not None, 300,
              "the requeued job to train past its checkpoint")
        ranks = _rank_pids(job_id)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[1], signal.SIGUSR2)  # rank 1 only
        _wait(lambda: requeued() or sweep.poll() is not None, 120, "rank 0 to requeue the job")
        assert sweep.poll() is None, f"rank 1 alone signalled: not requeued:\n{sweep.communicate()[0][-3000:]}"
        second = _position(results_dir)
        assert second is not None and second > first, (first, second)
        _start_requeued(env, job_id)
        output, _ = sweep.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    logs = {rank: (sweep_dir / ".submitit" / job_id / f"{job_id}_{rank}_log.out").read_text() for rank in (0, 1)}
    assert sweep.returncode == 0, f"{output[-3000:]}\n{logs[0][-2000:]}\n{logs[1][-2000:]}"

    (path,) = results_dir.rglob("result.json")
    record = json.loads(path.read_text())
    assert record["status"] == "completed", record.get("error")
    assert (record["task_agnostic"]["ranks"], record["task_agnostic"]["accumulation_steps"]) == (2, 1)
    assert (record["requeued"], record["resumed"], record["attempts"]) == (2, 2, 3), record
    # each rank resumed from rank 0's checkpoint where the job stopped; rank 0 got the second signal from rank 1
    for rank in (0, 1):
        resumed_at = [(int(e), int(s)) for e, s in RESUMING.findall(logs[rank])]
        assert resumed_at == [first, second], (rank, resumed_at)
    assert (logs[0].count("received signal"), logs[1].count("received signal")) == (1, 2)
    left = [p.name for p in results_dir.rglob("*")
            if p.name == "checkpoint.pt" or ".shards-" in p.name or p.suffix == ".tmp"]
    assert not left, left
    # the uninterrupted job's losses, dev metrics and student, within FSDP's float tolerance (test_distributed.py)
    assert len(record["epochs"]) == len(expected["epochs"])
    for got, want in zip(record["epochs"], expected["epochs"], strict=True):
        assert got["train_loss"] == pytest.approx(want["train_loss"], rel=1e-5)
        assert got["dev"] == pytest.approx(want["dev"], rel=1e-5, abs=1e-6)
    from safetensors.torch import load_file

    (weights,) = Path(record["student_dir"]).glob("*.safetensors")
    (ref_weights,) = Path(expected["student_dir"]).glob("*.safetensors")
    student, uninterrupted = load_file(weights), load_file(ref_weights)
    assert student.keys() == uninterrupted.keys()
    assert max(float((student[k] - uninterrupted[k]).abs().max()) for k in student) < 1e-5

    assert _allocation_states(env, job_id) == ["REQUEUED", "REQUEUED", "COMPLETED"]


def _allocation_states(env: dict[str, str], job_id: str) -> list[str]:
    """The state of every allocation of a (requeued) job, in order (sacct -D). submitit returns as soon as the
    job has written its result, which can be before SLURM records the allocation as ended (CI saw RUNNING
    there once), so this polls until the last allocation reaches a final state (60 s at most)."""
    cmd = ["sacct", "-n", "-X", "-D", "-P", "-o", "JobID,State", "-j", job_id.split("_")[0]]
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        states = [line.split("|")[1].split()[0] for line in out.splitlines() if "|" in line]
        if (states and states[-1] not in ("RUNNING", "COMPLETING", "PENDING")) or time.monotonic() > deadline:
            return states
        time.sleep(0.5)


# One arm tuned on SLURM by two workers at a time: 3 trials (tune.parallel=2: a first array of two trials, then
# one), then the grid's two seeds at the chosen values. pack=off: each trial its own worker (packed, the two
# trials of a round would share one process). 4096 training rows x 2 epochs and a checkpoint every 8 steps: a
# trial runs long enough to be killed mid-way.
TUNE_OVERRIDES = [
    "task=toy", "teacher=tiny", "logger=none", "objective=vanilla_kd", "seed=1,2", "epochs=2",
    "task.recipe.num_train=4096", "task.recipe.num_dev=64", "checkpoint.every_steps=8",
    "teacher.finetune.epochs=1", "teacher.finetune.max_steps_per_epoch=4", "guards.allow_weak_teacher=true",
    "tune.trials=3", "tune.parallel=2", "tune.holdout=0.25", "tune.space={objective.temperature:{low:1.0,high:4.0}}",
    "pack=off",
]


def test_workers_share_one_study_and_a_killed_worker_leaves_exactly_the_budget(slurm_cluster: Cluster,
                                                                               tmp_path: Path) -> None:
    """Two array tasks run two trials of one study side by side; one is SIGKILLed mid-trial (its python, as the
    OOM killer would); the sweep run again ends with exactly 3 completed trials, none counted twice, and the
    grid at the chosen values."""
    import optuna

    env = slurm_cluster.env()
    results_dir, sweep_dir = tmp_path / "results", tmp_path / "sweep"
    cmd = [sys.executable, "-m", "distill_sweep", *TUNE_OVERRIDES, *LAUNCHER_OVERRIDES,
           f"results_dir={results_dir}", f"cache_dir={tmp_path / 'cache'}", "-m"]

    def trial_records() -> list[dict]:  # (a running record has the trial's number in its config)
        found = (json.loads(p.read_text()) for p in results_dir.rglob("result.json"))
        return [r for r in found if (r.get("config") or {}).get("tune_trial") is not None]

    def two_running() -> bool:
        return len([r for r in trial_records() if r["status"] == "running"]) == 2

    first = subprocess.Popen([*cmd, f"hydra.sweep.dir={sweep_dir / 'first'}"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: two_running() or first.poll() is not None, 600, "two trials training")
        assert first.poll() is None, f"the sweep ended first:\n{first.communicate()[0][-3000:]}"
        arrays: dict[str, list[str]] = {}
        for job in _submitted_job_ids(sweep_dir / "first" / ".submitit"):
            arrays.setdefault(job.split("_")[0], []).append(job)
        workers = arrays[max(arrays, key=int)]
        assert len(workers) == 2, arrays  # the round's two trials: one array of two tasks
        pids = [pid for worker in workers for pid in _rank_pids(worker).values()]
        assert pids, f"no worker of {workers} is running"
        os.kill(pids[0], signal.SIGKILL)
        output, _ = first.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        if first.poll() is None:
            first.kill()
    again = subprocess.run([*cmd, f"hydra.sweep.dir={sweep_dir / 'again'}"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    assert again.returncode == 0, f"{output[-2000:]}\n{again.stdout[-3000:]}\n{again.stderr[-3000:]}"

    (journal,) = (results_dir / "tuning").glob("*.journal")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    (name,) = optuna.get_all_study_names(storage)
    trials = optuna.load_study(study_name=name, storage=storage).trials
    complete = [t.number for t in trials if t.state.name == "COMPLETE"]
    assert len(complete) == 3 and not [t for t in trials if t.state.name == "RUNNING"], [
        (t.number, t.state.name) for t in trials]
    done = [r for r in trial_records() if r["status"] == "completed"]
    assert sorted(r["tune_trial"]["number"] for r in done) == sorted(complete)  # one record per trial, none twice
    grid = [json.loads(p.read_text()) for p in results_dir.rglob("result.json")]
    grid = [r for r in grid if r.get("tuned")]
    assert sorted(r["seed"] for r in grid) == [1, 2] and {r["status"] for r in grid} == {"completed"}
    assert {r["tuned"]["study"] for r in grid} == {name}

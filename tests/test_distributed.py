"""Data parallelism with torch.distributed (gloo ranks on CPU): task_agnostic on 2 ranks is the 1-process job."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

from distill_sweep import distributed

# dropout off: the 1-process run and the 2 ranks must draw nothing at random that the other does not
AGNOSTIC = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1", "corpus.num_documents=100",
            "corpus.dev_documents=20", "procedure.epochs=1", "teacher.config.hidden_dropout_prob=0",
            "teacher.config.attention_probs_dropout_prob=0", "procedure.global_batch=16", "procedure.micro_batch=8"]
ENV = {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(args: list[str], cwd: Path, ranks: int = 2) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
                           f"--master_port={_free_port()}", "-m", "distill_sweep", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env={**os.environ, **ENV})


def _record(results: Path) -> dict:
    (path,) = results.rglob("result.json")
    return json.loads(path.read_text())


def _student(record: dict) -> dict[str, torch.Tensor]:
    (weights,) = Path(record["student_dir"]).glob("*.safetensors")
    return load_file(weights)


def test_two_ranks_train_the_student_one_process_trains(tmp_path: Path) -> None:
    common = [*AGNOSTIC, "objective=att_mse", f"cache_dir={tmp_path / 'cache'}"]
    one = subprocess.run([sys.executable, "-m", "distill_sweep", *common, f"results_dir={tmp_path / 'one'}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ, **ENV})
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
    assert a["epochs"][0]["train_loss"] == b["epochs"][0]["train_loss"]
    assert a["best"]["dev"] == b["best"]["dev"]


def test_what_cannot_run_on_several_ranks_is_refused_in_one_line(tmp_path: Path) -> None:
    task = _torchrun(["task=toy", "teacher=tiny", "logger=none", f"results_dir={tmp_path / 'r'}",
                      f"cache_dir={tmp_path / 'c'}"], tmp_path)
    assert task.returncode != 0
    assert "distill_sweep: error: procedure=task_specific runs in one process; 2 were started" in task.stderr
    batch = _torchrun([*AGNOSTIC, "objective=att_mse", "procedure.micro_batch=16", f"results_dir={tmp_path / 'r'}",
                       f"cache_dir={tmp_path / 'c'}"], tmp_path)
    assert batch.returncode != 0
    assert "procedure.global_batch=16 is not a multiple of procedure.micro_batch=16 x 2 process(es)" in batch.stderr
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


def test_a_stop_flag_on_one_rank_stops_every_rank_and_sums_are_global() -> None:
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_flag_worker, args=(_free_port(), out), nprocs=2)
        assert out[0] == out[1] == (True, False)  # rank 1 was signalled: both stop; nobody: nobody
        # gradients 1 and 2 sum to 3 on both ranks; loss values 0.25 + 0.5; rank 0's non-finite flag reaches rank 1
        assert out["sum0"] == out["sum1"] == ([3.0, 3.0], [0.75], True)

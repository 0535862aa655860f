"""FSDP2 on 2 gloo ranks (torchrun): causal_lm and task_specific jobs sharded equal the one-process job within float
tolerance; their sharded checkpoints resume in 1 process and after a SIGKILL; what cannot shard is one line."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import run_cli_preloaded
from safetensors.torch import load_file
from test_distributed import (
    ENV,
    _free_port,
    _kill_tree,
    _process_tree,
    _record,
    _same_within,
    _torchrun,
    _torchrun_cmd,
)
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

import distill_sweep
from distill_sweep.training.checkpoint_files import CHECKPOINT

# corpus-free toy instructions: every rank's half of a batch holds as many targets (the losses weigh rows the same);
# the logits made 5 positions at a time (several chunks per batch): the chunked losses run sharded too
CAUSAL = ["procedure=causal_lm", "teacher=tiny_llama", "logger=none", "threads=1", "procedure.teacher_steps=30",
          "student.num_layers=2", "procedure.data=instructions", "objective=fkl", "procedure.epochs=1",
          "max_steps_per_epoch=3", "checkpoint.keep=true", "procedure.logit_chunk=5",
          "+teacher.config.attention_dropout=0.1"]  # (the student's too: sdpa's dropout, drawn per row)
# the default dropout (0.1): its masks are drawn per row of the global batch (training/row_dropout.py), so 2 ranks
# draw one process's
# 65 examples in batches of 32: the epoch's last batch has 1 row, fewer than the ranks (rank 1 gets a stand-in row)
TASK = ["task=toy", "teacher=tiny", "logger=none", "threads=1", "task.recipe.num_train=65", "task.recipe.num_dev=64",
        "teacher.finetune.epochs=1", "epochs=1", "optimizer.batch_size=32", "guards.allow_weak_teacher=true",
        "objective=vanilla_kd", "checkpoint.keep=true", "log_every=1"]


def _one(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_cli_preloaded(args, cwd, env=ENV)


def _student(results: Path) -> dict[str, torch.Tensor]:
    """The kept checkpoint's student, whole: checkpoint.pt's own (one process) or gathered from its shards."""
    (path,) = results.rglob(CHECKPOINT)
    state = torch.load(path, map_location="cpu", weights_only=True)
    if "shards" not in state:
        return state["student"]
    whole = path.parent / "whole.pt"
    dcp_to_torch_save(path.parent / state["shards"], whole)
    model = torch.load(whole, weights_only=False)["model"]
    return {k.removeprefix("student."): v for k, v in model.items() if k.startswith("student.")}


def _spawned(worker: Any, **given: Any) -> dict:
    """Two spawned gloo ranks running `worker(rank, port, out)`; what they put in the shared dict `out` (which starts
    with `given`)."""
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        out = manager.dict(given)
        mp.spawn(worker, args=(_free_port(), out), nprocs=2)
        return {k: v for k, v in out.items() if k not in given}


def _reference(root: Path, job: list[str]) -> Path:
    """`root`, where one process ran `job` (results in root/one, its cache in root/cache for the ranks to share)."""
    one = _one([*job, f"cache_dir={root / 'cache'}", f"results_dir={root / 'one'}"], root)
    assert one.returncode == 0, one.stderr[-2000:]
    return root


@pytest.fixture(scope="module")
def causal_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reference(tmp_path_factory.mktemp("causal"), CAUSAL)


@pytest.fixture(scope="module")
def task_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reference(tmp_path_factory.mktemp("task"), TASK)


@pytest.mark.parametrize("job, reference", [(CAUSAL, "causal_one"), (TASK, "task_one")],
                         ids=["causal_lm", "task_specific"])
def test_two_sharded_ranks_train_the_student_one_process_trains(tmp_path: Path, job: list[str], reference: str,
                                                               request: pytest.FixtureRequest) -> None:
    root = request.getfixturevalue(reference)
    # task_specific: a cache of its own, so rank 0 fine-tunes the teacher alone while rank 1 waits for it
    cache = tmp_path / "cache" if job is TASK else root / "cache"
    two = _torchrun([*job, f"cache_dir={cache}", f"results_dir={tmp_path / 'two'}"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "teacher replicated over 2 ranks" in two.stdout + two.stderr  # fsdp.teacher's default
    if job is TASK:  # one fine-tuning, on whole batches (3 steps of 65 examples in batches of 32), then 2 ranks
        assert (two.stdout + two.stderr).count("fine-tuning the teacher tiny") == 1
        assert "teacher finetune epoch 1 step 3/3" in two.stdout + two.stderr
    assert len(list((tmp_path / "two").rglob("result.json"))) == 1  # rank 0 alone writes the record
    a, b = _record(root / "one"), _record(tmp_path / "two")
    assert b["status"] == "completed" and "fsdp" not in a
    # rank 0 alone says the job's lines: "done" once, not once per rank
    assert "rank 0 of 2" in two.stdout + two.stderr and "rank 1 of 2" not in two.stdout + two.stderr
    assert len(re.findall(r"\] - done ", two.stdout + two.stderr)) == 1
    if job is CAUSAL:  # data parallel, not a copy of the job per rank: each rank takes half of every batch
        assert (a["causal_lm"]["ranks"], b["causal_lm"]["ranks"]) == (1, 2) and b["attempts"] == 1
    # a unit per block, BERT's embeddings one more (its _no_split_modules name them; untied in a classifier), the root
    blocks = b["student"]["num_layers"] + (1 if job is TASK else 0)
    assert b["fsdp"] == {"ranks": 2, "student_units": blocks + 1, "teacher": "replicate",
                         "student_resharded_after_forward": True, "param_dtype": "float32", "reduce_dtype": "float32"}
    _same_within(a, b)
    # its cost: each rank counts its half of every batch, the record their sum (training/cost.py)
    assert (a["cost"]["ranks"], b["cost"]["ranks"]) == (1, 2)
    assert b["cost"]["flops"] == pytest.approx(a["cost"]["flops"], rel=1e-9)
    # the student was sharded: its checkpoint is the 2 ranks' shards (one directory, named by checkpoint.pt)
    (ckpt,) = (tmp_path / "two").rglob(CHECKPOINT)
    shards = [p.name for p in ckpt.parent.iterdir() if p.is_dir() and p.name != "student"]  # (causal_lm: saved)
    assert shards == [torch.load(ckpt, weights_only=True)["shards"]]
    assert sorted(p.name for p in (ckpt.parent / shards[0]).glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    # with the sha256 of each of its files, hashed by the 2 ranks (the resume checks them: bytes flipped in place)
    sums = torch.load(ckpt, weights_only=True)["shard_sha256"]
    assert sums == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ckpt.parent / shards[0]).iterdir()}
    assert sorted(sums) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    # and its weights, gathered from the shards, are the one process's after the same 3 updates
    sa, sb = _student(root / "one"), _student(tmp_path / "two")
    assert sa.keys() == sb.keys()
    assert max(float((sa[k] - sb[k]).abs().max()) for k in sa) < 1e-5
    if job is CAUSAL:  # its lm-eval stage runs in one process: the sharded job saves its student, gathered by rank 0
        assert "student_dir" not in a  # (one process: the lm-eval stage can run, nothing saved)
        (saved,) = Path(b["student_dir"]).glob("*.safetensors")
        whole = load_file(saved)
        assert whole.keys() == sb.keys() and all(torch.equal(whole[k], sb[k]) for k in sb)
        # and the harness evaluates it with the command docs/guide/gpus.md gives (2 documents per task)
        harness = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
             f"pretrained={b['student_dir']},add_bos_token=True", "--device", "cpu", "--include_path",
             str(Path(distill_sweep.__file__).parent / "data" / "lm_eval_tasks"), "--tasks",
             "toy_instruct_rouge,toy_instruct_choice", "--limit", "2"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, **ENV})
        assert harness.returncode == 0, harness.stderr[-3000:]
        assert "toy_instruct_choice" in harness.stdout and "rouge_l" in harness.stdout


def test_a_teacher_sharded_for_inference_gives_the_one_process_record(tmp_path: Path, causal_one: Path) -> None:
    sharded = _torchrun([*CAUSAL, "fsdp.teacher=shard", f"cache_dir={causal_one / 'cache'}",
                         f"results_dir={tmp_path / 'shard'}"], tmp_path)
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "teacher sharded over 2 ranks" in sharded.stdout + sharded.stderr
    _same_within(_record(causal_one / "one"), _record(tmp_path / "shard"))


def test_a_hidden_store_job_on_two_ranks_gives_the_live_teachers_one_process_record(tmp_path: Path,
                                                                                     causal_one: Path) -> None:
    """procedure.teacher_logits=hidden on 2 ranks, the teacher sharded: each rank's rows read from the store (rank 0
    builds it, the other waits), the teacher's head gathered for the chunks: the live teacher's one-process record."""
    two = _torchrun([*CAUSAL, "procedure.teacher_logits=hidden", "fsdp.teacher=shard",
                     f"cache_dir={causal_one / 'cache'}", f"results_dir={tmp_path / 'hidden'}"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    record = _record(tmp_path / "hidden")
    assert record["teacher_outputs"]["store_mode"] == "hidden" and record["causal_lm"]["ranks"] == 2
    _same_within(_record(causal_one / "one"), record)


# TinyBERT: Att-MSE reads the q/k/v projections inside the blocks, Hid-Seq projects the student's states through one
# learned W_h (an FSDP unit of its own: applied by calling it), the teacher runs live as deep as the terms read, two
# stages each with its own optimizer
ATTENTION = [*(a for a in TASK if not a.startswith("objective=")), "objective=tinybert", "teacher_outputs=live",
             "max_steps_per_epoch=2"]


def test_an_attention_objective_trains_sharded_with_a_sharded_teacher(tmp_path: Path, task_one: Path) -> None:
    common = [*ATTENTION, f"cache_dir={task_one / 'cache'}"]
    one = _one([*common, f"results_dir={tmp_path / 'one'}"], tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    two = _torchrun([*common, "fsdp.teacher=shard", f"results_dir={tmp_path / 'two'}"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = _record(tmp_path / "one"), _record(tmp_path / "two")
    # the q/k/v gradients reach the blocks' weights outside FSDP's hooks: the blocks stay gathered to the backward
    assert b["fsdp"]["student_resharded_after_forward"] is False and b["fsdp"]["teacher"] == "shard"
    (ia, pa), (ib, pb) = a["epochs"], b["epochs"]
    assert (ia["stage"], pa["stage"]) == (ib["stage"], pb["stage"]) == ("intermediate", "prediction")
    # both terms average over each slice's real tokens, and the two halves of a batch hold other numbers of tokens:
    # the 2-rank mean of the halves' means differs from the whole batch's in the third digit here
    for term in ("loss_att_mse", "loss_hid_seq"):
        assert ib[term] == pytest.approx(ia[term], rel=1e-2), term
    # the prediction stage's KD is a mean over rows, from students the intermediate stage left that far apart
    # (measured: 3.4e-4 relative on its loss)
    assert pb["train_loss"] == pytest.approx(pa["train_loss"], rel=1e-2)
    assert pb["dev"] == pytest.approx(pa["dev"], rel=1e-2, abs=1e-6)


# a checkpoint at every step, ~24 steps: a kill lands mid-training
KILLABLE = [*(a for a in CAUSAL if a.split("=")[0] not in ("max_steps_per_epoch", "procedure.epochs",
                                                          "checkpoint.keep")),
            "procedure.epochs=3", "max_steps_per_epoch=8", "checkpoint.every_steps=1", "log_every=1"]


def _killed_after_a_checkpoint(cmd: list[str], out: Path, cwd: Path, *, one_rank: bool, sharded: bool = True
                               ) -> dict:
    """Start `cmd` (torchrun, 2 ranks; or one process), SIGKILL once a checkpoint is committed: the whole tree, or
    one rank (`one_rank`: torchrun then stops the other); returns the checkpoint's position."""
    run = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, **ENV}, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(out.rglob(CHECKPOINT)):  # committed by an atomic rename: there, its shards are whole
            assert run.poll() is None, f"the job ended before it could be killed:\n{run.communicate()[0][-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.02)
        if one_rank:  # rank 1 (torchrun -> its agent's workers, each with its RANK)
            (rank,) = [pid for pid in _process_tree(run.pid) if _environ(pid).get("RANK") == "1"]
            os.kill(rank, signal.SIGKILL)
            run.communicate(timeout=120)
            assert run.returncode != 0
        else:
            _kill_tree(run.pid)
            run.communicate(timeout=60)
            assert run.returncode == -signal.SIGKILL
    finally:
        if run.poll() is None:
            _kill_tree(run.pid)
            run.communicate(timeout=60)
    (ckpt,) = out.rglob(CHECKPOINT)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    if sharded:
        assert state["shards"] and (ckpt.parent / state["shards"] / ".metadata").exists()
    else:
        assert "shards" not in state and state["student"]
    # what the kill left: a record of a job that never ended; when rank 1 alone was killed, torchrun stopped rank 0
    # (SIGTERM), which wrote it as failed (a re-run resumes failed and interrupted jobs alike)
    record = _record(out)
    if one_rank:
        assert record["status"] == "failed", record
    else:
        assert record["status"] == "running"
    return state["position"]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


@pytest.fixture(scope="module")
def killable_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reference(tmp_path_factory.mktemp("killable"), KILLABLE)


def _resumed(output: str) -> list[tuple[int, int]]:
    return [(int(e), int(s)) for e, s in re.findall(r"resuming from \S+ at distill epoch (\d+) step (\d+)", output)]


def test_a_checkpoint_of_two_killed_ranks_resumes_in_one_process(tmp_path: Path, killable_one: Path) -> None:
    common = [*KILLABLE, f"cache_dir={killable_one / 'cache'}"]
    out = tmp_path / "two"
    at = _killed_after_a_checkpoint(_torchrun_cmd([*common, f"results_dir={out}"]), out, tmp_path, one_rank=False)
    # 1 process reads the 2 ranks' shards; its checkpoint kept at the end (checkpoint.keep: not in the job's hash)
    again = _one([*common, f"results_dir={out}", "checkpoint.keep=true"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _resumed(again.stderr + again.stdout) == [(at["epoch"], at["step"])]
    record = _record(out)
    assert record["status"] == "completed" and (record["attempts"], record["resumed"]) == (2, 1)
    _same_within(_record(killable_one / "one"), record)
    left = [p.name for p in out.rglob("*") if p.name == CHECKPOINT or ".shards-" in p.name or p.suffix == ".tmp"]
    assert left == [CHECKPOINT], left  # its own checkpoint (whole tensors): the 2 ranks' shard directory is gone


def test_a_checkpoint_of_one_killed_process_resumes_sharded_on_two_ranks(tmp_path: Path, killable_one: Path) -> None:
    common = [*KILLABLE, f"cache_dir={killable_one / 'cache'}"]
    out = tmp_path / "two"
    cmd = [sys.executable, "-m", "distill_sweep", *common, f"results_dir={out}"]
    at = _killed_after_a_checkpoint(cmd, out, tmp_path, one_rank=False, sharded=False)
    again = _torchrun([*common, f"results_dir={out}"], tmp_path)  # each rank keeps its shards of the whole tensors
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    # each rank says where it resumed (rank 1's line prefixed "[rank 1]": on SLURM each rank has its own log)
    assert _resumed(again.stderr + again.stdout) == [(at["epoch"], at["step"])] * 2
    record = _record(out)
    assert record["status"] == "completed" and record["causal_lm"]["ranks"] == 2
    _same_within(_record(killable_one / "one"), record)


def test_a_rank_killed_with_sigkill_and_a_rerun_resume_at_the_checkpoint(tmp_path: Path, killable_one: Path) -> None:
    common = [*KILLABLE, f"cache_dir={killable_one / 'cache'}"]
    out = tmp_path / "two"
    at = _killed_after_a_checkpoint(_torchrun_cmd([*common, f"results_dir={out}"]), out, tmp_path, one_rank=True)
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)  # the same store, its shard file cut in half below
    again = _torchrun([*common, f"results_dir={out}"], tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    resumed = _resumed(again.stderr + again.stdout)
    assert len(resumed) == 2 and len(set(resumed)) == 1, resumed  # each rank says it, at one position: one checkpoint
    assert resumed[0] >= (at["epoch"], at["step"])  # the kill's checkpoint, or one the dying ranks committed after
    record = _record(out)
    assert record["status"] == "completed" and record["resumed"] == 1
    _same_within(_record(killable_one / "one"), record)
    # a .distcp cut in half (a disk that lost its tail): set aside in one line, the job redone from the start
    (ckpt,) = damaged.rglob(CHECKPOINT)
    shard = sorted((ckpt.parent / torch.load(ckpt, weights_only=True)["shards"]).glob("*.distcp"))[-1]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    redone = _torchrun([*common, f"results_dir={damaged}"], tmp_path)
    said = redone.stdout + redone.stderr
    assert redone.returncode == 0 and "Traceback" not in said, said[-3000:]
    assert len(re.findall(rf"damaged sharded checkpoint \S+ \({shard.name} holds \d+ of its \d+ bytes; set it and "
                          rf"checkpoint.pt aside as .corrupt-\S+\): starting from the beginning", said)) == 1, said[-3000:]
    assert not _resumed(said)
    record = _record(damaged)
    assert record["status"] == "completed" and record["resumed"] == 0
    _same_within(_record(killable_one / "one"), record)
    assert len(list(ckpt.parent.glob("*.corrupt-*"))) == 2  # kept to look at: the shard directory, checkpoint.pt


def test_what_cannot_shard_is_refused_in_one_line_before_any_work(tmp_path: Path) -> None:
    where = [f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"]
    cannot = _torchrun(["procedure=finetune", "task=toy", "teacher=tiny", "logger=none", *where], tmp_path)
    assert cannot.returncode != 0
    assert cannot.stderr.count("distill_sweep: error: procedure=finetune runs in one process; 2 would be started per "
                               "job (several processes run procedure=causal_lm, task_agnostic, task_specific;") == 1
    odd = _torchrun([*TASK, "optimizer.batch_size=33", *where], tmp_path)
    assert odd.returncode != 0
    assert "distill_sweep: error: optimizer.batch_size=33 is not a multiple of the 2 processes" in odd.stderr
    assert not list((tmp_path / "r").rglob("result.json")) and not list((tmp_path / "r").rglob(CHECKPOINT))


def test_two_sharded_ranks_under_bf16_train_as_one_process_to_bf16_rounding(tmp_path: Path) -> None:
    common = [*CAUSAL, "precision=bf16", f"cache_dir={tmp_path / 'cache'}"]
    one = _one([*common, f"results_dir={tmp_path / 'one'}"], tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    two = _torchrun([*common, f"results_dir={tmp_path / 'two'}"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = _record(tmp_path / "one"), _record(tmp_path / "two")
    # bf16 keeps 8 bits of mantissa (relative rounding 2^-8 ~ 4e-3): autocast casts at each op, FSDP's policy the
    # gathered weights; both round to bf16, not at the same places (measured ~3e-3 on the loss)
    for x, y in zip(a["epochs"], b["epochs"], strict=True):
        assert y["train_loss"] == pytest.approx(x["train_loss"], rel=2e-2)
        assert y["dev"]["nll"] == pytest.approx(x["dev"]["nll"], rel=2e-2)
    assert (b["fsdp"]["param_dtype"], b["fsdp"]["reduce_dtype"]) == ("bfloat16", "float32")
    # the sharded master weights stay float32 (the policy casts copies for the compute)
    assert {v.dtype for v in _student(tmp_path / "two").values()} == {torch.float32}


def test_sharded_ranks_sample_on_policy_responses_of_their_own_lengths(tmp_path: Path) -> None:
    """Each rank samples its rows' responses, which end at other steps than the other rank's: the sharded student
    gathers its weights in every forward, so every rank keeps generating until all are done (without it, the ranks'
    collectives no longer pair up and the job hangs: measured, killed by the timeout here)."""
    args = [*CAUSAL, "procedure.on_policy=1.0", "procedure.generation.max_new_tokens=6",
            f"cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path / 'r'}"]
    run = subprocess.run(_torchrun_cmd(args), cwd=tmp_path, capture_output=True, text=True, timeout=240,
                         env={**os.environ, **ENV})
    assert run.returncode == 0, run.stderr[-3000:]
    record = _record(tmp_path / "r")
    assert record["status"] == "completed" and record["causal_lm"]["data_source"]["on_policy_steps"]


def _step_worker(rank: int, port: int, out: dict) -> None:
    """Rank `rank` of 2: a sharded linear model's sharded_loss over its slice of a 5-row batch (3 + 2 rows)."""
    import torch.distributed as dist

    from distill_sweep.training import distributed, fsdp

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    torch.set_num_threads(1)
    world = distributed.setup(torch.device("cpu"))
    try:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        fsdp.shard_student(model, torch.device("cpu"), "fp32")
        params = list(model.parameters())
        poison = {"on": True}

        def loss_fn(batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
            loss = model(batch["x"]).pow(2).sum(-1).mean()  # a mean over the slice's rows
            if poison["on"] and rank == 1:
                loss = loss * float("nan")
            return loss, {"sq": float(loss.detach())}

        step = fsdp.sharded_loss(loss_fn, params, None)
        x = torch.arange(20, dtype=torch.float32).reshape(5, 4) / 10
        mine = fsdp.rank_slice({"input_ids": x[:, 0], "x": x}, world)
        bad, bad_parts = step(mine)  # rank 1's loss is NaN: every rank returns NaN, no rank keeps a gradient
        out[f"bad{rank}"] = (bool(torch.isnan(bad)), all(p.grad is None for p in params))
        poison["on"] = False
        value, parts = step(mine)
        value.backward()
        out[f"ok{rank}"] = (float(value), parts["sq"], [p.grad.full_tensor().tolist() for p in params])
    finally:
        dist.destroy_process_group()


def test_the_sharded_step_is_the_global_batch_mean_and_a_nan_on_one_rank_skips_it_on_every_rank() -> None:
    result = _spawned(_step_worker)
    assert result["bad0"] == result["bad1"] == (True, True)
    # one process on the 5 rows: the mean over rows of |W x + b|^2 and its gradient, by hand
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x = torch.arange(20, dtype=torch.float32).reshape(5, 4) / 10
    y = x @ model.weight.detach().T + model.bias.detach()
    expected = float(y.pow(2).sum(-1).mean())
    grad_w, grad_b = 2 * y.T @ x / 5, 2 * y.sum(0) / 5  # d/dW mean_i |W x_i + b|^2
    for rank in (0, 1):
        value, sq, (gw, gb) = result[f"ok{rank}"]
        # rank 0's 3 rows and rank 1's 2 weigh as 3/5 and 2/5 of the global batch, not 1/2 each
        assert value == pytest.approx(expected, rel=1e-6) and sq == pytest.approx(expected, rel=1e-6)
        assert torch.allclose(torch.tensor(gw), grad_w, rtol=1e-5, atol=1e-6)
        assert torch.allclose(torch.tensor(gb), grad_b, rtol=1e-5, atol=1e-6)


def _chunk_batch() -> dict[str, torch.Tensor]:
    """2 rows of 4 targets each: the mean over a batch's targets is the mean of the rows' means (a rank's row)."""
    ids = torch.tensor([[3, 7, 9, 11, 4, 8], [5, 6, 2, 1, 12, 0]])
    labels = torch.tensor([[-100, 9, 11, 4, 8, -100], [6, 2, 1, 12, -100, -100]])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels, "idx": torch.tensor([0, 1])}


def _chunk_models(tied: bool) -> tuple[torch.nn.Module, torch.nn.Module, torch.nn.Module]:
    """A tiny Llama teacher (perturbed, frozen), a 2-layer student and the fkl + hid_seq objective between them."""
    from tiny_models import tiny_llama

    from distill_sweep.objectives import parse_objective
    from distill_sweep.objectives.core import build_objective

    teacher, student = tiny_llama(), tiny_llama(tied=tied, layers=2)
    torch.manual_seed(3)
    for p in teacher.parameters():
        p.data.add_(torch.randn_like(p) * 0.3)
        p.requires_grad_(False)
    terms = build_objective(parse_objective({"name": "x", "stages": ["intermediate"],
                                             "terms": {"fkl": {"weight": 1.0, "temperature": 2.0},
                                                       "hid_seq": {"weight": 0.5}}}),
                            student_config=student.config, teacher_config=teacher.config, layer_map=[(1, 2), (2, 4)],
                            train_labels=None, num_labels=2)
    return teacher, student.train(), terms


def _chunk_worker(rank: int, port: int, out: dict) -> None:
    """Rank `rank` of 2: for an untied and a tied student head, the student, the teacher and hid_seq's projections
    sharded, causal_lm's loss (fkl + 0.5 hid_seq + 0.5 CE) over its row of the batch, whole logits (chunk 0) then 3
    rows at a time: the loss values and the gradients of the student and the projections, whole."""
    import torch.distributed as dist

    from distill_sweep.procedures.causal_lm_loss import distill_loss
    from distill_sweep.training import distributed, fsdp

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    torch.set_num_threads(1)
    world = distributed.setup(torch.device("cpu"))
    try:
        for tied in (False, True):
            teacher, student, terms = _chunk_models(tied)
            cpu = torch.device("cpu")
            fsdp.shard_student(student, cpu, "fp32")
            fsdp.shard_teacher(teacher, fsdp.SHARD, cpu, "fp32")  # its head gathered for the chunks (fsdp.gathered)
            fsdp.shard_modules({"objective": terms}, cpu, "fp32")  # hid_seq's W_h: applied by calling its module
            params = list(student.parameters()) + list(terms.parameters())
            mine = fsdp.rank_slice(_chunk_batch(), world)
            for chunk in (0, 3):
                step = fsdp.sharded_loss(distill_loss(student, teacher, terms, 0.5, None, chunk=chunk), params, None)
                value, parts = step(mine)
                value.backward()
                out[(tied, chunk, rank)] = (float(value.detach()), parts, [p.grad.full_tensor() for p in params])
                for p in params:
                    p.grad = None
        if "hidden_cache" in out:  # the teacher's hidden store (teacher_logits=hidden), built by the test
            out[("hidden", rank)] = _hidden_step(Path(out["hidden_cache"]), world)
    finally:
        dist.destroy_process_group()


def _hidden_step(cache: Path, world: Any) -> tuple[float, dict, list[torch.Tensor], bool]:
    """A rank's causal_lm loss (fkl + 0.5 CE) over its row of the batch from the teacher's hidden store, the teacher
    sharded, 3 rows at a time: the value, its parts, the student's gradients whole, whether it built the store."""
    from distill_sweep.procedures.causal_lm_loss import distill_loss
    from distill_sweep.teachers.hidden_store import open_or_build_hidden
    from distill_sweep.training import fsdp

    teacher, student, terms = _hidden_models()
    cpu = torch.device("cpu")
    store = open_or_build_hidden(teacher, _hidden_data(), cache_dir=cache, group="g", precision="fp32", device=cpu)
    fsdp.shard_student(student, cpu, "fp32")
    fsdp.shard_teacher(teacher, fsdp.SHARD, cpu, "fp32")  # its head gathered for the chunks (fsdp.gathered)
    params = list(student.parameters())
    step = fsdp.sharded_loss(distill_loss(student, teacher, terms, 0.5, store, "hidden", chunk=3), params, None)
    value, parts = step(fsdp.rank_slice(_chunk_batch(), world))
    value.backward()
    return float(value.detach()), parts, [p.grad.full_tensor() for p in params], store.built


def test_chunked_losses_under_fsdp_equal_whole_logits_and_one_process(tmp_path: Path) -> None:
    """The chunked losses apply the LM heads outside the models' forwards: the sharded student's root unit (its head)
    stays gathered to the backward, whose gradient FSDP then reduce-scatters with the root's; the sharded teacher's
    is gathered for the chunks. Value and every gradient equal whole logits' on 2 ranks, and one process's, with a
    separate and a tied student head; and with the teacher's logits made from its hidden store."""
    from distill_sweep.procedures.causal_lm_loss import distill_loss
    from distill_sweep.teachers.hidden_store import open_or_build_hidden

    teacher, student, terms = _hidden_models()  # the hidden store's check rides on the same two ranks
    assert open_or_build_hidden(teacher, _hidden_data(), cache_dir=tmp_path, group="g", precision="fp32",
                                device=torch.device("cpu")).built
    value = distill_loss(student, teacher, terms, 0.5, None, chunk=0)(_chunk_batch())[0]
    grads = torch.autograd.grad(value, list(student.parameters()))
    result = _spawned(_chunk_worker, hidden_cache=str(tmp_path))
    for rank in (0, 1):  # procedure.teacher_logits=hidden: each rank's rows from the store, the sharded teacher's
        v, parts, g, built = result.pop(("hidden", rank))  # head gathered: the live teacher's in one process
        assert not built and set(parts) == {"fkl", "ce"}
        assert v == pytest.approx(float(value.detach()), rel=1e-5)
        for a, b in zip(grads, g, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    assert len(result) == 8  # (untied, tied) x (whole, chunked) x 2 ranks
    for tied in (False, True):
        teacher, student, terms = _chunk_models(tied)  # one process, whole logits: the reference
        value = distill_loss(student, teacher, terms, 0.5, None, chunk=0)(_chunk_batch())[0]
        grads = torch.autograd.grad(value, list(student.parameters()) + list(terms.parameters()))
        assert len(grads) > len(list(student.parameters()))  # hid_seq's W_h (one per layer pair) trains too
        for (t, chunk, rank), (v, parts, g) in result.items():
            if t is not tied:
                continue
            assert set(parts) == {"fkl", "hid_seq", "ce"}, (tied, chunk, rank)
            assert v == pytest.approx(float(value.detach()), rel=1e-5), (tied, chunk, rank)
            for a, b in zip(grads, g, strict=True):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


def _hidden_models() -> tuple[torch.nn.Module, torch.nn.Module, torch.nn.Module]:
    """_chunk_models' teacher and untied student, with fkl alone (a hidden store serves the next-token terms)."""
    from distill_sweep.objectives import parse_objective
    from distill_sweep.objectives.core import build_objective

    teacher, student, _ = _chunk_models(False)
    terms = build_objective(parse_objective({"name": "x", "stages": ["intermediate"],
                                             "terms": {"fkl": {"weight": 1.0, "temperature": 2.0}}}),
                            student_config=student.config, teacher_config=teacher.config, layer_map=[(1, 2)],
                            train_labels=None, num_labels=2)
    return teacher, student, terms


def _hidden_data() -> Any:
    """_chunk_batch's two rows as training sequences (their row checks are the batch's)."""
    import numpy as np

    from distill_sweep.data.decoder import CausalData, Sequences

    split = Sequences(ids=_chunk_batch()["input_ids"].numpy(), lengths=np.array([6, 6]), first_target=np.array([1, 1]),
                      choice=np.array([-1, -1]))
    return CausalData("fsdp_hidden", split, split, 0, [], {"key": "fsdp-hidden-rows"})


"""Concurrency and faults: the same sweep started twice at once, the report read while a sweep writes, and a disk
that fills up (or fails) while a checkpoint, a record, the teacher-output store or the corpus cache is written.

The full-disk cases are real: a small tmpfs mounted for the test (root, as in CI; elsewhere they skip with one
line), filled to a chosen number of free bytes. The record's and the checkpoint's in-process cases patch the
write itself to fail part-way, so they run everywhere.
"""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from datasets import Dataset
from helpers import FAST, compose_cfg, mounted_tmpfs, records, run_cli_preloaded
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.analysis.frames import load_store
from distill_sweep.cli.run_job import run_job
from distill_sweep.config.parse import parse
from distill_sweep.data.corpus import load_corpus
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.errors import DiskWriteError
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.records import environment, files
from distill_sweep.records.locks import LOCK, JobLock, held_elsewhere
from distill_sweep.records.record import RECORD, InitInfo, Record, is_complete
from distill_sweep.teachers.output_store import open_or_build, store_problem
from distill_sweep.training import checkpoint as checkpoint_mod
from distill_sweep.training import stages
from distill_sweep.training.checkpoint import load_checkpoint, save_checkpoint
from distill_sweep.training.checkpoint_files import CHECKPOINT

JOB = [*FAST, "objective=vanilla_kd"]


@pytest.fixture(scope="module")
def cache(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The toy teacher fine-tuned once and its teacher-output store built, so the tests' jobs only distil; and
    the sizes of a job's checkpoints, in order (the full-disk checkpoint test leaves room for the first and half
    the second)."""
    out = tmp_path_factory.mktemp("warm")
    sizes = []

    def measured(path: Path, state: dict, **kw) -> None:
        save_checkpoint(path, state, **kw)
        if "student" in state:  # (not the teacher's, when the fixture fine-tunes it)
            sizes.append(path.stat().st_size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stages, "save_checkpoint", measured)
        run_job(compose_cfg([*JOB, "seed=99", "checkpoint.every_steps=2", f"results_dir={out}",
                             f"cache_dir={shared_cache}"]))
    return SimpleNamespace(dir=shared_cache, checkpoint_bytes=sizes)


def _popen(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


# ------------------------------------------------------------------------- two sweeps, one results directory
def test_the_same_sweep_started_twice_at_once_runs_every_job_once(tmp_path: Path, cache: SimpleNamespace) -> None:
    out = tmp_path / "results"
    seeds = (1, 2, 3, 4)
    grid = [*JOB, f"seed={','.join(map(str, seeds))}", "epochs=2", f"results_dir={out}", f"cache_dir={cache.dir}",
            "-m"]
    procs = [_popen(grid, cwd=tmp_path) for _ in range(2)]
    # meanwhile the report's reader, again and again: every record it reads is whole, never half-written JSON
    reads, statuses = 0, set()
    try:
        while any(p.poll() is None for p in procs):
            store = load_store(out)
            assert store.skipped == [], store.skipped
            statuses.update(store.records["status"] if not store.records.empty else [])
            reads += 1
            time.sleep(0.2)
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, output in zip(procs, outputs, strict=True):
        assert p.returncode == 0, output[-3000:]
        assert f"[{len(seeds)}/{len(seeds)}] completed" in output  # each command ends with the whole grid complete
    recs = records(out)
    assert sorted(r["seed"] for r in recs) == list(seeds)
    assert all(r["status"] == "completed" and is_complete(r) for r in recs)
    # each job ran in one process only: one "done" line over both commands, and one start in its record
    for seed in seeds:
        done = sum(o.count(f"- done toy/vanilla_kd init-1 seed {seed}:") for o in outputs)
        assert done == 1, f"seed {seed} ran {done} times"
    assert [r["attempts"] for r in recs] == [1] * len(seeds)
    assert reads >= 2 and statuses <= {"running", "completed"}
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp") or p.name == CHECKPOINT]
    report = run_cli_preloaded([str(out)], cwd=tmp_path, module="distill_sweep.report")
    assert report.returncode == 0, report.stderr[-2000:]
    assert f"jobs: {len(seeds)} completed, 0 failed, 0 running" in report.stdout


def test_the_report_never_reads_a_record_half_written(tmp_path: Path) -> None:
    """A writer rewrites a large record as fast as it can while the report's reader reads the store: it only ever
    sees whole records. The control dumps the same record into the file itself and is caught torn (about 39 reads
    in 40)."""
    record = json.loads(json.dumps(_a_record(), default=str))

    def in_place(path: Path, data: dict) -> None:  # json.dump into the file itself: torn while it writes
        with open(path, "w") as f:
            json.dump(data, f, indent=2)

    def torn_reads(write) -> int:
        path = tmp_path / write.__name__ / "toy" / "vanilla_kd" / "init-1" / "seed-1" / "abc" / RECORD
        path.parent.mkdir(parents=True)
        write(path, record)
        stop, torn = threading.Event(), 0

        def writer() -> None:
            while not stop.is_set():
                write(path, record)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for _ in range(40):
                store = load_store(tmp_path / write.__name__)
                torn += bool(store.skipped) or len(store.records) != 1
        finally:
            stop.set()
            thread.join()
        return torn

    assert torn_reads(files.write_json_atomic) == 0
    assert torn_reads(in_place) > 0  # the control: a reader that could see half a file does


def _a_record() -> dict:
    """A completed record with a long epoch history (a large file: a write takes a while)."""
    epochs = [{"stage": "prediction", "epoch": i + 1, "step": 8 * (i + 1), "train_loss": 0.5,
               "dev": {"accuracy": 0.5}} for i in range(3000)]
    return Record(task="toy", objective="vanilla_kd", seed=1, status="completed", primary_metric="accuracy",
                          epochs=epochs, best={"stage": "prediction", "epoch": 1, "dev": {"accuracy": 0.5}},
                          final={"dev": {"accuracy": 0.5}}, config={"task": {"name": "toy"}},
                          init=InitInfo(spec="1"), finished_at=environment.now_iso()).to_dict()


# ------------------------------------------------------------------------------------------------ the lock
def _hold_in_another_process(directory: Path) -> subprocess.Popen:
    """A process that takes the job's lock and sleeps (until killed)."""
    code = ("import sys, time; from pathlib import Path; from distill_sweep.records.locks import JobLock; "
            "assert JobLock(Path(sys.argv[1])).acquire(wait=False); print('held', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(directory)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_job_of_a_sweep_leaves_a_job_run_elsewhere_to_it_and_a_killed_holder_frees_it(tmp_path: Path,
                                                                                     cache: SimpleNamespace) -> None:
    cfg = compose_cfg([*JOB, "seed=7", f"results_dir={tmp_path / 'r'}", f"cache_dir={cache.dir}"])
    from distill_sweep.job.identity import identify

    where = identify(cfg).out_dir
    holder = _hold_in_another_process(where)
    try:
        assert held_elsewhere(where) and not JobLock(where).acquire(wait=False)
        assert "pid" in run_job(cfg, alone=False)["left_to_holder"]  # left to the holder: nothing run or written
        assert sorted(p.name for p in where.iterdir()) == [LOCK]
    finally:
        holder.kill()  # SIGKILL: what SLURM's preemption or a crash leaves; the kernel drops the lock
        holder.wait()
    assert not held_elsewhere(where)
    record = run_job(cfg, alone=False)  # a re-run (or a requeued job) takes the lock back and runs the job
    assert record["status"] == "completed" and record["attempts"] == 1


def test_a_job_run_on_its_own_waits_for_the_process_running_it(tmp_path: Path, cache: SimpleNamespace,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    cfg = compose_cfg([*JOB, "seed=8", f"results_dir={tmp_path / 'r'}", f"cache_dir={cache.dir}"])
    first = run_job(cfg)
    from distill_sweep.job.identity import identify

    mine = JobLock(identify(cfg).out_dir)  # another "process": flock conflicts between two descriptors
    assert mine.acquire(wait=False)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(run_job(cfg, alone=True)))
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        thread.start()
        deadline = time.monotonic() + 60
        while "waiting for" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert thread.is_alive() and "another process is running this job" in caplog.text  # it waits ...
        mine.release()
        thread.join(timeout=60)
    assert not thread.is_alive()  # ... until the lock is free
    assert result["finished_at"] == first["finished_at"]  # then found it completed: not run again


def _rank_takes(rank: int, port: int, directory: str) -> None:
    import distill_sweep.cli.run_job as train
    from distill_sweep.training import distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    distributed.setup(torch.device("cpu"))
    train.POLL_S = 0.2
    job = SimpleNamespace(settings=SimpleNamespace(run=SimpleNamespace(device="cpu")))
    try:
        held = JobLock(Path(directory) / "held")
        skipped = not train._take(held, job, wait=False)
        if rank == 0:  # the holder lets go a second after both ranks have found it held
            (Path(directory) / "skipped").touch()
        start = time.monotonic()
        waited = train._take(held, job, wait=True) and time.monotonic() - start
        free = JobLock(Path(directory) / "free")
        taken = (skipped, waited, train._take(free, job, wait=False), free._fd is not None)
        (Path(directory) / f"rank{rank}.json").write_text(json.dumps(taken))
    finally:
        distributed.teardown()


def test_several_ranks_of_one_job_agree_and_only_rank_0_holds_the_lock(tmp_path: Path) -> None:
    import socket

    import torch.multiprocessing as mp

    held = JobLock(tmp_path / "held")
    assert held.acquire(wait=False)

    def release_once_skipped() -> None:  # the other process ends while the ranks wait for it
        deadline = time.monotonic() + 120
        while not (tmp_path / "skipped").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        held.release()

    releaser = threading.Thread(target=release_once_skipped)
    releaser.start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:  # (spawned: a forked process would inherit the descriptor, and with it the lock)
        mp.spawn(_rank_takes, args=(port, str(tmp_path)), nprocs=2)
    finally:
        releaser.join()
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for rank, (skipped, waited, took, holds) in enumerate(ranks):
        assert skipped and waited > 0.5 and took  # both ranks skip, wait and run together
        assert holds == (rank == 0)  # rank 0 holds it for the job


# ------------------------------------------------------------------------------------------ disk faults
def test_a_record_write_that_fails_part_way_keeps_the_previous_record(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / RECORD
    files.write_json_atomic(path, {"status": "running"})

    def half_then_enospc(data, f, **kw) -> None:
        text = json.dumps(data, **kw)
        f.write(text[: len(text) // 2])
        f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.json, "dump", half_then_enospc)
    with pytest.raises(DiskWriteError) as err:
        files.write_json_atomic(path, {"status": "completed", "epochs": list(range(1000))})
    assert str(err.value) == (f"cannot write {path}: No space left on device [ENOSPC]; its previous content is "
                              "intact")
    assert json.loads(path.read_text()) == {"status": "running"}
    assert [p.name for p in tmp_path.iterdir()] == [RECORD]  # the temp file is gone

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.undo()
    monkeypatch.setattr(os, "fsync", eio)  # the one atomic write (records/disk.atomic_file) fsyncs
    with pytest.raises(DiskWriteError, match=r"^cannot write .*result\.json: Input/output error \[EIO\]; its previous"):
        files.write_json_atomic(path, {"status": "completed"})
    assert json.loads(path.read_text()) == {"status": "running"}


def test_a_job_whose_completed_record_cannot_be_written_completes_on_the_next_run(tmp_path: Path,
                                                                                  cache: SimpleNamespace,
                                                                                  monkeypatch) -> None:
    cfg = compose_cfg([*JOB, "seed=9", f"results_dir={tmp_path / 'r'}", f"cache_dir={cache.dir}"])
    dump = json.dump

    def no_space_for_the_final_record(data, f, **kw) -> None:
        if isinstance(data, dict) and data.get("status") == "completed":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        dump(data, f, **kw)

    monkeypatch.setattr(files.json, "dump", no_space_for_the_final_record)
    with pytest.raises(DiskWriteError, match="result.json: No space left on device"):
        run_job(cfg)
    (before,) = records(tmp_path / "r")
    assert before["status"] == "running"  # the record written at the start, whole
    assert list((tmp_path / "r").rglob(CHECKPOINT))  # and the last checkpoint: the work is not lost
    monkeypatch.undo()
    record = run_job(cfg)
    assert record["status"] == "completed" and record["attempts"] == 2 and record["resumed"] == 1
    assert not list((tmp_path / "r").rglob(CHECKPOINT))


def test_a_checkpoint_write_that_fails_part_way_keeps_the_previous_checkpoint(tmp_path: Path,
                                                                              monkeypatch) -> None:
    path = tmp_path / CHECKPOINT
    save_checkpoint(path, {"config_hash": "h", "step": 1})
    save = torch.save

    def some_bytes_then_enospc(obj, f, *args, **kw) -> None:
        f.write(b"PK\x03\x04" * 100)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint_mod.torch, "save", some_bytes_then_enospc)
    with pytest.raises(DiskWriteError) as err:
        save_checkpoint(path, {"config_hash": "h", "step": 2})
    assert str(err.value) == (f"cannot write {path}: No space left on device [ENOSPC]; the previous checkpoint.pt "
                              "is intact")
    monkeypatch.setattr(checkpoint_mod.torch, "save", save)
    assert load_checkpoint(path, "h") == {"config_hash": "h", "step": 1}
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs at tmp_path/disk (the test fills it to what it needs); skipped where mounting is refused."""
    yield from mounted_tmpfs(tmp_path / "disk", "size=8m")


def _fill(disk: Path, leave: int) -> Path:
    """Fill `disk` with a file until `leave` bytes are free; delete the file to free the space again."""
    stat = os.statvfs(disk)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))
    return filler


def _free(disk: Path) -> int:
    stat = os.statvfs(disk)
    return stat.f_bavail * stat.f_frsize


@pytest.mark.parametrize("sweep", [False, True], ids=["one-job", "sweep"])
def test_a_full_disk_while_checkpointing_is_one_line_and_the_job_resumes(tmp_path: Path, small_disk: Path,
                                                                        cache: SimpleNamespace, sweep: bool) -> None:
    """Room for the first checkpoint and half the second: the first is written, the second cannot be (its temp
    file fills the disk), the job stops with one line naming the checkpoint, which is the first one still; with space again
    the job resumes from it and completes. In a sweep the one line also says how many jobs failed."""
    out = small_disk / "r"
    args = [*JOB, "seed=10", "checkpoint.every_steps=2", f"results_dir={out}", f"cache_dir={cache.dir}"]
    first, second = cache.checkpoint_bytes[:2]
    filler = _fill(small_disk, leave=first + second // 2 + 64 * 1024)  # 64 kB: the record and the lock
    run = run_cli_preloaded([*args, "-m"] if sweep else args, cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-3000:]
    (ckpt,) = out.rglob(CHECKPOINT)
    errors = [line for line in run.stderr.splitlines() if line.startswith("distill_sweep:")]
    failed = "1 of 1 jobs failed (see their result.json); the first: " if sweep else ""
    assert errors == [f"distill_sweep: error: {failed}cannot write {ckpt}: No space left on device [ENOSPC]; the "
                      "previous checkpoint.pt is intact"], run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "Error executing job" not in run.stderr
    (record,) = records(out)
    assert record["status"] == "failed" and str(ckpt) in record["error"]
    state = load_checkpoint(ckpt, record["config_hash"])
    assert state is not None and state["position"]["step"] == 2  # the first checkpoint, whole
    assert sorted(p.name for p in ckpt.parent.iterdir()) == sorted([LOCK, CHECKPOINT, RECORD])
    filler.unlink()
    done = run_job(compose_cfg(args))
    assert done["status"] == "completed" and done["resumed"] == 1 and done["attempts"] == 2


@pytest.mark.parametrize("sweep", [False, True], ids=["one-job", "sweep"])
def test_a_full_disk_where_hydra_writes_is_refused_in_one_line(tmp_path: Path, small_disk: Path, sweep: bool) -> None:
    """Hydra writes its run (or sweep) directory before any job code runs; on a full disk it stopped there with a
    traceback. The command line refuses it first, in one line, and writes nothing."""
    _fill(small_disk, leave=16 * 1024)
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    args = [*JOB, f"{key}={small_disk / 'hydra'}", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"]
    run = run_cli_preloaded([*args, "seed=1,2", "-m"] if sweep else args, cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.splitlines() == [f"distill_sweep: error: {key}={small_disk / 'hydra'}: cannot write in "
                                       f"{small_disk}: No space left on device [ENOSPC]; nothing was written"]
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"] and not (tmp_path / "r").exists()

def _tiny_teacher() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=3)
    return BertForSequenceClassification(config).eval()


def _split(n: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    ids = [[1, *rng.integers(3, 40, size=int(rng.integers(2, 6))).tolist(), 2] for _ in range(n)]
    ds = Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids],
                            "labels": rng.integers(0, 3, size=n).tolist(), "idx": list(range(n))})
    return ds.map(lambda b: b, batched=True, new_fingerprint=f"split-{n}-{seed}")


def _store(model, train, cache_dir: Path):
    return open_or_build(model, train, cache_dir=cache_dir, task="t", group="g", precision="fp32",
                         device=torch.device("cpu"), batch_size=256, pad_token_id=0)


def test_a_full_disk_while_building_the_teacher_output_store(tmp_path: Path, small_disk: Path) -> None:
    """The logits array (48 kB) does not fit in 16 kB: refused when its blocks are reserved (unreserved, writing
    the memory map would kill the process with SIGBUS); no partial store is left, an earlier store is intact, and
    with space again the store is built, the same as one built on a roomy disk."""
    model, big = _tiny_teacher(), _split(4000)
    earlier = _store(model, _split(50, seed=1), small_disk)
    filler = _fill(small_disk, leave=16 * 1024)
    with pytest.raises(DiskWriteError) as err:
        _store(model, big, small_disk)
    message = str(err.value)
    assert "\n" not in message and "No space left on device [ENOSPC]" in message
    assert message.startswith(f"cannot write {small_disk / 'teacher_outputs' / 't'}/g-")
    assert message.endswith("the store was not built and nothing of it is left; the next job that needs it builds it")
    left = [p.name for p in (small_disk / "teacher_outputs" / "t").iterdir() if p.suffix != ".lock"]
    assert left == [earlier.path.name]  # nothing of the failed build (the stores' lock files stay, as always)
    assert store_problem(earlier.path, json.loads((earlier.path / "meta.json").read_text())["key"]) is None
    filler.unlink()
    again = _store(model, big, small_disk)
    assert again.built and torch.equal(again.logits, _store(model, big, tmp_path / "roomy").logits)


def test_a_full_disk_while_building_the_corpus_cache(tmp_path: Path, small_disk: Path, shared_cache: Path) -> None:
    """The packed rows fit, the masked arrays (300 kB each) do not: refused naming the array, no temporary
    directory left; with space again the cache is built, the same as on a roomy disk. 1000 documents: a
    multiple of the tokenizer's batch of 1000, which once failed with an IndexError."""
    settings = parse(CorpusSettings, {"name": "toy", "source": "toy", "num_documents": 1000, "dev_documents": 10,
                                      "max_seq_length": 16}, "corpus")
    tokenizer = build_toy_tokenizer(shared_cache)
    roomy = load_corpus(settings, tokenizer, tmp_path / "roomy")
    (small_disk / "corpora").mkdir()
    filler = _fill(small_disk, leave=roomy.train.ids.nbytes * 3 // 2)
    free = _free(small_disk)
    with pytest.raises(DiskWriteError) as err:
        load_corpus(settings, tokenizer, small_disk)
    message = str(err.value)
    del err  # its traceback holds the memory map of the deleted row file, and with it the file's blocks
    gc.collect()
    assert "\n" not in message and message.startswith(f"cannot write {small_disk / 'corpora'}/.toy-")
    assert ".npy: No space left on device [ENOSPC]; the corpus cache was not built" in message
    assert list((small_disk / "corpora").iterdir()) == [] and _free(small_disk) == free
    filler.unlink()
    built = load_corpus(settings, tokenizer, small_disk)
    assert built.built
    for name in ("train", "dev"):
        assert np.array_equal(getattr(built, name).ids, getattr(roomy, name).ids)
        assert np.array_equal(getattr(built, name).labels, getattr(roomy, name).labels)


def test_a_teacher_that_cannot_be_saved_is_saved_from_its_checkpoint_by_the_next_run(tmp_path: Path, monkeypatch,
                                                                                    caplog) -> None:
    from transformers import PreTrainedModel

    cfg = compose_cfg([*JOB, "seed=3", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"])

    def no_space(self, *args, **kwargs) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", no_space)
    with pytest.raises(DiskWriteError) as err:
        run_job(cfg)
    message = str(err.value)
    assert "\n" not in message and ": No space left on device [ENOSPC]; its checkpoint.pt is kept" in message
    (kept,) = list((tmp_path / "c").rglob(CHECKPOINT))  # the teacher's fine-tuning, at its end
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        record = run_job(cfg)
    assert record["status"] == "completed" and record["teacher"]["source"] == "trained" and not kept.exists()
    # the fine-tuning went on from its checkpoint (its last epoch), not from the start
    assert any(m.startswith(f"teacher resuming from {kept}") for m in caplog.messages), caplog.messages


def test_a_full_disk_while_tokenising_is_one_line_and_the_next_run_tokenises(tmp_path: Path, small_disk: Path,
                                                                             shared_cache: Path) -> None:
    from distill_sweep.data.glue import tokenize_splits
    from distill_sweep.data.toy import generate_toy
    from distill_sweep.job.identity import identify

    raw = {"train": generate_toy(4000, 10, seed=5)["train"]}
    task = identify(compose_cfg([*JOB, f"results_dir={tmp_path}"])).settings.task  # the toy task
    tokenizer = build_toy_tokenizer(shared_cache)
    filler = _fill(small_disk, leave=64 * 1024)  # far less than 4000 tokenised rows
    with pytest.raises(DiskWriteError) as err:
        tokenize_splits(raw, tokenizer, task, small_disk)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"cannot write {small_disk / 'tokenized'}/toy-train-")
    assert message.endswith(": No space left on device [ENOSPC]; no tokenised split was stored: the next run "
                            "tokenises it again")
    # no cache file under its name (datasets' own temp file may stay: it is never read)
    assert not list((small_disk / "tokenized").glob("*.arrow"))
    filler.unlink()
    again = tokenize_splits(raw, tokenizer, task, small_disk)["train"]
    assert len(again) == 4000 and again[0]["input_ids"][0] == tokenizer.cls_token_id

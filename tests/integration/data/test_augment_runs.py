"""TinyBERT's data augmentation (task.augment=tinybert): the tests that run a job, a command or processes (its fast
tests: tests/unit/data/test_augment.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg, run_cli_preloaded, save_toy_mlm

from distill_sweep.cli.run_job import run_job


def _job(tmp: Path, mlm: Path, *extra: str) -> dict:
    return run_job(compose_cfg([*FAST, "objective=vanilla_kd", "task.recipe.num_train=48", f"results_dir={tmp / 'r'}",
                                f"cache_dir={tmp / 'cache'}", *extra,
                                f"task.augment={{name: tinybert, mlm: '{mlm}', samples: 3}}"]))


def test_the_augmented_split_is_built_once_keyed_and_labelled_by_the_teacher(tmp_path: Path) -> None:
    mlm = save_toy_mlm(tmp_path / "mlm", tmp_path / "cache")
    first = _job(tmp_path, mlm, "seed=1")
    second = _job(tmp_path, mlm, "seed=2")
    assert (first["augment"]["built"], second["augment"]["built"]) == (True, False)
    assert first["augment"]["key"] == second["augment"]["key"]
    assert first["augment"]["original_rows"] == 48 < first["augment"]["rows"] <= 48 * (1 + 2 * 3)
    assert first["data"]["train_size"] == first["augment"]["rows"]
    # the soft labels: the teacher's logits over the augmented split, from its output store
    store = Path(first["teacher_outputs"]["path"])
    assert json.loads((store / "meta.json").read_text())["rows"] == first["augment"]["rows"]
    other = run_job(compose_cfg([*FAST, "objective=vanilla_kd", "task.recipe.num_train=48", "seed=3",
                                 f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'cache'}",
                                 f"task.augment={{name: tinybert, mlm: '{mlm}', samples: 3, p: 0.3}}"]))
    assert other["augment"]["built"] and other["augment"]["key"] != first["augment"]["key"]
    # the teacher is fine-tuned on the original split: the same cached teacher as a job without augmentation
    plain = run_job(compose_cfg([*FAST, "objective=vanilla_kd", "task.recipe.num_train=48",
                                 f"results_dir={tmp_path / 'plain'}", f"cache_dir={tmp_path / 'cache'}"]))
    assert plain["teacher"]["path"] == first["teacher"]["path"] and plain["config_hash"] != first["config_hash"]


@pytest.mark.parametrize("override, message", [
    ("task.augment=tinybert", "task.augment=tinybert needs a masked LM: the teacher has no pre-trained weights"),
    ("task.augment={name: tinybert, p: 1.5}", "task.augment.p=1.5"),
    ("task.augment=eda", "task.augment.name"),
    ("task.augment={name: tinybert, embeddings: /no/glove.txt}", "task.augment.embeddings='/no/glove.txt' is not a file"),
    ("task.augment={name: tang, p_mask: 0.6, p_pos: 0.6}", "p_mask + p_pos = 1.2 > 1"),
])
def test_augmentation_that_cannot_run_is_refused_in_one_line(tmp_path: Path, override: str, message: str) -> None:
    proc = run_cli_preloaded([*FAST, override, f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"], cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_tang_job_needs_no_model_and_shares_its_split(tmp_path: Path) -> None:
    first = _tang_job(tmp_path, "seed=1")
    second = _tang_job(tmp_path, "seed=2")
    assert (first["augment"]["built"], second["augment"]["built"]) == (True, False)
    assert first["augment"]["samples"] == 20 and first["augment"]["rows"] > first["augment"]["original_rows"] == 48
    assert json.loads((Path(first["teacher_outputs"]["path"]) / "meta.json").read_text())["rows"] == \
        first["augment"]["rows"]  # the teacher labels every sample
    other = _tang_job(tmp_path, "seed=3", "task.augment={name: tang, p_mask: 0.2}")
    assert other["augment"]["built"] and other["augment"]["key"] != first["augment"]["key"]


def _tang_job(tmp: Path, *extra: str) -> dict:
    overrides = [*FAST, "objective=vanilla_kd", "task.recipe.num_train=48", f"results_dir={tmp / 'r'}",
                 f"cache_dir={tmp / 'cache'}", "task.augment=tang", *extra]
    return run_job(compose_cfg(overrides))


def test_an_augmented_split_that_cannot_be_written_is_one_line_and_built_by_the_next_run(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    import errno
    import os

    from datasets import Dataset

    from distill_sweep.errors import DiskWriteError

    to_parquet = Dataset.to_parquet

    def half_then_no_space(self, path, *args, **kwargs):
        Path(path).write_bytes(b"PAR1 half a file")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Dataset, "to_parquet", half_then_no_space)
    with pytest.raises(DiskWriteError) as err:
        _tang_job(tmp_path, "seed=1")
    assert "\n" not in str(err.value) and str(err.value).endswith(
        ".parquet: No space left on device [ENOSPC]; no augmented split was stored: the next run builds it again")
    left = {p.name.split(".", 1)[1] for p in (tmp_path / "cache" / "augmented").rglob("*") if p.is_file()}
    assert left == {"parquet.lock"}  # nothing half-written left (the lock file stays, as it always does)
    monkeypatch.setattr(Dataset, "to_parquet", to_parquet)
    assert _tang_job(tmp_path, "seed=1")["augment"]["built"] is True

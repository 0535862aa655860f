"""procedure=causal_lm: its data layout, block importance, the top-k store, refusals, and a small sweep end to end
(records, the teacher cache, the store built once, the report's decoder table)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import CAUSAL_FAST as FAST
from helpers import compose_cfg
from tiny_models import tiny_llama

from distill_sweep.data.decoder import IGNORE, from_instructions
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.students.prune import block_importance, prune_layers
from distill_sweep.teachers.sparse_store import open_or_build_topk


def test_instruction_sequences_predict_only_the_response_and_eos(tmp_path: Path, shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    path = tmp_path / "pairs.jsonl"
    rows = [{"q": "the soup was good", "a": "good"}, {"q": "the tea was cold and the bed was dirty", "a": "bad"},
            {"q": "the view was nice", "a": "but"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    settings = InstructionSettings(name="pairs", source="jsonl", path=str(path), prompt_field="q", response_field="a",
                                   dev_examples=1, choices=["good", "but", "bad"])
    data = from_instructions(settings, tok, max_seq_length=16)
    assert len(data.dev) == 1 and len(data.train) == 2
    batch = data.batch(data.train, np.array([0, 1]))
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    words = ["the", "tea", "was", "cold", "and", "the", "bed", "was", "dirty"]
    ids_of = tok.convert_tokens_to_ids
    # row 0 is the 2nd pair: [CLS] prompt(9) bad [SEP]; targets: "bad" (predicted at the last prompt token) and [SEP]
    assert ids[0, :12].tolist() == [tok.cls_token_id, *ids_of(words), ids_of("bad"), tok.sep_token_id]
    want = [IGNORE] * 9 + [ids_of("bad"), tok.sep_token_id, IGNORE]
    assert labels[0, :12].tolist() == want
    # row 1 (the 3rd pair) is shorter: right padding, nothing predicted there
    assert mask[1].tolist() == [1] * 7 + [0] * 5 and (labels[1, 6:] == IGNORE).all()
    assert labels[1, 4].item() == ids_of("but") and labels[1, 5].item() == tok.sep_token_id
    assert data.train.choice.tolist() == [2, 1] and data.choice_ids == ids_of(["good", "but", "bad"])


def test_parquet_instructions_read_as_the_same_pairs_as_jsonl(tmp_path: Path):
    import pandas as pd

    from distill_sweep.data.decoder import read_pairs

    rows = [{"q": f"prompt {i}", "a": f"answer {i}", "other": i} for i in range(5)]
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pd.DataFrame(rows).to_parquet(tmp_path / "pairs.parquet")
    common = dict(prompt_field="q", response_field="a", dev_examples=1)
    want = [(r["q"], r["a"]) for r in rows]
    assert read_pairs(InstructionSettings(source="jsonl", path=str(tmp_path / "pairs.jsonl"), **common)) == want
    assert read_pairs(InstructionSettings(source="parquet", path=str(tmp_path / "pairs.parquet"), **common)) == want
    # a missing column, and a file that is not Parquet: one line naming the columns
    for path, fields in ((tmp_path / "pairs.parquet", dict(prompt_field="question", response_field="a")),
                         (tmp_path / "pairs.jsonl", dict(prompt_field="q", response_field="a"))):
        with pytest.raises(ConfigError, match="not a Parquet file with columns") as err:
            read_pairs(InstructionSettings(source="parquet", path=str(path), dev_examples=1, **fields))
        assert "\n" not in str(err.value)


def test_instruction_jobs_ignore_the_corpus(tmp_path: Path):
    """data=instructions reads no corpus: the corpus is out of the job's hash, and a corpus chosen on the command
    line (not the procedure's default) is named as ignored; data=corpus hashes it."""
    from distill_sweep.job.identity import identify

    base = [*FAST, "procedure.data=instructions", f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]
    plain = identify(compose_cfg(base))
    other = identify(compose_cfg([*base, "corpus.max_seq_length=48"]))
    assert plain.digest == other.digest and plain.ignored == []
    chosen = identify(compose_cfg([*base, "corpus=wikitext103"]))
    assert chosen.ignored == ["corpus=wikitext103 (procedure=causal_lm reads no corpus with these procedure settings)"]
    on_corpus = [*FAST, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]
    assert identify(compose_cfg(on_corpus)).digest != identify(compose_cfg([*on_corpus, "corpus.max_seq_length=48"])).digest


def test_block_importance_drops_a_layer_that_does_nothing():
    model = tiny_llama(layers=4)
    with torch.no_grad():  # layer 3 adds nothing to its residual stream: its output is its input
        model.model.layers[2].self_attn.o_proj.weight.zero_()
        model.model.layers[2].mlp.down_proj.weight.zero_()
    ids = torch.randint(1, 50, (3, 6), generator=torch.Generator().manual_seed(0))
    scores = block_importance(model, [{"input_ids": ids, "attention_mask": torch.ones_like(ids)}], torch.device("cpu"))
    assert scores[2] == pytest.approx(0.0, abs=1e-6) and min(scores[:2] + scores[3:]) > 1e-3
    assert prune_layers(scores, 3) == [1, 2, 4]
    assert prune_layers([0.5, 0.1, 0.5, 0.2], 2) == [1, 3]  # ties: the lower layer first; kept in order


def test_topk_store_holds_the_teachers_top_log_probabilities_and_gathers_by_row(tmp_path: Path, shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=40, dev_examples=8), tok, max_seq_length=48)
    teacher = tiny_llama()
    teacher.resize_token_embeddings(len(tok))
    store = open_or_build_topk(teacher, data, 5, cache_dir=tmp_path, device=torch.device("cpu"), precision="fp32",
                               group="g")
    assert store.built
    batch = data.batch(data.train, np.array([3, 17, 30]))
    values, indices = store.gather(batch)
    with torch.no_grad():
        logits = teacher(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        top = torch.log_softmax(logits, -1).topk(5, -1)
    real = batch["attention_mask"].bool()
    # float16: about 3 significant digits of log-probabilities of a few units
    torch.testing.assert_close(values[real], top.values[real], rtol=1e-3, atol=1e-3)
    assert torch.equal(indices[real], top.indices[real])
    again = open_or_build_topk(teacher, data, 5, cache_dir=tmp_path, device=torch.device("cpu"), precision="fp32",
                               group="g")
    assert not again.built and again.key == store.key


@pytest.mark.parametrize("overrides,message", [
    (["objective=att_kl"], "needs per-layer query/key/value, which the student does not provide: rotary"),
    (["teacher=tiny", "objective=fkl"], "next-token distributions of decoder LMs"),
    (["objective=fkl_hid_seq", "procedure.teacher_top_k=4"], "term hid_seq reads its hidden states"),
    (["objective=vanilla_kd"], "objective=vanilla_kd distils a classifier's logits in a prediction stage, which "
                               "procedure=causal_lm does not run"),
    # a decoder's first token ([BOS]) sees only itself: its state is the same for every sequence
    (["objective=hid_cls"], r"term hid_cls of objective=hid_cls reads the first token's state \(\[CLS\]\); a "
                            "decoder's first token is"),
    (["objective=pkd"], "term pkd_cls of objective=pkd reads the first token's state"),
    (["student=sps", "student.num_layers=4", "student.shared_layers=1"], "student=sps is not built for decoders"),
    (["procedure=task_specific", "teacher=tiny", "task=toy", "init=prune"], "init=prune chooses decoder layers"),
    (["procedure=task_specific", "teacher=tiny_llama", "task=toy"], "is a decoder LM .llama.: procedure=task_specific"),
    (["procedure.data=instructions", "procedure.instructions.source=jsonl"], "path is required for source=jsonl"),
    # the tiny teacher's vocabulary is the toy tokenizer's 68 tokens, not its config class' default (32000)
    (["objective=fkl", "procedure.teacher_top_k=69"], r"teacher_top_k=69 is larger than the vocabulary \(68\)"),
    (["procedure.data=instructions", "procedure.instructions.source=parquet", "procedure.instructions.path=/nonexistent"],
     "no such file"),
])
def test_refused_in_one_line_before_any_work(overrides, message, tmp_path: Path):
    base = FAST if not overrides[0].startswith("procedure=") else ["logger=none", "student.num_layers=2"]
    cfg = compose_cfg([*base, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message):
        prepare(cfg)
    assert not (tmp_path / "r").exists()


def test_decoder_tests_carry_the_ci_and_effect_size_of_the_difference():
    """The decoder table's comparisons as the encoder tables': the t-interval of the mean difference that the
    paired t-test inverts (scipy's) and Cohen's d_z, worked by hand here on 3 seed pairs."""
    from scipy import stats as sps

    from distill_sweep.report import decoder

    ppl = {("fkl", 1): 9.0, ("fkl", 2): 9.5, ("fkl", 3): 9.2, ("rkl", 1): 9.3, ("rkl", 2): 9.6, ("rkl", 3): 9.8}
    frame = pd.DataFrame([{"setting": "s", "objective": o, "init": "skip", "layers": "2,4,6", "seed": s,
                           "teacher_dev": {"perplexity": 8.0}, "perplexity": v, "token_accuracy": 0.3,
                           "choice_accuracy": None} for (o, s), v in ppl.items()])
    ((_, _, _, headers, tests, _),) = decoder.tables(frame, ddof=1, alpha=0.05)
    row = dict(zip(headers, tests[0], strict=True))
    diffs = np.array([0.3, 0.1, 0.6])  # rkl - fkl per seed
    assert row["mean diff"] == f"{diffs.mean():+.3f}"
    assert row["d"] == f"{diffs.mean() / diffs.std(ddof=1):.2f}"  # 0.333 / 0.252 = 1.32
    ref = sps.ttest_rel([9.3, 9.6, 9.8], [9.0, 9.5, 9.2]).confidence_interval(0.95)
    assert row["95% CI"] == f"[{ref.low:+.3f}, {ref.high:+.3f}]"  # mean 0.333 +- 4.30 * 0.252 / sqrt(3)
    assert row["t"] == f"{sps.ttest_rel([9.3, 9.6, 9.8], [9.0, 9.5, 9.2]).statistic:.2f}"


def test_dev_metrics_equal_a_row_by_row_computation(shared_cache: Path):
    """token accuracy, perplexity and the next-token choice of padded dev batches = each sequence alone."""
    from distill_sweep.teachers.decoder import lm_evaluator

    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=30, dev_examples=10), tok, max_seq_length=48)
    model = tiny_llama()
    model.resize_token_embeddings(len(tok))
    got = lm_evaluator(data)(model, {"validation": lambda: data.dev_batches(4)}, None, torch.device("cpu"), "fp32")
    # procedure.logit_chunk: the same metrics and per-sequence sums made 5 predicting rows at a time (a batch has
    # dozens), and over the first 40 ids only (procedure.vocab=shared_prefix)
    for ids in (None, 40):
        sums: list[dict] = []
        whole = lm_evaluator(data, sums.append, ids=ids)(model, {"validation": lambda: data.dev_batches(4)}, None,
                                                          torch.device("cpu"), "fp32")
        chunked = lm_evaluator(data, sums.append, ids=ids, chunk=5)(
            model, {"validation": lambda: data.dev_batches(4)}, None, torch.device("cpu"), "fp32")
        assert chunked.keys() == whole.keys() and chunked == pytest.approx(whole, rel=1e-6)
        np.testing.assert_allclose(sums[1]["nll"], sums[0]["nll"], rtol=1e-6)
        assert all(np.array_equal(sums[1][k], sums[0][k]) for k in ("targets", "correct"))
    assert whole["token_accuracy"] != got["token_accuracy"] or whole["nll"] != got["nll"]  # 40 ids: other numbers
    nll, right, count, chosen = 0.0, 0, 0, 0
    with torch.no_grad():
        for i in range(len(data.dev)):
            n, first = int(data.dev.lengths[i]), int(data.dev.first_target[i])
            ids = torch.as_tensor(data.dev.ids[i, :n])[None]
            logp = torch.log_softmax(model(input_ids=ids).logits[0], -1)
            for t in range(first - 1, n - 1):  # position t predicts token t + 1
                nll -= float(logp[t, ids[0, t + 1]])
                right += int(logp[t].argmax() == ids[0, t + 1])
                count += 1
            choice = int(logp[first - 1, data.choice_ids].argmax())
            chosen += int(choice == int(data.dev.choice[i]))
    assert got["token_accuracy"] == pytest.approx(right / count)
    assert got["perplexity"] == pytest.approx(float(np.exp(nll / count)), rel=1e-5)
    assert got["choice_accuracy"] == pytest.approx(chosen / len(data.dev))


def test_a_decoder_tokenizer_packs_the_corpus_in_memory_as_the_cache_does(tmp_path: Path, shared_cache: Path):
    """A tokenizer with BOS/EOS but no [CLS]/[SEP]/[MASK] (a decoder's) packs the same documents in memory; with
    BOS/EOS on the toy tokenizer's [CLS]/[SEP] ids it gives exactly the cache path's unmasked sequences."""
    from transformers import PreTrainedTokenizerFast

    from distill_sweep.data.corpus_settings import CorpusSettings
    from distill_sweep.data.decoder import from_corpus
    from distill_sweep.models.toy_vocabulary import _build_backend

    settings = CorpusSettings(name="toy", source="toy", num_documents=40, dev_documents=5, max_seq_length=32)
    toy = build_toy_tokenizer(shared_cache)
    cached = from_corpus(settings, toy, tmp_path)
    decoder_tok = PreTrainedTokenizerFast(tokenizer_object=_build_backend(), unk_token="[UNK]", pad_token="[PAD]",
                                          bos_token="[CLS]", eos_token="[SEP]")
    assert decoder_tok.cls_token_id is None and decoder_tok.mask_token_id is None
    memory = from_corpus(settings, decoder_tok, tmp_path)
    assert memory.info["packing"].startswith("in memory")
    for a, b in ((cached.train, memory.train), (cached.dev, memory.dev)):
        assert np.array_equal(a.lengths, b.lengths)
        for i in range(len(a)):
            assert np.array_equal(a.ids[i, :a.lengths[i]], b.ids[i, :b.lengths[i]])

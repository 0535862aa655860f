"""Instruction files (procedure.instructions, JSONL and Parquet) read and checked whole before a job starts
(data/instruction_files.py, called by job.check_paths): each kind of bad file is one DataError naming the file and
the line or row, and the job's own reader (data/decoder.read_pairs) gives exactly the checked pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import compose_cfg

from distill_sweep.data.decoder import read_pairs
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.data.instruction_files import check_file, read_file_pairs
from distill_sweep.errors import DataError
from distill_sweep.job.identity import check_paths, identify


def jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def good(n: int) -> list[dict[str, str]]:
    return [{"prompt": f"question {i}", "response": f"answer {i}"} for i in range(n)]


def settings(path: Path, **kw: object) -> InstructionSettings:
    source = "parquet" if path.suffix == ".parquet" else "jsonl"
    return InstructionSettings(source=source, path=str(path), **{"dev_examples": 2, **kw})  # type: ignore[arg-type]


def refused(path: Path, **kw: object) -> str:
    with pytest.raises(DataError) as err:
        check_file(settings(path, **kw), batch_size=2)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


# ------------------------------------------------------------------------------------------------- JSONL
@pytest.mark.parametrize("value,named", [
    (None, "'response' is null, not a string"),
    (["a", "b"], "'response' is a list (['a', 'b']), not a string"),
    (3, "'response' is a number (3), not a string"),
    ({"text": "x"}, "'response' is an object ({'text': 'x'}), not a string"),
])
def test_a_value_that_is_not_a_string_names_its_line(tmp_path: Path, value: object, named: str) -> None:
    rows: list[object] = good(6)
    rows[3] = {"prompt": "p", "response": value}
    path = jsonl(tmp_path / "d.jsonl", rows)
    assert refused(path) == f"{path} line 4: {named}"
    # the job's reader refuses it too: before, str() trained on 'None' or "['a', 'b']"
    with pytest.raises(DataError, match="line 4"):
        read_pairs(settings(path))


def test_non_utf8_bytes_name_the_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"prompt": "a", "response": "b"}\n{"prompt": "caf\xe9", "response": "b"}\n')
    assert refused(path) == f"{path} line 2: not UTF-8 text (byte 0xe9 at column 16); re-save the file as UTF-8"


def test_a_json_array_is_not_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "array.jsonl"
    path.write_text(json.dumps(good(6), indent=1))
    assert refused(path).startswith(f"{path} line 1: a JSON array, not JSON Lines: write one object per line")
    path.write_text(json.dumps(good(6)))  # on one line
    assert refused(path).startswith(f"{path} line 1: a JSON array, not JSON Lines")


@pytest.mark.parametrize("line,named", [
    ('{"prompt": "a", "response": "b"', "line 3: not a JSON object (Expecting ',' delimiter at column 32)"),
    ('"just text"', "line 3: a string ('just text'), not a JSON object with 'prompt' and 'response'"),
    ('{"prompt": "a", "answer": "b"}', "line 3: no 'response' (it has 'prompt', 'answer'; "
                                       "procedure.instructions.prompt_field and .response_field name the keys)"),
])
def test_a_line_that_is_no_pair_names_its_line(tmp_path: Path, line: str, named: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join([json.dumps(r) for r in good(2)] + [line] + [json.dumps(r) for r in good(3)]) + "\n")
    assert refused(path) == f"{path} {named}"


def test_a_compressed_file_is_named_as_such(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "d.jsonl"
    path.write_bytes(gzip.compress(b'{"prompt": "a", "response": "b"}\n'))
    assert refused(path) == f"{path}: gzip-compressed, not JSON Lines text: extract it first"


def test_too_few_examples_for_the_dev_slice_or_a_batch(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", good(3))
    assert refused(path, dev_examples=3) == (f"{path}: 3 examples, not more than procedure.instructions."
                                             "dev_examples=3 (the dev slice), so nothing is left to train on")
    assert refused(path, dev_examples=2) == (f"{path}: 3 examples leave 1 to train on after procedure.instructions."
                                             "dev_examples=2, fewer than one batch (procedure.batch_size=2)")
    check_file(settings(path, dev_examples=1), batch_size=2)  # 2 left: one batch


def test_blank_lines_are_skipped_and_lines_past_max_examples_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join([json.dumps(r) for r in good(2)] + ["", "  "] + [json.dumps(r) for r in good(4)[2:]]
                              + ['{"prompt": null}']) + "\n")
    assert refused(path) == f"{path} line 7: 'prompt' is null, not a string"
    pairs = read_file_pairs(settings(path, max_examples=4))
    assert pairs == [(f"question {i}", f"answer {i}") for i in range(4)]
    assert read_pairs(settings(path, max_examples=4)) == pairs  # the job reads what was checked


# ----------------------------------------------------------------------------------------------- Parquet
def parquet(path: Path, prompts: list, responses: list) -> Path:
    pq.write_table(pa.table({"prompt": prompts, "response": responses}), path)
    return path


def test_parquet_nulls_and_other_types_name_the_row(tmp_path: Path) -> None:
    prompts = [f"q{i}" for i in range(6)]
    path = parquet(tmp_path / "nulls.parquet", prompts, ["a", "b", "c", None, "e", "f"])
    assert refused(path) == f"{path} row 3 (from 0): 'response' is null, not a string (the column is string)"
    path = parquet(tmp_path / "lists.parquet", prompts, [["a", "b"]] * 6)
    assert refused(path) == (f"{path} row 0 (from 0): 'response' is a list (['a', 'b']), not a string (the column "
                             "is list<element: string>)")
    path = parquet(tmp_path / "numbers.parquet", list(range(6)), ["a"] * 6)
    assert refused(path).startswith(f"{path} row 0 (from 0): 'prompt' is a number (0), not a string")
    path = parquet(tmp_path / "fine.parquet", prompts, ["a"] * 6)
    assert read_file_pairs(settings(path)) == [(p, "a") for p in prompts]


def test_a_file_that_is_not_parquet_or_lacks_a_column(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    path.write_text('{"prompt": "a", "response": "b"}\n')
    assert refused(path).startswith(f"{path}: not a Parquet file with columns 'prompt' and 'response' (")
    pq.write_table(pa.table({"prompt": ["a"] * 6, "answer": ["b"] * 6}), path)
    assert "'response'" in refused(path)


# ---------------------------------------------------------------------------------- before any job starts
def test_check_paths_reads_the_instruction_file_of_a_decoder_job(tmp_path: Path) -> None:
    rows: list[object] = good(40)
    rows[30] = {"prompt": None, "response": "x"}
    path = jsonl(tmp_path / "d.jsonl", rows)
    job = identify(compose_cfg(["procedure=causal_lm", "teacher=tiny_llama", "procedure.data=instructions",
                                "procedure.instructions.source=jsonl", f"procedure.instructions.path={path}",
                                "procedure.instructions.dev_examples=4", f"results_dir={tmp_path / 'r'}",
                                f"cache_dir={tmp_path / 'c'}"]))  # the identity alone reads no file
    with pytest.raises(DataError, match=f"^{path} line 31: 'prompt' is null, not a string$"):
        check_paths(job)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()

"""transformers' load report (a table with terminal colour codes, written into log files too) as one line."""

from __future__ import annotations

import logging
from pathlib import Path

from distill_sweep.models.load_report import REPORTING_LOGGER, one_line, one_line_load_reports


def test_a_backbone_loaded_as_a_classifier_is_reported_in_one_line(tmp_path: Path) -> None:
    """A bare encoder checkpoint loaded into a sequence classifier lacks the head's two weights: one line naming
    them as transformers' own handler receives it, no colour code, no table."""
    from transformers import AutoModelForSequenceClassification, BertConfig, BertModel

    BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(tmp_path)
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    one_line_load_reports()
    one_line_load_reports()  # idempotent: one filter
    assert sum(type(f).__name__ == "OneLineLoadReport" for f in logging.getLogger(REPORTING_LOGGER).filters) == 1
    collect = Collect()
    logging.getLogger(REPORTING_LOGGER).addHandler(collect)  # after the logger's filter, as transformers' own
    try:
        AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    finally:
        logging.getLogger(REPORTING_LOGGER).removeHandler(collect)
    (line,) = [line for line in seen if "loaded from" in line]
    assert "\n" not in line and "\x1b" not in line and "LOAD REPORT" not in line
    assert line.startswith(f"BertForSequenceClassification loaded from {tmp_path}: missing 2 (classifier.")

def test_one_line_names_each_status_and_counts_the_rest() -> None:
    table = ("\x1b[1mBertModel LOAD REPORT\x1b[0m from: some/dir\nKey | Status | \n----+--------+-\n"
             + "".join(f"w{i} | UNEXPECTED | \n" for i in range(6)) + "c.bias | MISSING | \n\nNotes:\n- MISSING:\tx")
    assert one_line(table) == ("BertModel loaded from some/dir: unexpected 6 (w0, w1, w2, w3, ...); "
                               "missing 1 (c.bias)")

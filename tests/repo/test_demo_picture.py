"""The README's demo picture is captioned with the report command `make demo` runs (its results directory)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_pictures_caption_is_make_demos_report_command() -> None:
    makefile = (ROOT / "Makefile").read_text()
    results = re.search(r"^DEMO_RESULTS \?= (\S+)$", makefile, re.M)
    assert results is not None
    report = re.search(r"^\t\$\(BIN\)/python (-m distill_sweep\.report .*)$", makefile, re.M)
    assert report is not None
    command = "$ python " + report.group(1).replace("$(DEMO_RESULTS)", results.group(1))
    spec = importlib.util.spec_from_file_location("demo_picture", ROOT / "docs" / "hooks" / "demo_picture.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert hook.CAPTION == command
    assert f'class="t">{command}</text>' in (ROOT / "docs" / "assets" / "demo-report.svg").read_text()

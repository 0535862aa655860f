"""The decoder teacher (procedure=causal_lm) and its top-k store recover from damage, interruption, a moved cache
and concurrent jobs as encoder teachers and their stores do: the tests that run a job, a command or processes
(its fast tests: tests/unit/teachers/test_decoder_teacher.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import ROOT

from distill_sweep.models.toy_vocabulary import build_toy_tokenizer


def test_two_processes_at_once_train_the_decoder_teacher_once(tmp_path: Path) -> None:
    # both processes meet (a file each) before asking for the teacher: their requests overlap by construction
    script = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(ROOT / "tests")!r})
        import torch
        torch.set_num_threads(1)
        from test_decoder_teacher import instructions, teacher
        from pathlib import Path
        cache, me = Path(sys.argv[1]), sys.argv[2]
        data, tok = instructions(cache)
        (cache / f"ready-{{me}}").touch()
        while len(list(cache.glob("ready-*"))) < 2:
            time.sleep(0.01)
        _, info = teacher(cache, data, tok)
        print(json.dumps(info))
    """)
    build_toy_tokenizer(tmp_path)  # (both would build it too, each in its own directory renamed into place)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(n)],
                              cwd=ROOT / "tests" / "unit" / "teachers", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for n in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    infos = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert sorted(i["cache"] for i in infos) == ["built", "reused"]  # one training, the other waited and reused it
    assert infos[0]["path"] == infos[1]["path"]
    assert len(list((tmp_path / "teachers").glob("*/*/teacher.json"))) == 1

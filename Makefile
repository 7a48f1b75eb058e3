# Two commands: `make figures` (regenerate the artifacts and figures/REPORT.md) and `make test`.
# Each installs what it needs into the project's own virtual environment .venv first (created with
# python3 -m venv if missing; `pip install -e '.[dev]'`; a stamp file makes later runs skip this).

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.fedpaper-installed
NBSTRIP := $(VENV)/.nbstripout-installed
# The Jupyter server extension fedpaper.jupyter_save (JupyterLab saves the project's notebooks without outputs):
# pyproject.toml's data-files install this config in a regular install; an editable one (pip install -e) skips
# data files, so the venv step copies it where they go.
JUPYTER_SAVE_CONFIG := jupyter-config/jupyter_server_config.d/fedpaper.json
JUPYTER_SAVE_CONFIG_DIR := etc/jupyter/jupyter_server_config.d
# Besides outputs, execution counts and widget state (nbstripout's defaults), the filter drops what
# a kernel or papermill writes into a notebook's metadata (tests/test_notebooks.py reads this line).
NBSTRIPOUT_EXTRA_KEYS := metadata.language_info metadata.papermill cell.metadata.papermill
PROFILE ?= quick
ONLY ?=
# Data sets to fetch beyond the small public ones (`DOWNLOAD=all`, `DOWNLOAD=iwildcam`); `DOWNLOAD=none`
# never downloads (fedpaper reproduce --no-download).
DOWNLOAD ?=

# The offline data copies, when this checkout sits next to them (FEDPAPER_DATA from the
# environment wins).
ifneq ($(wildcard ../shared/data),)
FEDPAPER_DATA ?= $(abspath ../shared/data)
endif
ifdef FEDPAPER_DATA
export FEDPAPER_DATA
endif
export MPLBACKEND := Agg

.PHONY: figures test test-cluster

# Notebooks at once (`fedpaper reproduce --workers`): auto = one per free core, each kernel with one torch
# thread, all on the one results cache (leases: no run trains twice); WORKERS=1 runs them one by one.
WORKERS ?= auto

figures: $(STAMP) $(NBSTRIP)
	$(VENV)/bin/fedpaper reproduce --profile $(PROFILE) --workers $(WORKERS) $(if $(ONLY),--only $(ONLY)) \
	  $(if $(filter none,$(DOWNLOAD)),--no-download,$(if $(DOWNLOAD),--download $(DOWNLOAD)))

# Unit tests in random order (pytest-randomly; the seed is printed, and `-p randomly --randomly-seed=N`
# repeats an order); then the engine, algorithm and paper-method tests a second time with the
# kernels of a CPU without AVX-512 (oneDNN's and ATen's AVX2 code paths, emulated on any x86 CPU;
# docs/onednn-avx2-1x1-stride2.md; its time is in benchmarks/results/profile_times.json); then every
# notebook at its smoke defaults under nbval (exit code 5 = no notebook collected yet, which is
# fine), then the checks of executed notebooks (inline image, clean progress, one-line errors, an
# override under nbval, no outputs in git), which read back the runs nbval cached. Notebook runs use
# their own cache folder, never figures/.
AVX2_ENV := ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
# The engine's tests leave out tests/engine/test_device.py (device branches, no kernels; never in this list).
AVX2_TESTS := $(filter-out tests/engine/test_device.py,$(wildcard tests/engine/test_*.py)) tests/driver tests/algorithms \
  tests/reference tests/papers/fedpals/test_fedpals.py tests/papers/privlabels/test_privlabels.py tests/papers/fedmt \
  tests/papers/fednca/test_fednca.py tests/blocks/test_fednca_model.py tests/blocks/test_compact_images.py
test: $(STAMP) $(NBSTRIP)
	$(VPY) -m pytest -p randomly tests
	$(AVX2_ENV) $(VPY) -c "import torch; print('AVX2 emulation: torch CPU capability', torch.backends.cpu.get_cpu_capability())"
	$(AVX2_ENV) $(VPY) -m pytest -p randomly -p no:cacheprovider $(AVX2_TESTS)
	FEDPAPER_CACHE=$(CURDIR)/.cache/nbval FEDPAPER_FIGURES=$(CURDIR)/.cache/nbval/figures FEDPAPER_PROGRESS=text \
	  $(VPY) -m pytest --nbval-lax notebooks/ -p no:cacheprovider; \
	  rc=$$?; if [ $$rc -eq 5 ]; then echo "nbval: no notebooks yet"; exit 0; fi; exit $$rc
	FEDPAPER_NOTEBOOK_TESTS=1 FEDPAPER_NOTEBOOK_CACHE=$(CURDIR)/.cache/nbval \
	  $(VPY) -m pytest tests/test_notebooks.py -p no:cacheprovider

# The Ray executor's tests (marked `cluster`; `make test` skips them when Ray is not installed,
# and the dev extra does not install it): installs the cluster extra first.
test-cluster: $(STAMP)
	$(VPY) -m pip install -e '.[dev,cluster]'
	$(VPY) -m pytest tests/runs/test_executors.py tests/runs/test_leases.py

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -e '.[dev]'
	$(VPY) -m ipykernel install --sys-prefix --name python3
	install -D -m 644 $(JUPYTER_SAVE_CONFIG) $(VENV)/$(JUPYTER_SAVE_CONFIG_DIR)/fedpaper.json
	touch $(STAMP)

# The nbstripout git filter (.gitattributes names it): executed notebooks (JupyterLab autosave,
# papermill in place) stage without outputs, so `git status` stays clean. Skipped outside git. The index
# is refreshed once (about a minute in a fresh clone: the filter runs on every notebook): otherwise each
# provenance record's `git status` (10 s timeout, fedpaper.runs.provenance) redoes that work and is cut off.
$(NBSTRIP): $(STAMP) .gitattributes
	if git rev-parse --git-dir >/dev/null 2>&1; then \
	  $(VENV)/bin/nbstripout --install --attributes .gitattributes && \
	  git config filter.nbstripout.extrakeys "$(NBSTRIPOUT_EXTRA_KEYS)" && \
	  { git update-index -q --refresh >/dev/null || true; }; fi
	touch $(NBSTRIP)

# Mutation testing, a developer tool (not part of `make test`): mutmut 3.8 over fedpaper/algorithms/,
# fedpaper/engine/ and FedNCA-ML's nets (ladm.py, etf.py) with the fast tests named in pyproject.toml
# [tool.mutmut] (8,820 mutants). A full run is long (estimated in tests/reference/MUTANTS.md: about 50 h
# of one job on the shared, loaded 2-core machine); run a module or a function with mutmut's name globs, e.g.
# `make mutation MUTANTS='fedpaper.engine.batchnorm.*' MUTATION_JOBS=1`. Results stay in mutants/
# (`mutmut results`, `mutmut show <name>`). Survivors are killed by a test or listed as equivalent in
# tests/reference/MUTANTS.md.
MUTATION_JOBS ?= 2
MUTANTS ?=
.PHONY: mutation
mutation: $(STAMP)
	$(VPY) -m pip install -e '.[mutation]'
	FEDPAPER_PROGRESS=0 OMP_NUM_THREADS=1 nice -n 15 $(VENV)/bin/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS)
	$(VENV)/bin/mutmut results

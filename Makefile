# Two commands: `make figures` (regenerate the artifacts and figures/REPORT.md) and `make test`.
# Each installs what it needs into the project's own virtual environment .venv first (created with
# python3 -m venv if missing; `pip install -e '.[dev]'`; a stamp file makes later runs skip this).

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.fedpaper-installed
PROFILE ?= quick
ONLY ?=

# The offline data copies, when this checkout sits next to them (FEDPAPER_DATA from the
# environment wins).
ifneq ($(wildcard ../shared/data),)
FEDPAPER_DATA ?= $(abspath ../shared/data)
endif
ifdef FEDPAPER_DATA
export FEDPAPER_DATA
endif
export MPLBACKEND := Agg

.PHONY: figures test

figures: $(STAMP)
	$(VENV)/bin/fedpaper reproduce --profile $(PROFILE) $(if $(ONLY),--only $(ONLY))

# Unit tests, then every notebook at its smoke defaults under nbval (exit code 5 = no notebook
# collected yet, which is fine). Notebook runs use their own cache folder, never figures/.
test: $(STAMP)
	$(VPY) -m pytest tests
	FEDPAPER_CACHE=$(CURDIR)/.cache/nbval FEDPAPER_FIGURES=$(CURDIR)/.cache/nbval/figures \
	  $(VPY) -m pytest --nbval-lax notebooks/ -p no:cacheprovider; \
	  rc=$$?; if [ $$rc -eq 5 ]; then echo "nbval: no notebooks yet"; exit 0; fi; exit $$rc

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -e '.[dev]'
	$(VPY) -m ipykernel install --sys-prefix --name python3
	touch $(STAMP)

# Mutation testing, a developer tool (not part of `make test`): mutmut over fedpaper/algorithms/ with
# the fast tests named in pyproject.toml [tool.mutmut] (tests/reference, tests/test_weights.py).
# Takes ~20-40 min on 2 cores; results stay in mutants/ (`mutmut results`, `mutmut show <name>`).
# Survivors are killed by a test or listed as equivalent in tests/reference/MUTANTS.md.
MUTATION_JOBS ?= 2
.PHONY: mutation
mutation: $(STAMP)
	$(VPY) -m pip install -e '.[mutation]'
	FEDPAPER_PROGRESS=0 nice -n 15 $(VENV)/bin/mutmut run --max-children $(MUTATION_JOBS)
	$(VENV)/bin/mutmut results

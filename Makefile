# One command each, on a fresh clone: every target sets up .venv on first use.
#   make book       build the HTML book into _build/html from the notebooks' stored outputs (no kernel starts;
#                   EXECUTE=1: execute the chapter notebooks at build time, cached)
#   make test       lint, then the whole test suite on every core (as root it first installs the Debian
#                   packages it needs); ends with its wall time and the 15 slowest tests (budget: 20 minutes
#                   on 2 cores, set-up included). TEST_JOBS=1: one process; PYTEST_ARGS=...: more pytest options
#   make test-fast  course_lib's and the grader's unit tests: no notebooks, no nbgrader, no browser
#   make lint       ruff over the whole tree (pyproject.toml's [tool.ruff]); LINT_ARGS=--fix to fix what it can
#   make lab        JupyterLab on the course, with nbgrader's Validate (LAB_PORT=8888; LAB_DIR=<folder> serves
#                   another folder, e.g. a copy of exercises/02-attention; LAB_ROLE=instructor adds the formgrader)
#   make check      quick checks before a commit: stale notebook outputs, exercises in sync, the book and its links
#   make notebooks  re-execute the chapter notebooks whose stored outputs are stale (ALL=1: every one)
#   make exercises  regenerate exercises/ from solutions/
#   make grade      autograde every submission under submitted/ (or SUBMISSIONS=export.zip), write grades.csv;
#                   STUDENT=id[,id] ASSIGNMENT=slug[,slug]: regrade those learners (and only those assignments);
#                   SCHEDULER=tcp://HOST:8786: on a Dask cluster, recorded here (classroom/cluster/)
#   make grade-scheduler  Dask's scheduler for that cluster (SCHEDULER_HOST=127.0.0.1, SCHEDULER_PORT=8786)
#   make grade-worker  SCHEDULER=tcp://HOST:8786: a grading worker for this clone (WORKER_NAME=<name>)
#   make feedback   HTML feedback for every graded submission, hidden tests not shown
#   make similarity the pairs of learners (and learner and reference) whose code is far more alike than the class's,
#                   and the groups they link (a solution passed round), ranked, side by side, into
#                   similarity/<assignment>.html, .csv and -groups.csv; never changes a grade
#                   (ASSIGNMENT=slug[,slug]; THRESHOLD=1.1; SIMILARITY_OUT=<folder>)
#   make export-grades  the gradebook as CSV for Canvas, Moodle and nbgrader into exports/ (ROSTER=roster.csv:
#                   id,name,email adds names and every learner on it; MISSING=zero: 0 for no submission)
#   make hub        as root: set up and start the course's JupyterHub for a class on this machine (HUB_PORT=8000,
#                   HUB_AUTH=pam|shared, IDLE_MINUTES=60, HUB_PREFIX=/opt/transformers-course, HUB_URL=http://localhost:
#                   8000; each learner's limits: HUB_MEMORY=2G HUB_CPUS=1 HUB_TASKS=512, all learners' HUB_CLASS_MEMORY,
#                   an instructor's HUB_INSTRUCTOR_MEMORY=6G, HUB_LIMITS=none for none; each learner's home a disk of
#                   HUB_DISK=1G, the exchange's HUB_EXCHANGE_DISK=8G, HUB_DISK=none for none; classroom/hub/)
#   make hub-users  as root: ROSTER=roster.csv (id,name,email) adds learners, INSTRUCTOR=<name> the instructor
#   make hub-stop   stop the hub and its servers, unmount the learners' disks (users, work, grades and feedback
#                   stay)
#   make stability  the reference keeps full marks over 100 grading secrets: every hidden test on the seeds a
#                   learner would get under each (minutes)
#   make mutants    mutation-test the assignments' hidden tests (minutes; MUTANTS_ARGS="--assignment 02-attention")
#   make fuzz       the fuzzers of what learners hand in, at length: FUZZ_EXAMPLES=2000 notebooks, zips and pages
#                   each, and a class graded for every 100 (FUZZ_SEED=N replays a run; minutes to hours)
#   make portability  nbval strict on every chapter notebook under each CPU-kernel and thread variant (minutes)
#   make seeds      every claim of the chapter notebooks over 5 seeds drawn afresh on every run (it prints them),
#                   with its smallest margin and spread (minutes; SEEDS=0-4,7,fresh:10 names or draws others)
#   make zoo        train every model of the zoo from its recipe into course_lib/zoo/ (MODEL=<name>: one;
#                   resumes from _build/zoo/<name>.pt; on the GPU when there is one)
#   make zoo-check  re-run each recipe up to its stored curve's first record, 25 updates (MODEL=<name>: one;
#                   minutes); make test re-runs the first 5 of each
#   make constraints  re-pin the dependency tree (constraints.txt) after changing requirements.txt

PYTHON ?= python3
comma := ,
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LAB_PORT ?= 8888
LAB_DIR ?= $(CURDIR)
LAB_ROLE ?= learner
PYTEST_ARGS ?=
# The suite's workers (pytest-xdist): one more than the cores, because part of the suite waits (on a server
# starting, a browser, a grading kernel behind its fence) and the extra worker keeps both cores busy meanwhile
# (2 cores: 1068 s with 3 workers, 1204 s with 2). tests/conftest.py shares the work out (its scheduler
# replaces --dist); --dist loadscope, a notebook or a module per worker, is what runs without it.
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))
LINT_ARGS ?=

export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Kernels must use their inline backend, or notebooks lose their figures.
unexport MPLBACKEND
# nbgrader runs tools (alembic, jupyter) by name: the venv comes first on PATH.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: all lint system-book system-test system-grade setup book test test-fast portability seeds check notebooks lab exercises grade grade-scheduler grade-worker feedback similarity constraints clean help mutants fuzz stability zoo zoo-check export-grades hub hub-users hub-stop

all: help

help:
	@sed -n '2,/^$$/p' Makefile | sed -e '/^$$/d' -e 's/^# //'

setup: $(STAMP)

# Debian packages: Python's venv for every target, PostgreSQL and Chromium for the tests, bubblewrap for grading
# (tools/system_packages.sh installs them as root, or names them and the command to run).
system-book:
	@PYTHON=$(PYTHON) tools/system_packages.sh book
system-test:
	@PYTHON=$(PYTHON) tools/system_packages.sh test
system-grade:
	@PYTHON=$(PYTHON) tools/system_packages.sh grade

# The stamp is remade when the requirements change.
# Set-up: pip installs uv and fetches the torch wheel (the CPU wheel: pip's configuration may point at a local
# file of it, which uv does not read); uv installs that file and the rest, the same pins, in a fraction of pip's
# time, compiled to bytecode as pip does (with PYTHONDONTWRITEBYTECODE set, a venv without .pyc files recompiles
# every import in every process).
# JupyterLab's settings overrides: the course works offline, so the lab never asks to fetch news.
$(STAMP): requirements.txt constraints.txt pyproject.toml tools/jupyterlab/overrides.json
	@PYTHON=$(PYTHON) tools/system_packages.sh book
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $$(grep -E '^uv==' requirements.txt) -c constraints.txt
	rm -rf $(VENV)/wheels && $(BIN)/python -m pip download --quiet --disable-pip-version-check --no-deps \
		-d $(VENV)/wheels $$(grep -E '^torch==' requirements.txt)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python $(VENV)/wheels/torch-*.whl \
		-r requirements.txt -c constraints.txt || { \
		echo "uv could not install the requirements (above); pip installs them instead"; \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check $(VENV)/wheels/torch-*.whl \
			-r requirements.txt -c constraints.txt; }
	rm -rf $(VENV)/wheels
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	cp tools/jupyterlab/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

# The book renders the outputs stored in the notebooks, which make test proves (nbval): no kernel starts.
# EXECUTE=1 executes the chapter notebooks at build time instead, cached in _build/.jupyter_cache
# (tools/course_book.py); BOOK_OUT=<folder> builds into <folder>/_build/html.
EXECUTE ?=
BOOK_OUT ?=
book: $(STAMP)
	COURSE_STATIC_OUTPUT=1 $(if $(EXECUTE),COURSE_BOOK_EXECUTE=1) $(BIN)/jupyter-book build . --builder html -W -n \
		--keep-going $(if $(BOOK_OUT),--path-output "$(BOOK_OUT)")
	@echo "The book is at $(abspath $(or $(BOOK_OUT),$(CURDIR)))/_build/html/index.html"

# The wall time printed at the end is the suite's own (lint and pytest, set-up excluded); .ci/run prints
# the whole of `make test`, set-up included. The course's own modules are compiled to bytecode first: with
# PYTHONDONTWRITEBYTECODE set (as on CI), every kernel, grader and worker process would compile them again.
test: system-test $(STAMP)
	@start=$$(date +%s); \
	$(BIN)/python -m compileall -q -j 0 course_lib grader classroom tools tests && \
	$(MAKE) --no-print-directory lint && \
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadscope --durations=15 --durations-min=1 $(PYTEST_ARGS); \
	rc=$$?; echo "make test: lint and pytest took $$(( $$(date +%s) - start )) s wall on $(TEST_JOBS) workers ($$(nproc) cores)"; \
	exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_ARGS) .

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -o addopts= -m "not slow" -p no:cacheprovider tests $(PYTEST_ARGS)

portability: $(STAMP)
	$(BIN)/python -m tools.portability matrix

SEEDS ?= fresh:5

seeds: $(STAMP)
	$(BIN)/python -m tools.portability seeds --seeds $(SEEDS)

MODEL ?=
zoo: $(STAMP)
	$(BIN)/python -m tools.zoo train $(MODEL)

zoo-check: $(STAMP)
	$(BIN)/python -m tools.zoo check $(MODEL)

# The quick checks (a minute once the book is built).
check: book
	$(BIN)/python -m tools.notebooks check
	COURSE_BOOK_HTML=$(CURDIR)/_build/html $(BIN)/python -m pytest -q -p no:cacheprovider -o addopts= \
		tests/book/test_notebook_policy.py tests/grading/test_exercises_sync.py tests/book/test_book.py tests/book/test_book_browser.py -k "not page_reads_offline and not search"

ALL ?=
notebooks: $(STAMP)
	$(BIN)/python -m tools.notebooks refresh $(if $(ALL),--all)

# A learner's lab by default: nbgrader's Validate and Assignments, not the instructor's formgrader, course
# list and Create Assignment panel (tools/jupyterlab/learner/ switches those off); LAB_ROLE=instructor has them.
lab: $(STAMP)
	@case "$(LAB_ROLE)" in learner|instructor) ;; *) echo "make lab: LAB_ROLE must be learner or instructor, got '$(LAB_ROLE)'" >&2; exit 2;; esac
	@echo "JupyterLab for the $(LAB_ROLE): open http://127.0.0.1:$(LAB_PORT)/lab (the exact URL with its token follows)"
	$(if $(filter learner,$(LAB_ROLE)),JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyterlab/learner$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}") \
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(LAB_PORT) --no-browser --allow-root \
		--ServerApp.root_dir="$(LAB_DIR)"

exercises: $(STAMP)
	$(BIN)/python -m tools.exercises

SUBMISSIONS ?=
JOBS ?=
grade: system-grade $(STAMP)
	$(BIN)/python -m classroom.grade $(if $(SUBMISSIONS),--zip "$(SUBMISSIONS)") $(if $(JOBS),--jobs $(JOBS)) \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") \
		$(foreach s,$(subst $(comma), ,$(STUDENT)),--student "$(s)") \
		$(foreach a,$(subst $(comma), ,$(ASSIGNMENT)),--assignment "$(a)")

# A Dask cluster for grading (classroom/cluster/): its scheduler, and a worker per machine, each in a clone of one commit
SCHEDULER_HOST ?= 127.0.0.1
SCHEDULER_PORT ?= 8786
grade-scheduler: $(STAMP)
	$(BIN)/python -m classroom.cluster scheduler --host $(SCHEDULER_HOST) --port $(SCHEDULER_PORT)

grade-worker: system-grade $(STAMP)
	@test -n "$(SCHEDULER)" || { echo "make grade-worker: give the scheduler, SCHEDULER=tcp://HOST:8786"; exit 2; }
	$(BIN)/python -m classroom.cluster worker "$(SCHEDULER)" $(if $(WORKER_NAME),--name "$(WORKER_NAME)")

feedback: $(STAMP)
	$(BIN)/python -m classroom.feedback

similarity: $(STAMP)
	$(BIN)/python -m classroom.similarity $(if $(THRESHOLD),--threshold $(THRESHOLD)) \
		$(if $(SIMILARITY_OUT),--out "$(SIMILARITY_OUT)") \
		$(foreach a,$(subst $(comma), ,$(ASSIGNMENT)),--assignment "$(a)")

HUB_PORT ?= 8000
HUB_AUTH ?= pam
IDLE_MINUTES ?= 60
HUB_AT = $(if $(HUB_PREFIX),--prefix "$(HUB_PREFIX)")
HUB_LIMIT_ARGS = $(if $(HUB_URL),--url "$(HUB_URL)") $(if $(HUB_MEMORY),--memory "$(HUB_MEMORY)") \
	$(if $(HUB_CPUS),--cpus "$(HUB_CPUS)") $(if $(HUB_TASKS),--tasks "$(HUB_TASKS)") \
	$(if $(HUB_CLASS_MEMORY),--class-memory "$(HUB_CLASS_MEMORY)") \
	$(if $(HUB_INSTRUCTOR_MEMORY),--instructor-memory "$(HUB_INSTRUCTOR_MEMORY)") $(if $(HUB_LIMITS),--limits "$(HUB_LIMITS)") \
	$(if $(HUB_DISK),--disk "$(HUB_DISK)") $(if $(HUB_EXCHANGE_DISK),--exchange-disk "$(HUB_EXCHANGE_DISK)")
hub: $(STAMP)
	$(BIN)/python -m classroom.hub setup $(HUB_AT)
	$(BIN)/python -m classroom.hub start $(HUB_AT) --port $(HUB_PORT) --auth $(HUB_AUTH) --idle-minutes $(IDLE_MINUTES) \
		$(HUB_LIMIT_ARGS)

hub-users: $(STAMP)
	$(BIN)/python -m classroom.hub users $(HUB_AT) $(if $(ROSTER),--roster "$(ROSTER)") $(if $(INSTRUCTOR),--instructor "$(INSTRUCTOR)")

hub-stop: $(STAMP)
	$(BIN)/python -m classroom.hub stop $(HUB_AT)

export-grades: $(STAMP)
	$(BIN)/python -m classroom.export_grades $(if $(ROSTER),--roster "$(ROSTER)") $(if $(MISSING),--missing $(MISSING))

stability: $(STAMP)
	COURSE_STABILITY_SEEDS=100 $(BIN)/python -m pytest tests/grading/test_reference_stability.py -p no:cacheprovider -q

# The fuzzers of what learners hand in, drawn at length (make test draws a few examples of each): notebooks, zips and
# names before any kernel (tests/grading/test_fuzz_intake.py), pages (tests/grading/test_pages.py), whole classes
# graded by a real make grade (tests/grading/test_fuzz_class.py). FUZZ_SEED=N replays a run; a failure prints the
# blob that replays its example (@reproduce_failure).
FUZZ_EXAMPLES ?= 2000
FUZZ_SEED ?=
fuzz: $(STAMP)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -o addopts= -p no:cacheprovider -q -W ignore \
		--hypothesis-show-statistics $(if $(FUZZ_SEED),--hypothesis-seed=$(FUZZ_SEED)) \
		tests/grading/test_fuzz_intake.py tests/grading/test_pages.py
	FUZZ_EXAMPLES=$$(( $(FUZZ_EXAMPLES) / 100 + 1 )) $(BIN)/python -m pytest -o addopts= -p no:cacheprovider -q \
		-W ignore $(if $(FUZZ_SEED),--hypothesis-seed=$(FUZZ_SEED)) tests/grading/test_fuzz_class.py

# Mutation testing of the assignments' hidden tests (slow, so not part of `make test`): tools/mutants/.
MUTANTS_ARGS ?=
mutants: $(STAMP)
	$(BIN)/python -m tools.mutants $(MUTANTS_ARGS)

constraints: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^torch==' > constraints.txt.new
	@{ echo '# Generated with `pip freeze` from a working .venv; pins the transitive dependencies.'; \
	   echo '# Regenerate with `make constraints` after changing requirements.txt.'; \
	   cat constraints.txt.new; echo 'torch==2.13.0'; } > constraints.txt && rm constraints.txt.new

clean:
	rm -rf _build .pytest_cache

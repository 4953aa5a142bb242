# brokerd: the two commands are `make run` and `make test`; both install first when needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DATA ?= ./data
PYTEST_ARGS ?=

.PHONY: install node-deps jvm-deps go-deps judges-deps run test test-unit test-long soak scoreboard trial lint bench bench-quick bench-deps latency check-plugin verify-units clean

install: $(STAMP)

# `editable_mode=compat` puts the project root on sys.path through a .pth file, which is
# what lets Twisted find twisted/plugins/brokerd_plugin.py; setuptools' default editable
# mode uses an import hook that twistd's plugin scan cannot see.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	$(BIN)/python -c 'from twisted.plugin import IPlugin, getPlugins; list(getPlugins(IPlugin))'
	touch $(STAMP)

# kafkajs for tests/e2e/test_kafkajs.py (and @platformatic/kafka, @kafkajs/confluent-schema-registry
# for the judges), exactly as tests/node/package-lock.json pins them. Without npm those tests
# skip (saying so); nothing else needs node.
NODE_DIR := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed-stamp

node-deps: $(NODE_STAMP)

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed-stamp; \
	else \
	  echo "npm not found: the kafkajs tests will be skipped"; \
	fi

# The judges of tests/e2e/test_judges.py (tests/judge_drivers.py) and of the registry and
# proxy (tests/e2e/test_platform_judges.py). `jvm-deps`: Kafka's Java client jars and
# Spring Cloud Stream's schema registry client, as tests/jvm/pom.xml pins them, copied once
# into tests/jvm/lib (Maven's local repository keeps them, so later runs are offline), and
# the driver compiled against them into build/jvm/classes. `go-deps`: the Go clients'
# driver (tests/go, modules as go.sum pins them, franz-go's pkg/sr among them) built into
# build/go/judge. Without mvn and javac, or go,
# the tests of those clients skip, saying so.
JVM_DIR := tests/jvm
JVM_LIB_STAMP := $(JVM_DIR)/lib/.installed-stamp
# Kafka Connect and MirrorMaker 2 on a class path of their own (tests/jvm/connect/pom.xml
# says why they are another release).
JVM_CONNECT_LIB_STAMP := $(JVM_DIR)/lib-connect/.installed-stamp
JVM_CLASSES := build/jvm/classes
JVM_BUILD_STAMP := build/jvm/.built-stamp
JVM_SOURCES := $(wildcard $(JVM_DIR)/src/brokerd/*/*.java)
GO_DIR := tests/go
GO_JUDGE := build/go/judge
GO_SOURCES := $(wildcard $(GO_DIR)/*.go) $(GO_DIR)/go.mod $(GO_DIR)/go.sum

jvm-deps: $(JVM_BUILD_STAMP) $(JVM_CONNECT_LIB_STAMP)

$(JVM_CONNECT_LIB_STAMP): $(JVM_DIR)/connect/pom.xml
	@if command -v mvn >/dev/null 2>&1; then \
	  rm -rf $(JVM_DIR)/lib-connect && \
	  mkdir -p build/jvm && \
	  (cd $(JVM_DIR)/connect && mvn -q -B dependency:copy-dependencies -DoutputDirectory=../lib-connect -DincludeScope=runtime) \
	    > build/jvm/mvn-connect.log 2>&1 || { cat build/jvm/mvn-connect.log; exit 1; }; \
	  touch $(JVM_CONNECT_LIB_STAMP); \
	else \
	  echo "mvn not found: the Kafka Connect and MirrorMaker 2 tests will be skipped"; \
	fi

$(JVM_LIB_STAMP): $(JVM_DIR)/pom.xml
	@if command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then \
	  rm -rf $(JVM_DIR)/lib && \
	  mkdir -p build/jvm && \
	  (cd $(JVM_DIR) && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime) \
	    > build/jvm/mvn.log 2>&1 || { cat build/jvm/mvn.log; exit 1; }; \
	  touch $(JVM_LIB_STAMP); \
	else \
	  echo "mvn or javac not found: the Java client tests will be skipped"; \
	fi

$(JVM_BUILD_STAMP): $(JVM_LIB_STAMP) $(JVM_SOURCES)
	@if [ -f $(JVM_LIB_STAMP) ]; then \
	  rm -rf $(JVM_CLASSES) && mkdir -p $(JVM_CLASSES) && \
	  javac --release 17 -Xlint:all -Werror -d $(JVM_CLASSES) -cp '$(JVM_DIR)/lib/*' $(JVM_SOURCES) && \
	  touch $(JVM_BUILD_STAMP); \
	fi

go-deps: $(GO_JUDGE)

$(GO_JUDGE): $(GO_SOURCES)
	@if command -v go >/dev/null 2>&1; then \
	  cd $(GO_DIR) && go vet . && go build -trimpath -o $(CURDIR)/$(GO_JUDGE) .; \
	else \
	  echo "go not found: the Go client tests will be skipped"; \
	fi

judges-deps: node-deps jvm-deps go-deps

run: install
	$(BIN)/twistd --nodaemon --pidfile= broker --data-dir $(DATA)

test: install judges-deps
	$(BIN)/pytest -q --durations=40 $(PYTEST_ARGS)

# The unit layer: every test that starts no broker process (tests/conftest.py marks the
# others `broker` and fails a test that starts one unmarked), in under a minute on two
# cores. Each test runs once, by one runner: trial runs the TestCase classes (the ones
# `make trial` runs), pytest the pytest-style tests (`-p no:unittest` leaves the classes
# to trial) on two workers, both at once; trial's report follows pytest's, and the last
# line says the wall time and the load average. Their temporary directories are on
# tmpfs (/dev/shm, when there is one: the logs' fsyncs then cost no disk wait; removed
# after a passing run, kept after a failing one). Bytecode is written (an environment's
# PYTHONDONTWRITEBYTECODE is dropped here): without it every process of the run compiles
# the whole tree again, some 20 s of CPU each. `make test` still runs everything under
# pytest, the classes too.
UNIT_TMP ?= $(firstword $(wildcard /dev/shm) build)
test-unit: install
	@mkdir -p build; start=$$(date +%s%N); tmp=$$(mktemp -d $(UNIT_TMP)/brokerd-unit.XXXXXX); \
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/trial --temp-directory=$$tmp/trial tests \
	  > build/trial-unit.log 2>&1 & trial=$$!; \
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n 2 -m 'not broker and not slow' \
	  -p no:cacheprovider -p no:unittest --basetemp=$$tmp/pytest $(PYTEST_ARGS); pytest_rc=$$?; \
	wait $$trial; trial_rc=$$?; \
	if [ $$trial_rc -eq 0 ]; then tail -n 3 build/trial-unit.log; else cat build/trial-unit.log; fi; \
	ds=$$(( ($$(date +%s%N) - start) / 100000000 )); \
	echo "test-unit: $$((ds / 10)).$$((ds % 10)) s wall" \
	  "(pytest exit $$pytest_rc, trial exit $$trial_rc; load average $$(cut -d' ' -f1-3 /proc/loadavg))"; \
	[ $$pytest_rc -eq 0 ] && [ $$trial_rc -eq 0 ] && rm -rf $$tmp || { echo "temporary files kept in $$tmp"; exit 1; }

test-long: install judges-deps
	$(BIN)/pytest -q -m slow $(PYTEST_ARGS)

# Reliability: `soak` is a long native kill -9 crash loop (SOAK_CYCLES, default 120; not
# part of `make test`); `scoreboard` runs every fault-injection test and prints the table
# of docs/reliability.md.
SOAK_CYCLES ?= 120
soak: install
	$(BIN)/python tools/scoreboard.py --soak $(SOAK_CYCLES)

scoreboard: install judges-deps
	$(BIN)/python tools/scoreboard.py

# The SynchronousTestCase classes under Twisted's own runner: `tests` is a package, so trial
# imports every module (pytest-style functions are not trial tests and are not collected).
trial: install
	$(BIN)/trial --temp-directory=build/_trial_temp tests

lint: install
	$(BIN)/ruff check brokerd tests bench twisted tools
	$(BIN)/mypy

# `make bench` measures brokerd beside its peers, Apache Kafka among them (docs/benchmarks.md
# and docs/bench/ are written by the run); `bench-quick` is the two-minute smoke version,
# written to build/bench-quick/, without the JVM (`BENCH_ARGS=--kafka` adds Kafka's tools
# and broker at small sizes, a few minutes more). `bench-deps` installs what they need:
# Python packages into the venv (not project dependencies), Kafka's jars (`jvm-deps`: its
# broker, tools and clients of tests/jvm/pom.xml, from Maven Central), Debian peers only
# when a command is missing (apt needs root; without it the missing peers' rows say "not
# measured", as the Kafka rows do without java or the jars).
BENCH_ARGS ?=
BENCH_PY := matplotlib redis hiredis nats-py py-spy
BENCH_STAMP := $(VENV)/.bench-stamp
BENCH_DEBS := redis-server:redis-server redis-benchmark:redis-tools iperf3:iperf3 nats-server:nats-server kcat:kcat

bench: bench-deps
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-quick: bench-deps
	$(BIN)/python bench/run.py --quick $(BENCH_ARGS)

bench-deps: install jvm-deps $(BENCH_STAMP)
	@missing=""; for pair in $(BENCH_DEBS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "bench-deps: not root, cannot apt-get install$$missing (their rows will be skipped)"; \
	  fi; \
	fi

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q $(BENCH_PY)
	touch $(BENCH_STAMP)

latency: install
	$(BIN)/python bench/latency.py

# The wheel, installed into a scratch venv and run from another directory, must show the
# plugin: running from the source tree would find it by accident.
check-plugin: install
	rm -rf dist build/plugin-venv
	$(BIN)/python -m build --wheel --outdir dist . >/dev/null
	$(PYTHON) -m venv build/plugin-venv
	build/plugin-venv/bin/pip install -q dist/*.whl
	cd / && $(CURDIR)/build/plugin-venv/bin/twistd --help | grep -E '^ +broker +' >/dev/null
	@echo "plugin found in the installed wheel"
	# The pytest plugin, as a project uses it: only the wheel, pytest and confluent-kafka
	# installed, a crash test file with the `brokerd` fixture, alone and outside the repo.
	build/plugin-venv/bin/pip install -q pytest confluent-kafka
	rm -rf build/plugin-check && mkdir -p build/plugin-check
	cp tests/plugin/crash_example.py build/plugin-check/test_crash.py
	cd build/plugin-check && $(CURDIR)/build/plugin-venv/bin/python -m pytest -q -p no:cacheprovider --rootdir=. -c /dev/null test_crash.py
	@echo "pytest plugin works in a fresh virtualenv"

verify-units: install
	mkdir -p build/units
	sed "s#/opt/brokerd/venv#$(CURDIR)/$(VENV)#" deploy/systemd/brokerd.service > build/units/brokerd.service
	cp deploy/systemd/brokerd.socket deploy/systemd/brokerd-kafka.socket build/units/
	out=$$(systemd-analyze verify --man=no build/units/brokerd.socket build/units/brokerd-kafka.socket build/units/brokerd.service 2>&1); \
	  test -z "$$out" || { echo "$$out"; exit 1; }

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis $(NODE_DIR)/node_modules $(JVM_DIR)/lib $(JVM_DIR)/lib-connect

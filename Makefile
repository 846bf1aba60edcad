# Set-up is automatic: every target below creates the virtualenv, installs and generates stubs
# when needed. Only python3 (3.11+) and make are required.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROTOS := $(wildcard protos/tapis/v1/*.proto)
STAMP  := $(VENV)/.installed
GEN_STAMP := gen/.generated
TOOLS  := $(VENV)/.tools

.PHONY: secrets setup gen serve cluster test test-fast lint bench bench-quick selfplay clean \
	proto-baseline api-docs settings-docs lock messages screens playthroughs

# 4. the compiled hot path (tools/compiled.py: mypyc, when the machine has a C compiler; rebuilt
# only when its sources changed; TAPIS_PURE=1 removes it and the pure-Python modules run).
setup: $(STAMP)
	@$(BIN)/python -m tools.compiled

# 1. A virtualenv with the code generators; 2. the stubs; 3. the project itself (editable), which
# must come after the stubs so that the generated `tapis` package is part of it.
$(TOOLS):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q 'grpcio-tools>=1.66' 'mypy-protobuf>=3.6'
	touch $(TOOLS)

$(GEN_STAMP): $(PROTOS) $(TOOLS)
	rm -rf gen && mkdir -p gen
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=gen --grpc_python_out=gen \
		--plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy --mypy_out=gen \
		--plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc --mypy_grpc_out=gen $(PROTOS)
	touch gen/tapis/__init__.py gen/tapis/v1/__init__.py gen/tapis/py.typed
	touch $(GEN_STAMP)

$(STAMP): pyproject.toml $(GEN_STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,otel]'
	touch $(STAMP)

gen: $(GEN_STAMP)

# A self-signed TLS set and a backend key in ./var/secrets, for compose (docs/integration.md).
secrets:
	sh deploy/make-secrets.sh var/secrets

# The web client at http://127.0.0.1:$(WS_PORT)/ (the player WebSocket's plain HTTP side).
WS_PORT ?= 8080
serve: setup
	$(BIN)/tapis-server --data-dir ./var --ws-port $(WS_PORT) $(ARGS)

# A local cluster: an embedded PostgreSQL (data under ./var/cluster) and 3 nodes on 50051-50053,
# their Prometheus metrics on 9101-9103.
cluster: setup
	$(BIN)/tapis-cluster --nodes 3 --port 50051 --metrics-port 9101 --data-dir ./var/cluster $(ARGS)

# The tests run in a worker per core, four at most (pytest-xdist: each test is independent; a
# worker starts its own embedded PostgreSQL when a test asks for one). TEST_WORKERS=0: in this
# process, one after the other.
TEST_WORKERS ?= auto --maxprocesses 4
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(ARGS)

# The quick tier: every test but the slow ones (PostgreSQL, clusters, server processes).
test-fast: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not slow" $(ARGS)

lint: setup
	$(BIN)/ruff check service clients tests tools bench
	$(BIN)/mypy
	cd protos && ../$(BIN)/buf lint
	cd protos && ../$(BIN)/buf breaking --against baseline.binpb
	$(BIN)/hadolint deploy/Dockerfile
	$(BIN)/yamllint -s -d "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}" deploy

bench: setup
	$(BIN)/python -m tapis_bench $(ARGS)

bench-quick: setup
	$(BIN)/python -m tapis_bench --quick $(ARGS)

# The War load over the player WebSocket (server CPU per action, actions/s, p50/p99).
bench-ws: setup
	$(BIN)/python -m tapis_bench.websocket $(ARGS)

# The same War load against Tapis over WebSocket (memory store and SQLite) and against Colyseus's
# two rooms (state-synced, messages only), installed with npm into a scratch folder (bench/peers/:
# the rooms and the Node load generator for all), in one run with alternating turns; its last
# line is the JSON of ratios per table count (all figures in bench/peers.json). ARGS=--quick.
PEERS_DIR ?= build/peers
bench-peers: setup
	cd web && npm ci --no-audit --no-fund --loglevel=error && node build.mjs gen
	mkdir -p $(PEERS_DIR)
	cp bench/peers/package.json bench/peers/colyseus_war.mjs $(PEERS_DIR)/
	cd $(PEERS_DIR) && npm install --no-audit --no-fund --loglevel=error
	NODE_PATH=web/node_modules web/node_modules/.bin/esbuild bench/peers/load.ts --bundle \
		--platform=node --format=esm --log-level=warning --outfile=$(PEERS_DIR)/load.mjs \
		--external:ws --external:@colyseus/sdk
	$(BIN)/python -m tapis_bench.peers --dir $(PEERS_DIR) $(ARGS)

# docs/api.md and the README's error table, from the proto comments (a test keeps them in sync).
api-docs: setup
	$(BIN)/python tools/api_docs.py

# The settings tables of docs/operations.md and docs/limits.md, from tapis_service/settings.py.
settings-docs: setup
	$(BIN)/python -m tapis_service.process.configuration

# The image's locked dependencies, with hashes (deploy/*.lock from deploy/*.in; pip-tools).
lock: setup
	PIP_CONFIG_FILE=/dev/null $(BIN)/pip-compile -q --generate-hashes --allow-unsafe \
		--no-emit-index-url --no-emit-find-links --strip-extras --pip-args=--isolated \
		-o deploy/requirements.lock deploy/requirements.in
	PIP_CONFIG_FILE=/dev/null $(BIN)/pip-compile -q --generate-hashes --allow-unsafe \
		--no-emit-index-url --no-emit-find-links --strip-extras --pip-args=--isolated \
		-o deploy/build-requirements.lock deploy/build-requirements.in
	PIP_CONFIG_FILE=/dev/null $(BIN)/pip-compile -q --generate-hashes --allow-unsafe \
		--no-emit-index-url --no-emit-find-links --strip-extras --pip-args=--isolated \
		-o deploy/otel-requirements.lock deploy/otel-requirements.in

# The CLI's texts: extract the marked ones into the templates (tapis.pot, and one per game for
# the texts of its own files) and merge them into each language's catalogs (then translate the
# new entries; a test fails on any left empty).
messages: setup
	$(BIN)/python -m tools.messages

# The README's pictures of the client: each game's screen at 80x24, as SVG, in docs/screens/.
screens: setup
	$(BIN)/python tools/screens.py

# Record the golden playthroughs again (tests/engine/playthroughs/), after an intended rules
# change: review the diff before committing it (ARGS: only some, e.g. ARGS=basra-iraqi).
playthroughs: setup
	$(BIN)/python -m tools.playthroughs $(ARGS)

# The contract as last released, which `make lint` checks every change against (`buf breaking`):
# rebuild it only when releasing, so that a breaking change is a conscious one.
proto-baseline: setup
	cd protos && ../$(BIN)/buf build -o baseline.binpb

.PHONY: web web-check test-browser web-screens bench-ws bench-peers ts-client ts-client-build

# The TypeScript client package, @tapis/client (clients/tapis-client-ts): its npm packages
# (package-lock.json), the contract's types generated from protos/ (buf + protoc-gen-es), the
# build into dist/ (with the Node example), then its unit tests (node --test). Install it
# elsewhere with `npm install ./clients/tapis-client-ts` (or the tarball of `npm pack` there).
ts-client: ts-client-build
	cd clients/tapis-client-ts && npm test --silent

# The package built (its npm packages, the generated types, dist/), without its tests: what
# web/ depends on (web/package.json: "@tapis/client": "file:../clients/tapis-client-ts").
ts-client-build: setup
	cd clients/tapis-client-ts && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

# The web client (web/, TypeScript + protobuf-es, bundled by esbuild) is served from its built
# files in clients/tapis_webclient/static/ (the package tapis_webclient), committed so that `make serve` needs no Node.js.
# `make web` rebuilds them; `make web-check` rebuilds into a scratch folder and fails if the
# committed files differ. Both build the package @tapis/client first (the web client's envelope
# client and the contract's types), then install the npm packages of web/package-lock.json.
WEB_CHECK_DIR ?= build/webclient-check
web: ts-client-build
	cd web && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

web-check: ts-client-build
	rm -rf $(WEB_CHECK_DIR)
	cd web && npm ci --no-audit --no-fund --loglevel=error && node build.mjs ../$(WEB_CHECK_DIR)
	diff -r $(WEB_CHECK_DIR) clients/tapis_webclient/static

# The browser tests (tests/browser/): Debian's Chromium, installed with apt-get when missing,
# driven by Playwright for Python; the web client's built files are checked against web/ first.
BROWSER_STAMP := $(VENV)/.browser
$(BROWSER_STAMP): $(STAMP)
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/python -m pip install -q -e '.[dev,otel,browser]'
	touch $(BROWSER_STAMP)

test-browser: web-check $(BROWSER_STAMP)
	TAPIS_BROWSER_TESTS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) tests/browser $(ARGS)

# The README's screenshots of the web client (docs/screens/web-*.png), taken by the browser tests.
web-screens: $(BROWSER_STAMP)
	TAPIS_BROWSER_TESTS=1 TAPIS_WEB_SCREENS=docs/screens $(BIN)/python -m pytest tests/browser -q

clean:
	test ! -x $(BIN)/python || $(BIN)/python -m tools.compiled --clean
	rm -rf $(VENV) gen

# Set-up is automatic: every target below creates the virtualenv, installs and generates stubs
# when needed. Only python3 (3.11+) and make are required.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROTOS := $(wildcard protos/tapis/v1/*.proto)
STAMP  := $(VENV)/.installed
GEN_STAMP := gen/.generated
TOOLS  := $(VENV)/.tools

.PHONY: secrets setup gen serve cluster test test-fast lint bench bench-quick selfplay clean proto-baseline api-docs settings-docs

setup: $(STAMP)

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
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

gen: $(GEN_STAMP)

# A self-signed TLS set and a backend key in ./var/secrets, for compose (docs/integration.md).
secrets:
	sh deploy/make-secrets.sh var/secrets

serve: setup
	$(BIN)/tapis-server --data-dir ./var $(ARGS)

# A local cluster: an embedded PostgreSQL (data under ./var/cluster) and 3 nodes on 50051-50053.
cluster: setup
	$(BIN)/tapis-cluster --nodes 3 --port 50051 --data-dir ./var/cluster $(ARGS)

test: setup
	$(BIN)/python -m pytest $(ARGS)

# The quick tier: every test but the slow ones (PostgreSQL, clusters, server processes).
test-fast: setup
	$(BIN)/python -m pytest -m "not slow" $(ARGS)

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

# docs/api.md and the README's error table, from the proto comments (a test keeps them in sync).
api-docs: setup
	$(BIN)/python tools/api_docs.py

# The settings tables of docs/operations.md and docs/limits.md, from tapis_service/settings.py.
settings-docs: setup
	$(BIN)/python -m tapis_service.configuration

# The contract as last released, which `make lint` checks every change against (`buf breaking`):
# rebuild it only when releasing, so that a breaking change is a conscious one.
proto-baseline: setup
	cd protos && ../$(BIN)/buf build -o baseline.binpb

clean:
	rm -rf $(VENV) gen

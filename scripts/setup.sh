#!/usr/bin/env bash
# Sets up MemLens in ./.venv with the pinned dependencies of requirements.txt.
# With --test it also installs what the test suite needs from the system's packages:
# Chromium (the real-browser test), PostgreSQL (the store tests run on both databases) and Node.js
# with npm (n8n's and Flowise's memory run as their JavaScript beside MemLens's); then the pinned
# npm packages of tests/reference/js/ into their node_modules (skipped when already there).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat .venv/.requirements.sha256 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$want" > .venv/.requirements.sha256
fi

if [ "${1:-}" = "--test" ]; then
  missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  .venv/bin/python -m tests.reference.js_packages install
fi

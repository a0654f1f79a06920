#!/usr/bin/env bash
# Sets up MemLens in ./.venv: the app's dependencies exactly as requirements.lock pins them (every
# package, with the hashes pip checks), then MemLens itself, editable, which gives .venv/bin/memlens.
# With --test it installs requirements-dev.lock instead (the same app packages, the postgres and auth
# extras, and the test tools), and what the test suite needs from the system's packages: Chromium
# (the real-browser tests), PostgreSQL (the store tests run on both databases) and Node.js with npm
# (n8n's and Flowise's memory run as their JavaScript beside MemLens's); then the pinned npm packages
# of tests/reference/js/ into their node_modules and the OpenAI Agents SDK's own environment
# (tests/reference/python/openai_agents/.venv, from its lock), each skipped when already there.
# The lock files are written by scripts/lock.sh from requirements.txt and requirements-dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

lock=requirements.lock
[ "${1:-}" = "--test" ] && lock=requirements-dev.lock

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip --quiet --disable-pip-version-check)
stamp=".venv/.$lock.sha256"
want=$(cat "$lock" pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # --no-deps: the lock lists every package, so pip resolves nothing; pip check then proves that
  # what is installed satisfies what each package asks for.
  "${pip[@]}" install --require-hashes --no-deps -r "$lock"
  "${pip[@]}" install --no-deps --editable .
  .venv/bin/python -m pip check --disable-pip-version-check >/dev/null
  echo "$want" > "$stamp"
  if [ "$lock" = requirements-dev.lock ]; then  # the app's packages are installed too, at the same versions
    cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1 > .venv/.requirements.lock.sha256
  fi
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
  .venv/bin/python -m tests.reference.python_packages install
fi

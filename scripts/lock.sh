#!/usr/bin/env bash
# Writes the lock files scripts/setup.sh installs, from the pins:
#   requirements.lock      requirements.txt: what the app, the CLI and the API need
#   requirements-dev.lock  the same versions, plus MemLens's postgres and auth extras and requirements-dev.txt
#   tests/reference/python/openai_agents/requirements.lock  the OpenAI Agents SDK's own environment: the app's
#                          versions of every package both need, except websockets (the SDK asks for <17)
# Every package, direct or pulled in, is pinned with the hashes of all its files on PyPI, for every
# platform Python 3.11 and later run on (uv's universal resolution: a Windows-only package carries its
# marker). Run it after changing a pin or adding a dependency (CONTRIBUTING.md); it needs PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
"${PYTHON:-python3}" -m venv "$tool/venv"
"$tool/venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"

compile=("$tool/venv/bin/uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes
         --index-url https://pypi.org/simple --custom-compile-command scripts/lock.sh)
"${compile[@]}" requirements.txt -o requirements.lock
# The app's packages keep the versions of requirements.lock: an app install and a test install run the same code.
"${compile[@]}" pyproject.toml --extra postgres --extra auth requirements-dev.txt --constraint requirements.lock \
  -o requirements-dev.lock
# The Agents SDK cannot share the test environment (websockets<17): its own lock, the app's versions elsewhere.
agents=tests/reference/python/openai_agents
sed -n 's/^\([A-Za-z0-9._-]*==[^ ]*\).*/\1/p' requirements.lock | grep -v '^websockets==' > "$tool/app-constraints.txt"
"${compile[@]}" "$agents/requirements.txt" --constraint "$tool/app-constraints.txt" -o "$agents/requirements.lock"

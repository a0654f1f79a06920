#!/usr/bin/env bash
# Writes the lock files scripts/setup.sh installs, from the pins:
#   requirements.lock      requirements.txt: what the app, the CLI and the API need
#   requirements-dev.lock  the same versions, plus MemLens's postgres and auth extras and requirements-dev.txt
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

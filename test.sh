#!/usr/bin/env bash
# Install srcore, its plugins and the test extras into .venv (see run.sh), then run every test.
set -euo pipefail
cd "$(dirname "$0")"
SRCORE_EXTRAS=test bash run.sh --install-only
exec .venv/bin/python -m pytest -q "$@"

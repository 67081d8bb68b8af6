#!/usr/bin/env bash
# Set up .venv (python3.11) with srcore and its plugins (editable, compat mode), then run `srcore demo`.
#   bash run.sh                  install if needed, then run the demo
#   bash run.sh --install-only   install only (test.sh uses this with SRCORE_EXTRAS=test)
# Idempotent: pip runs only when .venv is new or a pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")"

EXTRAS="${SRCORE_EXTRAS:-}"
TORCH_PIN="torch==2.13.0"
PY=.venv/bin/python

if [ ! -x "$PY" ]; then
    python3.11 -m venv .venv
fi

stamp=".venv/.srcore-install-${EXTRAS:-base}"
# compat editable installs: a .pth line naming each checkout, instead of setuptools' import finders, which
# every Python start imports (with pathlib, importlib.util, urllib.parse, ...: 1-4 ms of CPU at a srcore cold
# start; docs/performance-log.md, "Cold start with a selection, fourth attempt"). The mode is in the digest,
# so a venv installed with the finders is reinstalled.
EDITABLE_MODE=compat
digest="$( (cat pyproject.toml plugins/*/pyproject.toml; echo "editable_mode=$EDITABLE_MODE") | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
    # build the editable installs with the venv's own setuptools (no isolated build env to download)
    PYTHONWARNINGS=ignore "$PY" -m pip install --quiet --disable-pip-version-check "setuptools>=77" wheel
    spec="."
    [ -n "$EXTRAS" ] && spec=".[$EXTRAS]"
    PYTHONWARNINGS=ignore "$PY" -m pip install --quiet --disable-pip-version-check --no-build-isolation "$TORCH_PIN" \
        --config-settings "editable_mode=$EDITABLE_MODE" -e "$spec" -e plugins/cpu -e plugins/quantized -e plugins/trt_like -e plugins/openvino
    echo "$digest" > "$stamp"
fi

if [ "${1:-}" = "--install-only" ]; then
    exit 0
fi
exec .venv/bin/srcore demo

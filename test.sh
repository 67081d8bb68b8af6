#!/usr/bin/env bash
# Install srcore, its plugins and the test extras into .venv (see run.sh), then run every test twice:
# with the default executor and planner (codegen, standard_resizing), then with the other two
# (interpreter, precomputed_offsets), so the whole suite passes with both executors and both planners.
# Tests marked one_pass (independent of executor and planner: parsers, schemas, shape rules, ...) run
# in the first pass only; tests marked perf (timing assertions) in neither: `pytest -m perf` runs them.
set -euo pipefail
cd "$(dirname "$0")"
SRCORE_EXTRAS=test bash run.sh --install-only
.venv/bin/python -m pytest -q "$@"
echo "== second pass: SRCORE_EXECUTOR=interpreter SRCORE_MEMORY_PLANNER=precomputed_offsets"
SRCORE_EXECUTOR=interpreter SRCORE_MEMORY_PLANNER=precomputed_offsets exec .venv/bin/python -m pytest -q -m "not one_pass and not perf" "$@"

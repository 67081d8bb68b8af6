#!/usr/bin/env bash
# Install srcore, its plugins and the test extras into .venv (see run.sh), then run every test twice:
# with the default executor and planner (codegen, standard_resizing), then with the other two
# (interpreter, precomputed_offsets), so the whole suite passes with both executors and both planners.
# Tests marked one_pass (independent of executor and planner: parsers, schemas, shape rules, ...) run
# in the first pass only; tests marked perf (timing assertions) in neither: `pytest -m perf` runs them.
# Each pass runs on every core this process may use, at most 4 (pytest-xdist, --dist loadscope: a test
# module runs on one worker, in file order, so its module fixtures and a local Ray or Dask cluster start
# once and its seeded random data is the same as in a one-process run); SRCORE_TEST_WORKERS=N sets the
# number of workers, 0 runs the tests in pytest's own process.
# srcore's on-disk caches go to a temporary directory that both passes share (the second starts warm) and
# that is removed at the end, never to ~/.cache/srcore (conftest.py; SRCORE_TEST_CACHE_DIR=DIR keeps DIR).
set -euo pipefail
cd "$(dirname "$0")"
SRCORE_EXTRAS=test bash run.sh --install-only
workers="${SRCORE_TEST_WORKERS:-$(.venv/bin/python -c 'import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))')}"
parallel=(-n "$workers" --dist loadscope)
[ "$workers" = 0 ] && parallel=()
# the test files that hold a second-pass test, written by the first pass (conftest.py): the second collects
# only those (the ~200 files of one_pass tests took about half of its collection)
second_pass_files="$(mktemp "${TMPDIR:-/tmp}/srcore-second-pass.XXXXXX")"
if [ -z "${SRCORE_TEST_CACHE_DIR:-}" ]; then
    SRCORE_TEST_CACHE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/srcore-test-cache.XXXXXX")"
    trap 'rm -rf "$SRCORE_TEST_CACHE_DIR" "$second_pass_files"' EXIT
else
    trap 'rm -f "$second_pass_files"' EXIT
fi
export SRCORE_TEST_CACHE_DIR
# Python's bytecode caches (and pytest's of its rewritten test modules) are written, whatever the
# environment says: with PYTHONDONTWRITEBYTECODE set, every worker of both passes and every process a test
# starts compiled srcore's sources and rewrote the asserts of every test module again
unset PYTHONDONTWRITEBYTECODE
SRCORE_TEST_WRITE_SECOND_PASS_FILES="$second_pass_files" .venv/bin/python -m pytest -q "${parallel[@]}" "$@"
echo "== second pass: SRCORE_EXECUTOR=interpreter SRCORE_MEMORY_PLANNER=precomputed_offsets"
SRCORE_EXECUTOR=interpreter SRCORE_MEMORY_PLANNER=precomputed_offsets SRCORE_TEST_ONLY_FILES="$second_pass_files" \
    .venv/bin/python -m pytest -q "${parallel[@]}" -m "not one_pass and not perf" "$@"

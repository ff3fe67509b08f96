#!/usr/bin/env bash
# Regenerate constraints.txt: the exact version of every package in a virtualenv that
# passed the test suite (finpod itself excluded). pyproject.toml keeps its ranges for
# library users; constraints.txt is the tested set the README's install commands use.
#
#   deploy/lock-constraints.sh [VENV] [OUT]      # defaults: .venv constraints.txt
#
# torch is pinned by version, not build: a local build tag (2.13.0+cpu, +cu128) is
# dropped from every pin, so the same file serves CPU and CUDA installs (see the comment
# block written at the top of the file).
set -euo pipefail

venv="${1:-.venv}"
out="${2:-constraints.txt}"
python="${venv}/bin/python"
[ -x "${python}" ] || { echo "error: no Python at ${python} (pass the virtualenv)" >&2; exit 1; }

pins="$("${python}" -m pip freeze --exclude-editable --all \
    | grep -Eiv '^(finpod|pip|setuptools|wheel)(==| @)' \
    | grep -v ' @ ' \
    | sed -E 's/^([A-Za-z0-9_.-]+==[^+;]+)\+[A-Za-z0-9.]+/\1/' \
    | LC_ALL=C sort -f)"
grep -q '^torch==' <<<"${pins}" || { echo "error: torch is not installed in ${venv}" >&2; exit 1; }

tmp="$(mktemp "${out}.XXXXXX")"
trap 'rm -f "${tmp}"' EXIT
{
    cat <<'HEADER'
# The tested set: every package the test suite ran with, at its exact version
# (regenerate with deploy/lock-constraints.sh from a virtualenv that passed the tests).
# pyproject.toml keeps version ranges for library users; the README's install commands
# pass this file with `-c` so an install gets the versions the tests passed with.
#
# Pins torch's version, not its build: pip installs the best wheel of this version that
# its package indexes offer. From PyPI on Linux x86_64 that is the CUDA build (a
# multi-GB download with its nvidia-* libraries; it also runs on CPU-only machines).
# Where a `2.13.0+cpu` wheel is on offer (PyTorch's CPU index, a local wheel folder) pip
# takes that one. For the CPU-only build on any machine, install torch first:
#   pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
# then: pip install -c constraints.txt -e '.[dev]'   (see the README's Quick start)
HEADER
    printf '%s\n' "${pins}"
} >"${tmp}"
mv "${tmp}" "${out}"
trap - EXIT
echo "wrote ${out}: $(grep -vc '^#' "${out}") pins from ${venv}"

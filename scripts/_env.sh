# Sourced by scripts/demo and scripts/test: make .venv with edgebench installed (idempotent).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EDGEBENCH_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
# pip's own chatter (build-backend notices, index warnings from the machine's pip config) goes to
# a log that is shown only when the install fails, so a first install prints a few lines, not a wall.
quiet_pip() {
    mkdir -p "$VENV"
    local log="$VENV/pip-install.log"
    if ! "$@" -q >"$log" 2>&1; then
        echo "error: '$*' failed; its output follows (also in $log)" >&2
        cat "$log" >&2
        return 1
    fi
}
if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating virtualenv $VENV"
    "$PY" -m venv "$VENV"
    quiet_pip "$VENV/bin/pip" install --upgrade pip
fi
# The build backend pyproject.toml asks for (SPDX license strings need setuptools >= 77): a venv
# made by an older Python ships setuptools 65, which breaks builds without isolation.
if ! "$VENV/bin/python" -c "import sys, setuptools; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" 2>/dev/null; then
    quiet_pip "$VENV/bin/pip" install --upgrade "setuptools>=77" wheel
fi
# Reinstall only when pyproject.toml changed since the last install.
STAMP="$VENV/.edgebench-installed"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)-${EDGEBENCH_EXTRAS:-test}"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ] || ! "$VENV/bin/python" -c "import edgebench" 2>/dev/null; then
    echo "==> installing edgebench[${EDGEBENCH_EXTRAS:-test}] into $VENV"
    quiet_pip "$VENV/bin/pip" install -e "$ROOT[${EDGEBENCH_EXTRAS:-test}]"
    echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

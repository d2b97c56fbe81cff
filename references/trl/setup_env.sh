#!/usr/bin/env bash
# Creates the separate virtual environment that references/trl/generate.py runs in (trl and its pinned
# dependencies, CPU torch). CreditLens itself never imports trl.
#
#   bash references/trl/setup_env.sh [VENV_DIR]      # default: .venv-references-trl in the repository root
#   .venv-references-trl/bin/python references/trl/generate.py
#
# PYTHON selects the interpreter (default python3.11, else python3); the golden files were made with 3.11.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-references-trl}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
torch_pin="$(grep -E '^torch==' "$here/requirements.txt")"

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --upgrade pip

# torch's "+cpu" build lives on PyTorch's own index, not on PyPI. Try the configured indexes and
# find-links first (a local wheel is enough), then the CPU index.
if ! "$venv/bin/python" -m pip install "$torch_pin"; then
    "$venv/bin/python" -m pip install --index-url https://download.pytorch.org/whl/cpu "$torch_pin"
fi
"$venv/bin/python" -m pip install -r "$here/requirements.txt"

"$venv/bin/python" -c "import trl, torch; print('trl', trl.__version__, '| torch', torch.__version__)"
echo "ready: $venv/bin/python references/trl/generate.py"

#!/usr/bin/env bash
# Creates the separate virtual environment that references/skyrl/generate.py runs in (skyrl, the packages its
# advantage estimators' import needs, CPU torch). CreditLens itself never imports skyrl.
#
#   bash references/skyrl/setup_env.sh [VENV_DIR]    # default: .venv-references-skyrl in the repository root
#   .venv-references-skyrl/bin/python references/skyrl/generate.py
#
# PYTHON selects the interpreter (default python3.11, else python3); the golden file was made with 3.11.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-references-skyrl}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
torch_pin="$(grep -E '^torch==' "$here/requirements.txt")"

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --upgrade pip

# torch's "+cpu" build lives on PyTorch's own index, not on PyPI. Try the configured indexes and
# find-links first (a local wheel is enough), then the CPU index.
if ! "$venv/bin/python" -m pip install "$torch_pin"; then
    "$venv/bin/python" -m pip install --index-url https://download.pytorch.org/whl/cpu "$torch_pin"
fi
# skyrl and skyrl-gym without their declared dependencies (transformers, peft, datasets, ... are never imported
# by the estimators); everything the import does need is pinned in requirements.txt.
"$venv/bin/python" -m pip install --no-deps $(grep -E '^skyrl(-gym)?==' "$here/requirements.txt")
grep -vE '^(skyrl(-gym)?|torch)==' "$here/requirements.txt" > "$venv/requirements-rest.txt"
"$venv/bin/python" -m pip install -r "$venv/requirements-rest.txt"

"$venv/bin/python" -c "import skyrl, torch; print('skyrl', skyrl.__version__, '| torch', torch.__version__)"
echo "ready: $venv/bin/python references/skyrl/generate.py"

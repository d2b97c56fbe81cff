#!/usr/bin/env bash
# Creates the separate virtual environment a reference harness runs in (its trainer package and pinned
# dependencies, CPU torch). CreditLens itself never imports the trainers.
#
#   bash references/setup_env.sh NAME [VENV_DIR]  # NAME: a folder here (trl, skyrl, openrlhf, prime_rl, verl)
#   .venv-references-NAME/bin/python references/NAME/generate.py
#
# references/NAME/requirements.txt pins everything; references/NAME/requirements-no-deps.txt, when present, lists
# packages installed without their declared dependencies (requirements.txt then pins what the harness needs).
# PYTHON selects the interpreter (default python3.11, else python3); the golden files were made with 3.11.
set -euo pipefail

name="${1:?usage: bash references/setup_env.sh NAME [VENV_DIR]}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
here="$root/references/$name"
venv="${2:-$root/.venv-references-$name}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
torch_pin="$(grep -E '^torch==' "$here/requirements.txt")"

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --upgrade pip

# torch's "+cpu" build lives on PyTorch's own index, not on PyPI. Try the configured indexes and
# find-links first (a local wheel is enough), then the CPU index.
if ! "$venv/bin/python" -m pip install "$torch_pin"; then
    "$venv/bin/python" -m pip install --index-url https://download.pytorch.org/whl/cpu "$torch_pin"
fi
if [ -f "$here/requirements-no-deps.txt" ]; then
    "$venv/bin/python" -m pip install --no-deps -r "$here/requirements-no-deps.txt"
fi
"$venv/bin/python" -m pip install -r "$here/requirements.txt"

case "$name" in
    prime_rl)  # not installed: generate.py loads prime-rl's files from a source checkout (--prime-rl-src)
        "$venv/bin/python" -c "import torch; print('torch', torch.__version__)" ;;
    *)  # the installed distribution's version (openrlhf's package sets no __version__)
        "$venv/bin/python" -c "import importlib.metadata, $name, torch
print('$name', importlib.metadata.version('$name'), '| torch', torch.__version__)" ;;
esac
echo "ready: $venv/bin/python references/$name/generate.py"

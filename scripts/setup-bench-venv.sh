#!/bin/sh
# Makes the Python virtual environment the benchmarks (and the llama.cpp fixture generators of
# tests/fixtures/gen/) run their peers in: `make bench` calls it as
# scripts/setup-bench-venv.sh BUILD/bench-venv. The packages are the pinned ones of
# benchmarks/requirements.txt, from PyPI through pip (so the machine's pip configuration, index
# included, applies). llama-cpp-python is built from its sdist with -DGGML_NATIVE=ON, so
# llama.cpp runs with this CPU's instructions like our build does (a prebuilt wheel would be
# generic, and slower than the llama.cpp we claim to be compared with); its multimodal library
# (mtmd, which llama_cpp loads only for image chats) is left out, a quarter of the compile. AMX
# is left out too (-mno-amx-*, which win over -march=native): ggml's AMX matmul segfaults on the
# first decode here (Xeon with amx_int8/amx_tile under this VM; seen with SmolLM2's Q4_1),
# while its AVX-512 kernels and weight repacking stay. The
# build takes long on few cores; CMAKE_BUILD_PARALLEL_LEVEL (default: all cores) sets its jobs. A venv whose
# requirements are unchanged is reused. Exits non-zero when venv, pip or the build fails.
#   usage: scripts/setup-bench-venv.sh VENV_DIR
set -eu
venv=${1:?usage: setup-bench-venv.sh VENV_DIR}
reqs="$(cd "$(dirname "$0")/.." && pwd)/benchmarks/requirements.txt"
noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake_args="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS='$noamx' -DCMAKE_CXX_FLAGS='$noamx'"
want=$( (sha256sum "$reqs"; echo "$cmake_args") | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
echo "setup-bench-venv: making $venv (benchmarks/requirements.txt; llama-cpp-python is compiled, this takes a while)"
rm -rf "$venv"
python3 -m venv "$venv"
# The sdist build first (the long part; the rest are wheels).
CMAKE_ARGS="$cmake_args" FORCE_CMAKE=1 \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$venv/bin/python" -m pip install -q --no-binary llama-cpp-python --no-cache-dir \
    "$(grep '^llama-cpp-python==' "$reqs")"
"$venv/bin/python" -m pip install -q -r "$reqs"
"$venv/bin/python" -c "import llama_cpp, llama_cpp.server.app, torch, numpy, safetensors, gguf, httpx"
echo "$want" > "$venv/.requirements.sha256"

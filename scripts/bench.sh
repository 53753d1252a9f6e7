#!/usr/bin/env bash
# Runs every benchmark against its peer, on 1 and 2 threads where the issue asks for both,
# printing ratios (docs/benchmarks.md lists the results and the exact commands). Long: about
# two hours on a 2-core machine, most of it the training epochs and the 3B models.
set -euo pipefail
build="${1:-build}"
cd "$(dirname "$0")/.."
# The torch peer of every PyTorch row: the first interpreter listed in $PT_TORCH_PYTHONS (the
# Makefile passes the bench venv's, PyPI torch 2.x); the next one, if any, is a second peer of
# the checkpoint-loading row. Unset, the python3 on PATH is used, with a warning (it may be an
# older torch, e.g. Debian's 1.13, whose figures are not comparable).
read -r -a torch_pys <<<"${PT_TORCH_PYTHONS:-}"
if [ ${#torch_pys[@]} -gt 0 ]; then
  torch_py="${torch_pys[0]}"
else
  torch_py="$(command -v python3 || echo python3)"
  echo "WARNING: PT_TORCH_PYTHONS is not set: the PyTorch rows below run against $torch_py" \
    "($("$torch_py" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null ||
      echo "no torch")), not the bench venv's torch (make bench sets it)" >&2
fi
if ! "$torch_py" -c "import torch" 2>/dev/null; then
  echo "error: $torch_py cannot import torch (set PT_TORCH_PYTHONS to a python with torch)" >&2
  exit 1
fi
echo "torch peer: $torch_py ($("$torch_py" -c 'import torch; print(torch.__version__)'))"
echo "== float32 matmul 1024^3 vs direct OpenBLAS =="
PT_NUM_THREADS=2 "$build/bin/bench_matmul_blas"
echo "== ops and autograd vs PyTorch, 1 and 2 threads =="
for t in 1 2; do
  "$torch_py" benchmarks/ops_vs_torch.py --bin "$build/bin/bench_ops" --threads "$t" \
    --min-seconds 0.2 --repeat 3 --markdown
  "$torch_py" benchmarks/autograd_vs_torch.py --bin "$build/bin/autograd_vs_torch" --threads "$t"
done
echo "== training one epoch vs PyTorch (MLP and CNN on Fashion-MNIST, 3 seeds; ResNet-20, 200 batches) =="
for t in 1 2; do
  "$torch_py" benchmarks/train_vs_torch.py --bin "$build/bin/train_vs_torch" --threads "$t" \
    --models cnn,mlp --seeds 0,1,2 --markdown
  "$torch_py" benchmarks/train_vs_torch.py --bin "$build/bin/train_vs_torch" --threads "$t" \
    --models resnet20 --batches 200 --markdown
done
echo "== checkpoint loading vs PyTorch (torch.load, safetensors) =="
# A second peer: the second interpreter listed in $PT_TORCH_PYTHONS, if any.
py2=()
if [ ${#torch_pys[@]} -gt 1 ]; then py2=(--python2 "${torch_pys[1]}"); fi
"$torch_py" benchmarks/load_vs_torch.py --bin "$build/bin/load_vs_torch" --threads 2 "${py2[@]}"
echo "== LLM prompt processing and generation vs llama.cpp (llama-cpp-python) =="
# The real models of issue 6 from $PT_MODELS_DIR, and the random-weight ~0.5B / ~1B / ~3B models
# (Q4_K_M, Q6_K, Q8_0) that benchmarks/make_synthetic_models.py writes once into
# $build/synth-models (~12 GB); llama-cpp-python (with gguf and numpy) from the interpreter
# $PT_LLAMA_PYTHON. Skipped when it is missing.
models_dir="${PT_MODELS_DIR:-data/models}" # where `make models` puts them
llama_py="${PT_LLAMA_PYTHON:-}" # a python with llama-cpp-python, gguf and numpy
if [ -x "$llama_py" ] && "$llama_py" -c "import llama_cpp, gguf, numpy" 2>/dev/null; then
  llm_models=()
  for m in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    if [ -f "$models_dir/$m" ]; then llm_models+=("$models_dir/$m"); fi
  done
  synth="$build/synth-models"
  for size in 0.5b:qwen1.5-0.5b 1b:llama3.2-1b 3b:llama3.2-3b; do
    for q in q4_k_m q6_k q8_0; do
      f="$synth/${size#*:}-shape-$q.gguf"
      if [ ! -f "$f" ] && [ -f "$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
        "$llama_py" benchmarks/make_synthetic_models.py "$synth" --size "${size%%:*}" \
          --quant "$q" --vocab-from "$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf" >/dev/null
      fi
      if [ -f "$f" ]; then llm_models+=("$f"); fi
    done
  done
  for t in 1 2; do
    "$llama_py" benchmarks/llm_vs_llamacpp.py --bin "$build/bin/llm_bench" --threads "$t" \
      --repeat 3 --pp 256 --tg 64 --ctx 512 "${llm_models[@]}"
  done
  echo "== promeserve vs llama_cpp.server, 1 / 4 / 16 streams, Q4_K_M models, 2 threads =="
  # httpx and llama-cpp-python's server extras: benchmarks/requirements.txt pins them
  serve_models=("$models_dir/gemma-3-270m-q4_k_m.gguf" "$synth/qwen1.5-0.5b-shape-q4_k_m.gguf")
  if ! "$llama_py" -c "import httpx, llama_cpp.server.app" 2>/dev/null; then
    echo "skipped: $llama_py lacks httpx or llama-cpp-python's server extras"
    serve_models=()
  fi
  for f in "${serve_models[@]}"; do
    if [ ! -f "$f" ]; then echo "skipped: $f is missing"; continue; fi
    fmt=()
    # this gemma GGUF has no chat template; llama_cpp.server would fall back to llama-2's
    case "$f" in *gemma*) fmt=(--llamacpp-chat-format gemma) ;; esac
    "$llama_py" benchmarks/serve_vs_llamacpp.py --bin "$build/bin/promeserve" --gguf "$f" \
      --threads 2 --seconds 15 "${fmt[@]}"
  done
else
  echo "skipped: no llama-cpp-python for $llama_py"
fi

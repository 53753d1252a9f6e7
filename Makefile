# PromeTorch: thin wrapper over scripts/ and CMake.
#   make run    set up, build, run the demo (examples/tensor_demo.c)
#   make test   set up, build, run the whole test suite (ctest)
#   make bench  set up (with PyTorch), build, run the benchmarks against PyTorch
#   make asan   the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make install PREFIX=/usr/local
BUILD ?= build
PREFIX ?= /usr/local
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
JOBS ?= $(shell nproc)

.PHONY: all setup build run test bench asan install clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@$(BUILD)/bin/tensor_demo

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: setup
	@scripts/setup.sh python3-torch
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@scripts/bench.sh $(BUILD)

asan: setup
	@cmake -S . -B $(BUILD)-asan $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=ON -DPT_WITH_CUDA=OFF >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS)

install: build
	@cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan

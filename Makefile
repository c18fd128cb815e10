# Thin wrapper over CMake. The two commands from the README:
#   make demo    build (release) and run the end-to-end demo
#   make check   build with ASan+UBSan and run every test (ctest summary last)
# Each installs only the Debian packages it needs first (scripts/setup-deps.sh
# GROUP): the Release build and the demo need no PyTorch; python3-torch,
# torchvision, onnx and the Fashion-MNIST data set come with `make zoo` (the
# model-zoo tools) and `make bench` only.

JOBS ?= $(shell nproc)
BUILD ?= build
CHECK_BUILD ?= build-check
CMAKE_FLAGS ?=

.PHONY: all deps build demo demo-pipeline demo-cluster check bench zoo valgrind fuzz clean

all: build

deps:
	@scripts/setup-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/setup-deps.sh demo
	scripts/demo.sh $(BUILD)

# Pipelines (issue 14): the fashion_scenes example under rising load.
demo-pipeline: build
	@scripts/setup-deps.sh demo
	scripts/demo_pipeline.sh $(BUILD)

# A cluster on this host (issue 18): redis-server, a controller with the
# local worker provider (two workers), a front end; load, a worker killed,
# the autoscaler replacing it.
demo-cluster: build
	@scripts/setup-deps.sh demo cluster
	scripts/demo_cluster.sh $(BUILD)

# Sanitised build with clang (so libFuzzer harnesses build in the same
# tree); fuzzers run for a bounded time as ctest tests.
check:
	@scripts/setup-deps.sh check
	CC=clang CXX=clang++ cmake -S . -B $(CHECK_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	  -DVR_SANITIZE=ON -DVR_FUZZ=ON -DVR_REQUIRE_TESTS=ON -DVR_FAULT_INJECTION=ON \
	  $(CMAKE_FLAGS) >/dev/null
	cmake --build $(CHECK_BUILD) -j $(JOBS)
	cd $(CHECK_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

bench: build
	@scripts/setup-deps.sh bench
	scripts/bench.sh $(BUILD)

# Model-zoo tools (tools/zoo): PyTorch training/export, ONNX checks. The
# committed models do not need this; it re-creates them.
zoo:
	@scripts/setup-deps.sh zoo
	@echo "zoo: dependencies ready; see tools/zoo/README.md, e.g."
	@echo "  /usr/bin/python3 tools/zoo/train_fmnist.py && /usr/bin/python3 tools/zoo/check_onnx_numpy.py"

# Unit tests under valgrind memcheck (minutes; not in CI).
valgrind: deps
	@scripts/setup-deps.sh bench
	scripts/valgrind.sh

clean:
	rm -rf $(BUILD) $(CHECK_BUILD)

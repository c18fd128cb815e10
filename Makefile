# Thin wrapper over CMake. The two commands from the README:
#   make demo    build (release) and run the end-to-end demo
#   make check   build with ASan+UBSan and run every test (ctest summary last)
# Both install missing Debian packages first (scripts/setup-deps.sh).

JOBS ?= $(shell nproc)
BUILD ?= build
CHECK_BUILD ?= build-check
CMAKE_FLAGS ?=

.PHONY: all deps build demo check bench valgrind fuzz clean

all: build

deps:
	@scripts/setup-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	scripts/demo.sh $(BUILD)

# Sanitised build with clang (so libFuzzer harnesses build in the same
# tree); fuzzers run for a bounded time as ctest tests.
check: deps
	CC=clang CXX=clang++ cmake -S . -B $(CHECK_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	  -DVR_SANITIZE=ON -DVR_FUZZ=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(CHECK_BUILD) -j $(JOBS)
	cd $(CHECK_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

bench: build
	@scripts/setup-deps.sh --bench
	scripts/bench.sh $(BUILD)

# Unit tests under valgrind memcheck (minutes; not in CI).
valgrind: deps
	@scripts/setup-deps.sh --bench
	scripts/valgrind.sh

clean:
	rm -rf $(BUILD) $(CHECK_BUILD)

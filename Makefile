# Ember's entry points. `make demo` and `make test` are the README's Quick start.
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: all deps configure build test demo sanitize gpu-check bench format clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) -j $(JOBS) --output-on-failure --timeout 900

demo: build
	@scripts/demo $(BUILD)

# The CPU suite under AddressSanitizer and UndefinedBehaviorSanitizer (CUDA off: the sanitizers
# and the CUDA runtime do not mix). allocator_may_return_null: Ember turns a failed allocation into
# OutOfMemoryError and tests check that, so ASan must fail impossible sizes as malloc does.
sanitize: deps
	cmake -S . -B $(BUILD)-asan -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON \
	  -DEMBER_CUDA=OFF -DEMBER_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(BUILD)-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD)-asan -j $(JOBS) --output-on-failure --timeout 1800

gpu-check:
	@scripts/gpu-check

format:
	git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-asan

# Set-up and the two everyday commands (see README.md):
#   make quickstart   install what is missing, build the core, run the quickstart
#   make test         the same set-up, then the C++ and Python test suites
PYTHON ?= python3
BUILD ?= build
APT_PACKAGES := g++ cmake ninja-build ccache libtomlplusplus-dev libxxhash-dev libgtest-dev clang libclang-rt-14-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps core quickstart test test-cpp test-python clean

deps: $(BUILD)/.deps-installed
$(BUILD)/.deps-installed: setup.cfg Makefile
	@mkdir -p $(BUILD)
	@dpkg -s $(APT_PACKAGES) >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES); }
	$(PYTHON) -m pip install -q torch==2.14.1
	$(PYTHON) -m pip install -q -e '.[test,notebook]'
	@touch $@

core: deps
	cmake -S registry -B $(BUILD) -G Ninja -DPython_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null
	cmake --build $(BUILD)

quickstart: core
	$(PYTHON) -m registry.quickstart

test: test-cpp test-python

test-cpp: core
	ctest --test-dir $(BUILD) --output-on-failure --timeout 120 -j2

test-python: core
	$(PYTHON) -m pytest

clean:
	rm -rf $(BUILD)

# Sanitizers and fuzzing of the C++ core (see registry/fuzz/):
#   make sanitize   the GoogleTest suite under AddressSanitizer + UBSan
#   make fuzz       each libFuzzer target for FUZZ_SECONDS, seeded from kernels/
# The fuzz corpus grows across runs in $(FUZZ_BUILD)/corpus; a crashing input
# is written to $(FUZZ_BUILD)/crash-* (replay: $(FUZZ_BUILD)/fuzz_<target> FILE).
SANITIZE_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := manifest include_scan

.PHONY: sanitize fuzz

sanitize: deps
	cmake -S registry -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DREGISTRY_SANITIZE=ON -DREGISTRY_BUILD_MODULE=OFF >/dev/null
	cmake --build $(SANITIZE_BUILD) --target core_tests
	ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(SANITIZE_BUILD)/core_tests

# kreg_core itself is built with -fsanitize=fuzzer-no-link: without coverage
# instrumentation in the code under test, libFuzzer would mutate blindly.
fuzz: deps
	@command -v clang++ >/dev/null || { echo "make fuzz needs clang and its libFuzzer runtime:" \
	  "apt-get install clang libclang-rt-14-dev"; exit 1; }
	CC=clang CXX=clang++ cmake -S registry -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DREGISTRY_FUZZ=ON -DREGISTRY_SANITIZE=ON -DREGISTRY_BUILD_MODULE=OFF -DREGISTRY_BUILD_TESTS=OFF \
	  -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null
	cmake --build $(FUZZ_BUILD)
	@mkdir -p $(addprefix $(FUZZ_BUILD)/corpus/,$(FUZZ_TARGETS))
	@for f in kernels/*/kernel.toml; do cp $$f $(FUZZ_BUILD)/corpus/manifest/seed-$$(echo $$f | tr / _); done
	@find kernels -type f \( -name '*.h' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.cu' \) | \
	  while read -r f; do cp "$$f" $(FUZZ_BUILD)/corpus/include_scan/seed-$$(echo "$$f" | tr / _); done
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/ $(FUZZ_BUILD)/corpus/$$t 2>$(FUZZ_BUILD)/fuzz_$$t.log || \
	    { tail -40 $(FUZZ_BUILD)/fuzz_$$t.log; exit 1; }; \
	  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' $(FUZZ_BUILD)/fuzz_$$t.log; \
	done

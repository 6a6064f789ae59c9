# Set-up and the two everyday commands (see README.md):
#   make quickstart   install what is missing, build the core, run the quickstart
#   make test         the same set-up, then the C++ and Python test suites
PYTHON ?= python3
BUILD ?= build
APT_PACKAGES := g++ cmake ninja-build ccache libtomlplusplus-dev libxxhash-dev libgtest-dev
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

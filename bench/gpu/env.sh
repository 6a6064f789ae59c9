# Source on the GPU machine (see ../../README.md, "GPU runs"): makes the tools
# the image lacks available from .gpu/ (ccache, toml++ and xxHash headers,
# Jupyter wheels), then builds the C++ core for that machine's Python.
#   . bench/gpu/env.sh
set -e
GPU_DEPS=$(mktemp -d)
for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$GPU_DEPS"; done
export PATH="$PATH:$GPU_DEPS/usr/bin"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$GPU_DEPS/usr/lib/x86_64-linux-gnu"
if [ -d .gpu/wheels ] && ls .gpu/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$GPU_DEPS/py" .gpu/wheels/*.whl
  export PYTHONPATH="$GPU_DEPS/py${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export CCACHE_DIR="$GPU_DEPS/ccache"
# The image's CXX (/opt/gcc/bin/g++) may link libstdc++ statically; the core
# module must share the process's libstdc++ with torch, so use the system g++.
CXX=/usr/bin/g++ cmake -S registry -B build-gpu -G Ninja -DPython_EXECUTABLE="$(command -v python3)" \
  -DTOMLPP_ROOT="$GPU_DEPS" -DXXHASH_ROOT="$GPU_DEPS" -DREGISTRY_BUILD_TESTS=OFF >/dev/null
cmake --build build-gpu >/dev/null
set +e

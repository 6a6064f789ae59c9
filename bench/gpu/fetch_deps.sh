#!/usr/bin/env bash
# Run on a machine with network access, in the checkout: fills .gpu/ (ignored
# by git) with what the GPU machine's image lacks, for bench/gpu/env.sh there:
# Debian packages (ccache, toml++/xxHash headers for the core, redis-server for
# the team-cache tests and benchmark), the
# Jupyter wheels for CPython 3.12 that executing notebooks needs and the kernels
# package (pyproject's test extra: tests/test_hf_export.py) with its dependencies,
# and the nvidia-cutlass wheel (the cutlass extra).
set -euo pipefail
mkdir -p .gpu/debs .gpu/wheels
(cd .gpu/debs && apt-get download ccache libhiredis0.14 libtomlplusplus-dev libxxhash-dev \
  redis-server redis-tools libjemalloc2 liblzf1)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --platform any -d .gpu/wheels \
  nbclient nbformat ipykernel jupyter_client jupyter_core ipython traitlets tornado pyzmq platformdirs \
  fastjsonschema jsonschema jsonschema-specifications referencing rpds-py comm debugpy decorator jedi parso \
  matplotlib-inline prompt_toolkit wcwidth stack_data executing asttokens pure_eval pexpect ptyprocess \
  nest_asyncio ipython_pygments_lexers
# Resolved with its dependencies (huggingface_hub, sigstore, ...), at the test extra's pin.
KERNELS_PIN=$(python3 -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"] if r.startswith("kernels")))')
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --platform any -d .gpu/wheels "$KERNELS_PIN"
# The cutlass extra (kernels/gemm, kernels/gemm_nvrtc): headers only, no dependencies.
CUTLASS_PIN=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["cutlass"][0])')
python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/wheels "$CUTLASS_PIN"
# torch's own dependencies are on the image already: copies of them first on
# PYTHONPATH (env.sh) would shadow the versions torch was installed with.
rm -f .gpu/wheels/typing_extensions-* .gpu/wheels/filelock-* .gpu/wheels/fsspec-*
# Two downloads can bring two versions of one package (one resolved with the
# kernels package's dependencies, one without): env.sh installs the folder at
# once, which pip refuses ("conflicting dependencies"). Keep the newest.
python3 - <<'PY'
from pathlib import Path
from pip._vendor.packaging.utils import parse_wheel_filename

newest = {}
for wheel in sorted(Path(".gpu/wheels").glob("*.whl")):
    name, version, _, _ = parse_wheel_filename(wheel.name)
    kept = newest.get(name)
    if kept is None or version > kept[0]:
        if kept is not None:
            kept[1].unlink()
        newest[name] = (version, wheel)
    else:
        wheel.unlink()
PY

#!/usr/bin/env bash
# Fetch, into .whl/, the wheels of rgt's dependencies that a CUDA PyTorch image without network
# access may lack (bench/gpu.sh installs them there with --no-index): pydantic and its own
# dependencies, and platformdirs. typer, rich, PyYAML and httpx come with such images; name
# more after the versions if yours lacks them. Python 3.12, x86-64 Linux by default.
#
#     bench/gpu_wheels.sh [PYTHON_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$version" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    pydantic==2.13.3 pydantic-core==2.46.3 annotated-types==0.7.0 typing-inspection==0.4.5 \
    platformdirs==4.14.7
du -sh .whl

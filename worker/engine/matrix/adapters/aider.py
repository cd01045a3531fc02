"""Aider (``aider``), run unattended on one task: one ``--message``, the task's files in the chat.

The edit format is the matrix's setting for Aider: ``AiderAdapter(edit_format=...)``, and its
``variants`` (``aider:whole``, ``aider:diff``: ``adapter("aider", "diff")``). Plain ``aider`` is
``whole``, what Aider picks for a model it has no settings for; ``diff`` is SEARCH/REPLACE blocks.

Aider runs in a git repository, as its users run it: the launcher makes the workspace one (one
commit of the task's files) before Aider starts, so Aider builds its repository map (tree-sitter
summaries of the tracked files not in the chat, sent with every request: part of its prompt cost)
from what the task holds beyond its named files. Edits are written in place and never committed
(``--no-auto-commits``, ``--no-dirty-commits``), ``.gitignore`` is left alone, and the map's tag
cache goes to HOME, so the workspace holds only the task's files, their edits and ``.git``.

Everything Aider would fetch or start on its own is switched off: the PyPI update check, the
analytics (PostHog), the release notes, the browser GUI, URL scraping and the Playwright install
it offers, and model metadata (litellm's cost map from GitHub: ``LITELLM_LOCAL_MODEL_COST_MAP``,
plus a metadata file in HOME that names the model, so Aider's own fetch of that map is never
needed). Token counting needs no network: for an unknown ``openai/<model>`` litellm counts with
tiktoken's cl100k_base, whose BPE file litellm ships and points ``TIKTOKEN_CACHE_DIR`` at.

Aider has no flag for its reflection limit (3: after a malformed edit it sends the error back and
asks again); the launcher sets ``Coder.max_reflections`` to ``max_steps - 1`` and then calls
Aider's own ``main``, so one task makes at most ``max_steps`` edit requests.
"""

from __future__ import annotations

import json
import re

from ....rules.harnesses import PROGRAM_VARIANTS
from ..programs import PROGRAMS
from ..spec import LITELLM_OFFLINE, PLAIN_TERMINAL, Endpoint, HarnessTask, Invocation, ProgramResult

EDIT_FORMATS = PROGRAM_VARIANTS["aider"]  # the rules name them for the site
METADATA = ".aider.model.metadata.json"
CHAT_HISTORY = ".aider.chat.history.md"
INPUT_HISTORY = ".aider.input.history"
LLM_HISTORY = ".aider.llm.history"
CONTEXT_TOKENS = 8192  # what Aider is told of the window: it only warns and sizes summaries
# Its own bound on a run; the caller's timeout is usually the tighter one. A CPU-only endpoint
# takes minutes to read Aider's 2-3K-token prompt.
STARTUP_S, STEP_S = 120.0, 300.0

# Runs in the cage with the install's own interpreter: the workspace made a git repository, the
# reflection limit and the tag cache's place, then Aider's main. "~/" in arguments is expanded
# here (Aider does not expand its history file paths).
LAUNCHER = (
    "import os, subprocess, sys\n"
    "for step in (['init', '-q', '-b', 'main'], ['config', 'user.name', 'benchloop'],"
    " ['config', 'user.email', 'benchloop@localhost'], ['config', 'commit.gpgsign', 'false'],"
    " ['add', '-A'], ['commit', '-q', '--no-verify', '-m', 'task']):\n"
    "    subprocess.run(['git', *step], check=True, stdout=subprocess.DEVNULL)\n"
    "from aider.coders.base_coder import Coder\n"
    "from aider.repomap import RepoMap\n"
    "Coder.max_reflections = int(sys.argv[1])\n"
    "RepoMap.TAGS_CACHE_DIR = os.path.expanduser('~/' + RepoMap.TAGS_CACHE_DIR)\n"
    "sys.argv = ['aider'] + [os.path.expanduser(a) if a.startswith('~/') else a"
    " for a in sys.argv[2:]]\n"
    "from aider.main import main\n"
    "sys.exit(main())\n"
)

FAILED = "The LLM did not conform to the edit format."
_FAILED_LINE = re.compile(r"^[> ]*" + re.escape(FAILED))
_SKIP = re.compile(r"^(https?://\S+|\s*)$")


class AiderAdapter:
    spec = PROGRAMS["aider"]

    def __init__(self, edit_format: str = "whole", *, context_tokens: int = CONTEXT_TOKENS):
        if edit_format not in EDIT_FORMATS:
            raise ValueError(f"edit format {edit_format!r}: one of {EDIT_FORMATS}")
        self.edit_format = edit_format
        self.context_tokens = context_tokens

    @property
    def variant(self) -> str:
        """This adapter's variant (``--harness-variant``): its edit format."""
        return self.edit_format

    @property
    def variants(self) -> dict[str, AiderAdapter]:
        """One adapter per edit format, by name (``aider:whole``, ``aider:diff``)."""
        return {fmt: AiderAdapter(fmt, context_tokens=self.context_tokens) for fmt in EDIT_FORMATS}

    @property
    def settings(self) -> dict:
        return {"edit_format": self.edit_format}

    def model_name(self, endpoint: Endpoint) -> str:
        return f"openai/{endpoint.model}"

    def argv(self, task: HarnessTask, endpoint: Endpoint) -> list[str]:
        """Aider's own arguments (after the launcher)."""
        args = ["--model", self.model_name(endpoint), "--edit-format", self.edit_format]
        args += ["--openai-api-base", endpoint.base_url, "--openai-api-key", endpoint.api_key]
        args += ["--model-metadata-file", f"~/{METADATA}", "--no-show-model-warnings"]
        args += ["--no-auto-commits", "--no-dirty-commits", "--no-gitignore", "--yes-always"]
        args += ["--no-check-update", "--no-show-release-notes", "--no-analytics"]
        args += ["--no-gui", "--no-detect-urls", "--disable-playwright"]
        args += ["--no-pretty", "--no-fancy-input", "--no-notifications"]
        args += ["--chat-history-file", f"~/{CHAT_HISTORY}"]
        args += ["--input-history-file", f"~/{INPUT_HISTORY}"]
        args += ["--llm-history-file", f"~/{LLM_HISTORY}"]
        args += ["--message", task.prompt]
        return args + list(task.files)

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        metadata = {
            self.model_name(endpoint): {
                "max_input_tokens": self.context_tokens,
                "max_output_tokens": self.context_tokens,
                "max_tokens": self.context_tokens,
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
        reflections = str(max(task.max_steps - 1, 0))
        argv = ["python", "-I", "-c", LAUNCHER, reflections, *self.argv(task, endpoint)]
        env = {
            **LITELLM_OFFLINE,
            "OPENAI_API_KEY": endpoint.api_key,
            "AIDER_EDIT_FORMAT": self.edit_format,  # the variant, readable in the record
            "COLUMNS": "160",
            **PLAIN_TERMINAL,
        }
        return Invocation(
            argv=argv,
            env=env,
            home_files={METADATA: json.dumps(metadata, indent=2)},
            timeout_s=STARTUP_S + STEP_S * task.max_steps,
        )

    def format_failures(self, result: ProgramResult) -> list[str]:
        """Each time Aider said the model's edits did not parse or apply, with the first line of
        its reason, in order. Read from its chat history in HOME (complete) or else stdout."""
        text = result.home_files.get(CHAT_HISTORY) or result.stdout
        lines = text.splitlines()
        found = []
        for index, line in enumerate(lines):
            if not _FAILED_LINE.match(line):
                continue
            reason = ""
            for following in lines[index + 1 : index + 8]:
                following = following.lstrip("> ").strip()
                if not _SKIP.match(following):
                    reason = following
                    break
            found.append(f"{FAILED} {reason}".strip()[:240])
        return found

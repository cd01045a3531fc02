"""Run untrusted (model-written) Python so that nothing it does can escape or fake a result.

Three layers, each of which holds on its own:

1. ``policy``: an AST check that turns away obviously unsafe code with a readable reason.
2. ``isolation`` + ``seccomp``: the child runs under bubblewrap (own user, PID, mount, network,
   IPC and UTS namespaces; a read-only view of the system libraries and stdlib only; a private
   tmpfs) with a seccomp filter that forbids exec, new processes, sockets and the rest, and
   CPU, memory, file-size, descriptor and thread limits. The whole tree dies on timeout.
3. ``checks``: the child only computes values; this process holds the expected results and
   judges them type-strictly, so nothing the child writes, prints, patches or exits with can
   turn a failing check into a pass.

See docs/sandbox.md for the threat model and what is not contained.
"""

from __future__ import annotations

from .checks import Check, CheckSpecError, Outcome, parse_check, parse_checks
from .isolation import LEVEL_NONE, LEVEL_OS, LEVEL_WEAK, OPT_IN_ENV, Isolation
from .policy import SAFE_BUILTINS, SAFE_MODULES, check_policy
from .runner import Limits, SandboxResult, current_isolation, os_sandbox, run_python

__all__ = [
    "LEVEL_NONE",
    "LEVEL_OS",
    "LEVEL_WEAK",
    "OPT_IN_ENV",
    "SAFE_BUILTINS",
    "SAFE_MODULES",
    "Check",
    "CheckSpecError",
    "Isolation",
    "Limits",
    "Outcome",
    "SandboxResult",
    "check_policy",
    "current_isolation",
    "os_sandbox",
    "parse_check",
    "parse_checks",
    "run_python",
]

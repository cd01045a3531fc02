"""The harness matrix: the same repository tasks, driven by real agent programs and by our own loop.

- ``spec``: the shared types (a harness's pin, one invocation, the recorded requests, overhead).
- ``proxy``: the recording proxy every harness talks through; it is the overhead meter.
- ``runner``: starts a harness program in its cage (bubblewrap, workspace the only writable
  place, the endpoint the only network) and collects what happened.
- ``bounds``: what bounds a caged run (rlimits, a cgroup where one is ours to make) and the
  clean-up of the workspace after it.
- ``adapters``: how each real program (Aider, Hermes Agent, mini-swe-agent) is told to work.
- ``install``: pinned, isolated installs of the programs.
"""

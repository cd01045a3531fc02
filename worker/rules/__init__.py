"""The engine's rules the site shares: the bundle contract, the agent protocol, statistics,
scoring, redaction, comparability and the names of harnesses, profiles and matrix suites.

Pure: no network, no subprocess, no Django; the only I/O is reading this package's own data
files. The site imports worker.rules and nothing else of worker (.importlinter).
"""

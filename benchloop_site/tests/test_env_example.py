""".env.example lists every setting benchloop_site/settings.py reads from the environment, and
nothing it does not read (docker compose's own variables aside)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETTINGS = REPO / "benchloop_site" / "settings.py"
EXAMPLE = REPO / ".env.example"
COMPOSE = REPO / "docker-compose.yml"
# settings.py's readers: each takes the variable's name first.
READERS = {"env_bool", "env_int", "env_secret", "env_list"}


def _environ(node: ast.AST) -> bool:
    """`os.environ`."""
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def read_by_settings(source: str) -> tuple[set[str], set[str]]:
    """(names settings reads, names read through env_secret, which also takes NAME_FILE)."""
    names: set[str] = set()
    secrets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        name_node = None
        if isinstance(node, ast.Call) and node.args:
            function = node.func
            if isinstance(function, ast.Name) and function.id in READERS:
                name_node = node.args[0]
                if function.id == "env_secret" and isinstance(name_node, ast.Constant):
                    secrets.add(name_node.value)
            elif (
                isinstance(function, ast.Attribute)
                and function.attr in ("get", "pop")
                and _environ(function.value)
            ):
                name_node = node.args[0]
        elif isinstance(node, ast.Subscript) and _environ(node.value):
            name_node = node.slice
        # f"{name}_FILE" inside env_secret is a pattern, not a name: counted via `secrets`.
        if isinstance(name_node, ast.Constant) and isinstance(name_node.value, str):
            names.add(name_node.value)
    return names, secrets


def listed_in_example(text: str) -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def test_the_parser_finds_each_way_settings_reads_a_variable() -> None:
    source = (
        "import os\n"
        "A = env_int('A_INT', 1)\n"
        "B = os.environ.get('B_GET', '')\n"
        "C = os.environ['C_ITEM']\n"
        "D = env_secret('D_SECRET')\n"
        "E = os.environ.get(f'{name}_FILE')\n"
    )
    assert read_by_settings(source) == ({"A_INT", "B_GET", "C_ITEM", "D_SECRET"}, {"D_SECRET"})


def test_the_example_lists_every_setting_that_settings_reads() -> None:
    names, secrets = read_by_settings(SETTINGS.read_text())
    assert len(names) > 40  # the parser found settings.py's reads at all
    example = EXAMPLE.read_text()
    assert sorted(names - listed_in_example(example)) == []
    # A secret may come from a file instead (Docker secrets): the example says so for each.
    assert sorted(f"{name}_FILE" for name in secrets if f"{name}_FILE" not in example) == []


def test_the_example_lists_nothing_that_nobody_reads() -> None:
    names, _ = read_by_settings(SETTINGS.read_text())
    compose = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", COMPOSE.read_text()))
    assert sorted(listed_in_example(EXAMPLE.read_text()) - names - compose) == []

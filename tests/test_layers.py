"""The layers import only downwards: contracts ← parsers ← ingest; contracts ← playbooks ← engine ← reports/cli.

Each rule names what a layer's modules may import from this package (the stdlib and third-party libraries are
free); a module that reaches back up a layer fails here with the line that does it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Folder of the repository -> (its import name, the package prefixes it may import from).
LAYERS = {
    "forensics/contracts": ("forensics.contracts", ("forensics.contracts",)),
    "parsers": ("forensics.parsers", ("forensics.contracts", "forensics.parsers")),
    "playbooks": ("forensics.playbooks", ("forensics.contracts", "forensics.playbooks")),
}
# App modules that read inputs (discovery, sniffing, ingest, the cache) never reach diagnosis or output.
INGEST_SIDE = ["sources", "discover", "sniff", "ingest", "steps", "cache", "pool"]
NOT_FROM_INGEST = ("forensics.playbooks", "forensics.engine", "forensics.reports", "forensics.cli", "forensics.scan")


def _runtime_nodes(tree: ast.AST):
    """Every node but those under `if TYPE_CHECKING:` (annotations only: nothing is imported at run time)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(n, m) for n, m in out if m == "forensics" or m.startswith("forensics.")]


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_a_layer_imports_only_itself_and_the_layers_below(folder: str):
    _, allowed = LAYERS[folder]
    bad = [f"{p.relative_to(ROOT)}:{n}: {m}" for p in sorted((ROOT / folder).rglob("*.py"))
           for n, m in _imports(p) if not m.startswith(allowed)]
    assert bad == []


def test_the_ingest_side_never_reaches_diagnosis_or_output():
    bad = [f"forensics/{name}.py:{n}: {m}" for name in INGEST_SIDE
           for n, m in _imports(ROOT / "forensics" / f"{name}.py") if m.startswith(NOT_FROM_INGEST)]
    assert bad == []


def test_importing_a_playbook_loads_no_parser_and_no_ingest():
    import subprocess
    import sys

    code = ("import sys, forensics.playbooks.memory.cuda_oom; "
            "print(sorted(m for m in sys.modules if m.startswith(('forensics.parsers', 'forensics.ingest', 'forensics.discover'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"

"""The layering, as the imports say it: read with `ast` from every module of the package,
including imports inside functions (loaded late) and under TYPE_CHECKING."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import vramtop
from tests.support.source_trees import tree_of

PACKAGE = Path(vramtop.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
IO_LIBRARIES = ("textual", "rich", "httpx", "psutil", "pynvml", "amdsmi")


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, as dotted names (relative imports resolved)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree_of(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _layer(name: str) -> str | None:
    """`vramtop.sources.nvml` → "sources"; a top-level module → its own name."""
    parts = name.split(".")
    return parts[1] if parts[0] == "vramtop" and len(parts) > 1 else None


def _edges(layer: str) -> dict[str, set[str]]:
    """Each module of `layer` (a sub-package of vramtop), with the vramtop modules it imports."""
    return {
        str(path.relative_to(PACKAGE.parent)): {
            name for name in _imports(path) if name.split(".")[0] == "vramtop"
        }
        for path in sorted((PACKAGE / layer).rglob("*.py"))
    }


def _offences(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {name}"
        for module, names in _edges(layer).items()
        for name in names
        if _layer(name) in forbidden
    )


def test_the_rules_see_the_imports_they_judge() -> None:
    # A rule that reads no import would pass whatever the code did.
    assert "vramtop.core.model" in _imports(PACKAGE / "core" / "counter_window.py")
    assert _offences("tui", ("core",)), "the console imports the core: the reader must see it"


def test_core_imports_nothing_of_vramtop_but_core_and_no_io_library() -> None:
    offences = [
        f"{module} imports {name}"
        for module, names in _edges("core").items()
        for name in names
        if _layer(name) != "core"
    ]
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        offences += [
            f"{path.relative_to(PACKAGE.parent)} imports {name}"
            for name in _imports(path)
            if name.split(".")[0] in IO_LIBRARIES
        ]
    assert offences == []


def test_sources_and_the_supervisor_never_import_the_console() -> None:
    assert _offences("sources", ("tui",)) == []
    assert _offences("supervisor", ("tui",)) == []


def test_the_supervisor_never_imports_the_command_line() -> None:
    assert _offences("supervisor", ("cli", "commands")) == []


def test_the_simulator_never_imports_the_console_or_the_supervisor() -> None:
    assert _offences("sim", ("tui", "supervisor")) == []


def test_sources_and_the_simulator_do_not_import_each_other_both_ways() -> None:
    sources_to_sim = _offences("sources", ("sim",))
    sim_to_sources = _offences("sim", ("sources",))
    assert not (sources_to_sim and sim_to_sources), (sources_to_sim, sim_to_sources)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's contracts of pyproject.toml in `root`, over the `vramtop` package there
    (the command runs in `root`, so that package is the one it finds first)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())",
            "--no-cache",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_hold() -> None:
    # The whole stack, top to bottom (pyproject.toml's [tool.importlinter]).
    run = _lint_imports(PYPROJECT.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_a_machine_that_imports_a_command_breaks_the_contracts(tmp_path: Path) -> None:
    # A contract that nothing can break would pass whatever the code did.
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    shutil.copytree(PACKAGE, tmp_path / "vramtop", ignore=shutil.ignore_patterns("__pycache__"))
    planted = tmp_path / "vramtop" / "machines" / "planted.py"
    planted.write_text("from vramtop.commands.errors import CommandError\n", encoding="utf-8")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "The machines never import the commands or the command line BROKEN" in run.stdout
    assert "vramtop.machines.planted -> vramtop.commands.errors" in run.stdout

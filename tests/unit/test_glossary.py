"""The glossary (docs/glossary.md) names what exists: a rename that forgets it fails here.

Each entry's lines name the idea in each place; every name listed is looked up where it is
said to be: a code name among the package's definitions (a module or folder by its path, a
class, `Class.member`, a function, a constant, a field, an argument), a JSON key or value,
metric or CLI flag in the Contracts of docs/reference.md (metrics: also among those the
exporter serves and in the docs, flags: also among the package's strings), a UI word among the
package's strings. An `old` name of an `old` → `new` pair must still be in the code: once it is
renamed, the entry's Code line is where `new` belongs.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from tests.support.source_trees import tree_of
from vramtop.core.findings import Kind
from vramtop.core.metric_list import METRICS

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"
PACKAGE = ROOT / "vramtop"
PLACES = ("Code", "UI", "JSON", "Metrics", "CLI", "Old")
TICKED = re.compile(r"`([^`]+)`")
QUOTED = re.compile(r"\"([^\"]+)\"")
RENAMED = re.compile(r"`([^`]+)`\s*→\s*`([^`]+)`")


@dataclass
class Entry:
    word: str
    lines: dict[str, str] = field(default_factory=dict)

    def ticked(self, place: str) -> list[str]:
        return TICKED.findall(self.lines.get(place, ""))


def entries() -> list[Entry]:
    out: list[Entry] = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            out.append(Entry(line[4:].strip()))
            continue
        m = re.match(r"- (\w+): (.*)", line)
        if m and out and m.group(1) in PLACES:
            out[-1].lines[m.group(1)] = m.group(2)
    return out


class Definitions:
    """What the package defines, by name, and each class's members."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.members: dict[str, set[str]] = defaultdict(set)
        self.strings: list[str] = []
        for path in PACKAGE.rglob("*.py"):
            tree = tree_of(path)
            for node in ast.walk(tree):
                self._add(node)

    def _add(self, node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef):
            self.names.add(node.name)
            self.members[node.name].update(_members(node))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.names.add(node.name)
        elif isinstance(node, ast.arg):
            self.names.add(node.arg)
        elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store):
            self.names.add(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            self.names.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.strings.append(node.value)

    def has(self, name: str) -> bool:
        if "/" in name:
            return (ROOT / name.rstrip("/")).exists()
        owner, _, member = name.partition(".")
        if member:
            return member in self.members.get(owner, set())
        return name in self.names

    def says(self, words: str) -> bool:
        """Whether some string of the package holds `words` (any case, whole words)."""
        pattern = re.compile(rf"(?<!\w){re.escape(words)}(?!\w)", re.IGNORECASE)
        return any(pattern.search(s) for s in self.strings)


def _members(node: ast.ClassDef) -> Iterator[str]:
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            yield item.name
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            yield item.target.id
        elif isinstance(item, ast.Assign):
            yield from (t.id for t in item.targets if isinstance(t, ast.Name))


@cache
def definitions() -> Definitions:
    return Definitions()


@cache
def documented() -> str:
    """The documentation: the README and every page of docs/."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages if page != GLOSSARY)


def contracts() -> str:
    """The Contracts section (docs/reference.md): what other tools rely on."""
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    start = text.index("\n## Contracts")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _word_in(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


GLOSSED = entries()
IDS = [e.word for e in GLOSSED]


def test_the_glossary_has_one_entry_per_word_and_each_says_where_it_lives() -> None:
    assert len(GLOSSED) >= 30
    assert len(set(IDS)) == len(IDS), "a word has two entries"
    for entry in GLOSSED:
        assert set(entry.lines) - {"Old"}, f"{entry.word}: no place names it"


@pytest.mark.parametrize("entry", GLOSSED, ids=IDS)
def test_each_code_name_exists_in_the_package(entry: Entry) -> None:
    missing = [n for n in entry.ticked("Code") if not definitions().has(n)]
    assert not missing, f"{entry.word}: not in vramtop/ (renamed? say so in the glossary)"


@pytest.mark.parametrize("entry", GLOSSED, ids=IDS)
def test_a_rename_still_to_do_names_what_is_there(entry: Entry) -> None:
    old = entry.lines.get("Old", "")
    for before, after in RENAMED.findall(old):
        assert definitions().has(before), (
            f"{entry.word}: `{before}` is gone: if it became `{after}`, move `{after}` to "
            "the Code line and drop the pair from Old"
        )
    lone = set(TICKED.findall(RENAMED.sub("", old)))
    assert all(definitions().has(n) for n in lone), f"{entry.word}: {lone}"
    code = set(entry.ticked("Code"))
    assert not code & {b for b, _ in RENAMED.findall(old)}, f"{entry.word}: old and new"


@pytest.mark.parametrize("entry", GLOSSED, ids=IDS)
def test_each_json_name_is_a_contract_the_package_writes(entry: Entry) -> None:
    for key in entry.ticked("JSON"):
        assert _word_in(key, contracts()), f"{entry.word}: {key} not in the Contracts"
        assert definitions().has(key) or any(_word_in(key, s) for s in definitions().strings), (
            f"{entry.word}: {key} is written nowhere in vramtop/"
        )


@pytest.mark.parametrize("entry", GLOSSED, ids=IDS)
def test_each_metric_is_served_and_documented(entry: Entry) -> None:
    served = {m.name for m in METRICS} | {
        s for s in definitions().strings if s.startswith("vramtop_")
    }
    for metric in entry.ticked("Metrics"):
        assert metric in served, f"{entry.word}: the exporter serves no {metric}"
        assert _word_in(metric, documented()), f"{entry.word}: {metric} is not in the docs"


@pytest.mark.parametrize("entry", GLOSSED, ids=IDS)
def test_each_flag_and_command_is_one_users_type(entry: Entry) -> None:
    for flag in entry.ticked("CLI"):
        assert _word_in(flag, documented()), f"{entry.word}: {flag} is not in the docs"
        assert flag in definitions().strings, f"{entry.word}: the CLI takes no {flag}"


@pytest.mark.parametrize("entry", GLOSSED, ids=IDS)
def test_each_ui_word_is_one_the_package_shows(entry: Entry) -> None:
    words = QUOTED.findall(entry.lines.get("UI", ""))
    missing = [w for w in words if not definitions().says(w)]
    assert not missing, f"{entry.word}: no string of vramtop/ says {missing}"


def test_every_finding_kind_has_its_word() -> None:
    """Finding kinds are a contract's closed vocabulary: each is named by an entry."""
    glossed = {key for entry in GLOSSED for key in entry.ticked("JSON")}
    assert {kind.value for kind in Kind} <= glossed

"""The documentation: nothing of the README it replaced is lost, every page is in the site's
navigation, every relative link leads to a file, and every command and key has its page."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
import yaml

from vramtop import cli
from vramtop.commands.catalog import BY_NAME, COMMANDS, CONSOLE_PAGE
from vramtop.core.keymap import ACTIONS
from vramtop.tui.keys import KEY_DISPLAY

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# The README's section titles (## and ###) before its facts moved into docs/: each is still a
# page's heading, so a reader who knew the old section finds it.
FORMER_README_SECTIONS = (
    "What it is for",
    "Usage",
    "The console",
    "Headless commands",
    "Notifications and the lasting timeline",
    "The guard",
    "Files",
    "The machines",
    "The normal rate",
    "On WSL2",
    "The simulated machine",
    "The front door",
    "More than one box: Prometheus and Grafana",
    "Contracts",
    "Development",
    "Architecture",
    "License",
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def headings() -> list[str]:
    found = []
    for page in pages():
        fenced = False
        for line in page.read_text(encoding="utf-8").splitlines():
            fenced ^= line.startswith("```")
            if not fenced and line.startswith("#"):
                found.append(line.lstrip("#").strip())
    return found


def nav_pages(entries: object) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return []


def mkdocs() -> dict[str, object]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(config, dict)
    return config


@pytest.mark.parametrize("title", FORMER_README_SECTIONS)
def test_each_former_readme_section_is_a_heading_in_the_docs(title: str) -> None:
    assert any(title in heading for heading in headings()), f"no page has a heading {title!r}"


def test_every_page_is_in_the_navigation_and_the_site_is_strict() -> None:
    config = mkdocs()
    assert config["strict"] is True
    listed = nav_pages(config["nav"])
    on_disk = [str(page.relative_to(DOCS)) for page in pages()]
    assert sorted(on_disk) == sorted(listed), "a page is missing from mkdocs.yml's nav"
    assert len(set(listed)) == len(listed)


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for match in LINK.finditer(text):
        target = (match.group(1) or match.group(2)).split("#")[0]
        if not target or re.match(r"[a-z]+:", target):
            continue  # an anchor in the page itself, or an address (https:, mailto:)
        if not (page.parent / target).is_file():
            broken.append(target)
    assert broken == []


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_each_command_has_a_docs_page_that_exists() -> None:
    assert set(BY_NAME) == set(subcommands()), "a command missing from the catalog"
    for page in {*(c.docs_page for c in COMMANDS), CONSOLE_PAGE}:
        assert (ROOT / page).is_file(), page


@pytest.mark.parametrize("command", sorted(BY_NAME))
def test_each_commands_help_ends_with_its_page_which_covers_it(command: str) -> None:
    page = BY_NAME[command].docs_page
    assert subcommands()[command].format_help().rstrip().endswith(f"Docs: {page}")
    text = (ROOT / page).read_text(encoding="utf-8")
    assert re.search(rf"`(vramtop )?{re.escape(command)}\b", text), f"{page} says nothing of it"


def test_the_consoles_help_ends_with_the_consoles_page() -> None:
    assert cli.build_parser().format_help().rstrip().endswith(f"Docs: {CONSOLE_PAGE}")


@pytest.mark.parametrize("binding", [a[0] for a in ACTIONS])
def test_each_key_of_the_console_is_in_its_key_table(binding: str) -> None:
    key = next(a[1] for a in ACTIONS if a[0] == binding)
    shown = KEY_DISPLAY.get(key, key)
    console = (DOCS / "console.md").read_text(encoding="utf-8")
    table = console[console.index("## Keys\n\n") :].split("\n\n")[1]
    assert f"`{shown}`" in table, f"{binding} ({shown}) is not in the console's key table"
    assert f"`{binding}`" in (DOCS / "files.md").read_text(encoding="utf-8"), (
        f"{binding}: the name [keys] remaps it by is not in the settings"
    )


def test_the_readmes_answer_for_3_gib_is_what_calc_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's calc line for "which budget leaves 3 GiB for a call", run as written on
    the field report's startup log, prints the budget the console's page states (0.89)."""
    (command,) = re.findall(r"`(vramtop calc [^`]*--for-headroom-gib 3)`", README.read_text())
    log = ROOT / "tests" / "fixtures" / "vllm-gpu-written" / "startup.log"
    (tmp_path / "startup.log").write_text(log.read_text())
    monkeypatch.chdir(tmp_path)
    assert cli.main(shlex.split(command)[1:]) == 0
    assert "largest budget leaving 3.0 GiB to the desktop: 0.89" in capsys.readouterr().out
    console = " ".join((DOCS / "console.md").read_text(encoding="utf-8").split())
    assert "1.73 GiB and 0.89 as the budget that leaves 3 GiB" in console

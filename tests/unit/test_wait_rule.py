"""Tests wait for a condition or an event with a deadline, never for a fixed time, and never
assert how long something took: read with `ast` from every module under tests/.

A fixed sleep is a guess at how long something takes: too short on a loaded machine (the
test fails for no defect), too long on a quiet one (the suite pays it every run). The one
polling sleep lives in `tests.support.waiting`; every other `time.sleep` (or `asyncio.sleep`
of more than nothing) in a test module is either a wait, which the rule refuses, or the
subject of the test (a fake server that must hang, a simulated slow source), which says so
with a `# not a wait: <why>` comment on its line or the line above. Fake executables without
a `.py` name (tests/fixtures) are programs under test, not tests, and are not read.

A duration measured in real time (`time.monotonic()`, `time.time()`, `perf_counter()`) and
then asserted is the same guess turned around; the few asserts that must read the clock carry
`# wall clock: <why>`.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.support.source_trees import parsed

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "support" / "waiting.py"
NOT_A_WAIT = re.compile(r"#\s*not a wait:\s*\S")
WALL_CLOCK = re.compile(r"#\s*wall clock:\s*\S")
CLOCKS = {"monotonic", "monotonic_ns", "time", "time_ns", "perf_counter", "perf_counter_ns"}


def _marked(lines: list[str], node: ast.AST, mark: re.Pattern[str]) -> bool:
    """`mark` on one of `node`'s lines, or on the comment lines just above it."""
    first, last = node.lineno, node.end_lineno or node.lineno
    if any(mark.search(line) for line in lines[first - 1 : last]):
        return True
    above = first - 2
    while above >= 0 and lines[above].lstrip().startswith("#"):
        if mark.search(lines[above]):
            return True
        above -= 1
    return False


def _sleep_names(tree: ast.Module) -> set[str]:
    """Bare names that mean `time.sleep` here (`from time import sleep [as nap]`)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "time"
        for alias in node.names
        if alias.name == "sleep"
    }


def _is_sleep(call: ast.Call, bare: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in bare
    if not (isinstance(func, ast.Attribute) and func.attr == "sleep"):
        return False
    if not isinstance(func.value, ast.Name) or func.value.id not in {"time", "asyncio"}:
        return False
    if func.value.id == "asyncio":
        # `asyncio.sleep(0)` hands the loop a turn; it waits for no time.
        first = call.args[0] if call.args else None
        return not (isinstance(first, ast.Constant) and first.value == 0)
    return True


def _is_event(node: ast.AST) -> bool:
    """`threading.Event()` or `Event()`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "Event") or (
        isinstance(func, ast.Attribute) and func.attr == "Event"
    )


def _never_set(tree: ast.Module) -> set[str]:
    """Names bound to a new Event that nothing in the module ever sets."""
    bound = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_event(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    set_ = {
        node.func.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "set"
        and isinstance(node.func.value, ast.Name)
    }
    return bound - set_


def _is_idle_wait(call: ast.Call, never_set: set[str]) -> bool:
    """A sleep in disguise: `wait` on an Event no one sets (a new one, or one never set)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "wait"):
        return False
    owner = func.value
    return _is_event(owner) or (isinstance(owner, ast.Name) and owner.id in never_set)


def _walk_with_loops(node: ast.AST, in_loop: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node under `node`, with whether a loop of the same function encloses it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield child, in_loop
            yield from _walk_with_loops(child, False)
        else:
            yield child, in_loop
            looped = in_loop or isinstance(child, ast.While | ast.For | ast.AsyncFor)
            yield from _walk_with_loops(child, looped)


def sleep_offences(source: str, name: str) -> list[str]:
    """Each unmarked sleep in `source` (a module called `name`), with why it is refused."""
    tree = parsed(source)
    lines = source.splitlines()
    bare = _sleep_names(tree)
    never_set = _never_set(tree)
    found = []
    for node, in_loop in _walk_with_loops(tree):
        if not isinstance(node, ast.Call):
            continue
        if not (_is_sleep(node, bare) or _is_idle_wait(node, never_set)):
            continue
        if _marked(lines, node, NOT_A_WAIT):
            continue
        what = "a sleep in a loop (a hand-rolled wait)" if in_loop else "a fixed sleep"
        found.append(f"{name}:{node.lineno}: {what}")
    return found


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in {"monotonic", "perf_counter"}


def _reads_clock(node: ast.AST, names: set[str]) -> bool:
    return any(
        _is_clock_call(sub) or (isinstance(sub, ast.Name) and sub.id in names)
        for sub in ast.walk(node)
    )


def _bound_to(scope: ast.AST, binds: Callable[[ast.expr, set[str]], bool]) -> set[str]:
    """Names in `scope` assigned a value that `binds` (given the names found so far)."""
    names: set[str] = set()
    while True:
        more = {
            target.id
            for node in ast.walk(scope)
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and node.value is not None
            and binds(node.value, names)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        if more <= names:
            return names
        names |= more


def _durations(node: ast.AST, clocks: set[str], spans: set[str]) -> bool:
    """`node` holds a time span measured on the clock: a clock reading less another moment,
    or a name bound to one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in spans:
            return True
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub):
            sides = (sub.left, sub.right)
            read = [side for side in sides if _reads_clock(side, clocks)]
            # A clock reading less another moment (a reading, or a time kept by the code).
            if read and not any(isinstance(side, ast.Constant) for side in sides):
                return True
    return False


def _span_of(value: ast.expr, spans: set[str], clocks: set[str]) -> bool:
    return _durations(value, clocks, spans)


def duration_offences(source: str, name: str) -> list[str]:
    """Each unmarked assert in `source` that compares a time measured with the wall clock."""
    tree = parsed(source)
    if not any(_is_clock_call(node) for node in ast.walk(tree)):
        return []  # nothing reads the clock: no duration to find, and no scope to walk for one
    lines = source.splitlines()
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in scopes:
        clocks = _bound_to(scope, lambda value, _: _reads_clock(value, set()))
        spans = _bound_to(scope, functools.partial(_span_of, clocks=clocks))
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assert) or _marked(lines, node, WALL_CLOCK):
                continue
            compares = [c for c in ast.walk(node.test) if isinstance(c, ast.Compare)]
            if any(_durations(c, clocks, spans) for c in compares):
                found.append(f"{name}:{node.lineno}: asserts a duration measured in real time")
    return sorted(set(found))


def _modules() -> Iterator[tuple[Path, str]]:
    for path in sorted(TESTS.rglob("*.py")):
        if path != HELPER:
            yield path, path.relative_to(TESTS.parent).as_posix()


@functools.cache
def _offences() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path, name in _modules():
        source = path.read_text(encoding="utf-8")
        hits = sleep_offences(source, name) + duration_offences(source, name)
        if hits:
            found[name] = hits
    return found


def test_no_test_waits_with_a_fixed_sleep_or_asserts_a_duration() -> None:
    found = [hit for hits in _offences().values() for hit in hits]
    assert not found, (
        "wait with tests.support.waiting (wait_until, wait_event, stays), never a fixed sleep;"
        " never assert a wall-clock duration (mark a sleep that is the test's subject"
        " `# not a wait: <why>`, a clock that must be read `# wall clock: <why>`):\n"
        + "\n".join(found)
    )


def test_the_rule_sees_a_planted_wait_loop(tmp_path: Path) -> None:
    planted = (
        "import time\ndef test_x(proc):\n    while proc.poll() is None:\n        time.sleep(0.1)\n"
    )
    assert sleep_offences(planted, "t.py") == ["t.py:4: a sleep in a loop (a hand-rolled wait)"]
    aliased = "from time import sleep as nap\ndef f():\n    for _ in range(9):\n        nap(1)\n"
    assert sleep_offences(aliased, "t.py") == ["t.py:4: a sleep in a loop (a hand-rolled wait)"]
    fixed = "import time\ndef test_x():\n    time.sleep(0.3)  # (time for it to settle)\n"
    assert sleep_offences(fixed, "t.py") == ["t.py:3: a fixed sleep"]
    in_async = "import asyncio\nasync def t():\n    while True:\n        await asyncio.sleep(0.1)\n"
    assert sleep_offences(in_async, "t.py") == ["t.py:4: a sleep in a loop (a hand-rolled wait)"]
    # Sleeps in disguise: waiting on an Event that nothing sets.
    disguised = (
        "import threading\n"
        "def f(done):\n"
        "    tick = threading.Event()\n"
        "    while not done():\n"
        "        tick.wait(0.02)\n"
        "        threading.Event().wait(0.05)\n"
    )
    assert sleep_offences(disguised, "t.py") == [
        "t.py:5: a sleep in a loop (a hand-rolled wait)",
        "t.py:6: a sleep in a loop (a hand-rolled wait)",
    ]
    awaited = (
        "import threading\n"
        "stop = threading.Event()\n"
        "def f():\n"
        "    while not stop.wait(1):\n"
        "        pass\n"
        "def g():\n"
        "    stop.set()\n"
    )
    assert sleep_offences(awaited, "t.py") == []


def test_the_rule_lets_a_deliberate_sleep_pass() -> None:
    subject = (
        "import asyncio, time\n"
        "def hang():\n"
        "    while True:\n"
        "        time.sleep(60)  # not a wait: the fake server hangs\n"
        "def slow():\n"
        "    # not a wait: a slow source, read by the test\n"
        "    time.sleep(1)\n"
        "async def turn():\n"
        "    await asyncio.sleep(0)\n"
        "CODE = 'import time; time.sleep(600)'\n"
    )
    assert sleep_offences(subject, "t.py") == []
    unexplained = "import time\ndef f():\n    time.sleep(1)  # not a wait:\n"
    assert sleep_offences(unexplained, "t.py") == ["t.py:3: a fixed sleep"]


def test_the_rule_sees_an_asserted_duration() -> None:
    timed = (
        "import time\n"
        "def test_fast():\n"
        "    started = time.monotonic()\n"
        "    work()\n"
        "    elapsed = time.monotonic() - started\n"
        "    assert elapsed < 2.0\n"
        "def test_inline():\n"
        "    t0 = time.perf_counter()\n"
        "    work()\n"
        "    assert time.perf_counter() - t0 < 1\n"
    )
    assert duration_offences(timed, "t.py") == [
        "t.py:10: asserts a duration measured in real time",
        "t.py:6: asserts a duration measured in real time",
    ]
    allowed = (
        "import time\n"
        "def test_deadline():\n"
        "    deadline = time.monotonic() + 5\n"
        "    assert time.monotonic() < deadline, 'never came'\n"
        "def test_stamp():\n"
        "    before = time.time()\n"
        "    stamp = write()\n"
        "    assert before <= stamp  # wall clock: the file's stamp is the wall time\n"
        "def test_offset():\n"
        "    now = time.time()\n"
        "    write(now - 3600)\n"
        "    assert read() == now - 3600\n"
    )
    assert duration_offences(allowed, "t.py") == []

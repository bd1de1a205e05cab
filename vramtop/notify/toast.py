"""A Windows toast from WSL2: `powershell.exe` with WinRT's toast API, no module to install.

The script goes on stdin (`-Command -`), one statement a line; the toast's XML is a
single-quoted PowerShell string, so nothing in it is run: the title and body are XML-escaped,
and every character outside printable ASCII is written as an XML character reference (a
typographic quote would otherwise end PowerShell's string, and stdin's code page is not
UTF-8). `scenario="urgent"` asks Windows to show it during a call where the person allows
important notifications; it goes out under PowerShell's own app id, which every Windows has.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from vramtop.core.news import News
from vramtop.notify.sending import SendFailed, said
from vramtop.programs import WINDOWS_DRIVE, TimedOut, run_program, windows_cwd

APP_ID = r"{1AC14E77-02E7-4E5D-B744-2EB1AE5198B7}\WindowsPowerShell\v1.0\powershell.exe"
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
DEFAULT_POWERSHELL = "/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe"
# PowerShell from WSL takes about half a second to start from a Windows directory (up to ten
# from the Linux file system); the Notifier's other senders do not wait for it.
TOAST_TIMEOUT_S = 30.0
_WINRT = "ContentType = WindowsRuntime"


def xml_text(text: str) -> str:
    """`text` as XML character data safe inside a single-quoted PowerShell string: markup
    escaped, control characters dropped, everything outside printable ASCII as `&#N;`."""
    out: list[str] = []
    for char in " ".join(text.split()):
        code = ord(char)
        if char == "&":
            out.append("&amp;")
        elif char == "<":
            out.append("&lt;")
        elif char == ">":
            out.append("&gt;")
        elif char == '"':
            out.append("&quot;")
        elif char == "'":
            out.append("&apos;")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or 0xD800 <= code < 0xE000:
            continue  # not allowed in XML 1.0, or a lone surrogate
        elif code > 0x7E:
            out.append(f"&#{code};")
        else:
            out.append(char)
    return "".join(out)


def toast_xml(news: News) -> str:
    return (
        '<toast scenario="urgent"><visual><binding template="ToastGeneric">'
        f"<text>{xml_text(news.title)}</text><text>{xml_text(news.body)}</text>"
        "</binding></visual></toast>"
    )


def toast_script(news: News, app_id: str = APP_ID) -> str:
    """The PowerShell script (pure ASCII, one statement a line) that shows `news`."""
    return "\r\n".join(
        [
            "$ErrorActionPreference = 'Stop'",
            f"[Windows.UI.Notifications.ToastNotificationManager, Windows.UI.Notifications, "
            f"{_WINRT}] | Out-Null",
            f"[Windows.Data.Xml.Dom.XmlDocument, Windows.Data.Xml.Dom.XmlDocument, {_WINRT}]"
            " | Out-Null",
            "$xml = New-Object Windows.Data.Xml.Dom.XmlDocument",
            f"$xml.LoadXml('{toast_xml(news)}')",
            "$toast = [Windows.UI.Notifications.ToastNotification]::new($xml)",
            "[Windows.UI.Notifications.ToastNotificationManager]::CreateToastNotifier("
            f"'{app_id.replace(chr(39), chr(39) * 2)}').Show($toast)",
            "exit 0",
            "",
        ]
    )


def interop_problem(binfmt_dir: Path = BINFMT_DIR) -> str | None:
    """Why Windows programs cannot run from here, or None when they may: WSL registers a
    binfmt_misc handler `WSLInterop` (`WSLInterop-late` on newer releases), which reads
    `disabled` when interop is switched off and is gone when wsl.conf turns it off."""
    try:
        entries = {p.name: p for p in binfmt_dir.iterdir()}
    except OSError:
        return None  # binfmt_misc not mounted: no evidence either way, so try
    if "register" not in entries:
        return None
    handlers = [p for name, p in entries.items() if name.startswith("WSLInterop")]
    if not handlers:
        return "WSL interop is off (no WSLInterop handler): enable [interop] in /etc/wsl.conf"
    for handler in handlers:
        try:
            if handler.read_text(errors="replace").splitlines()[:1] != ["disabled"]:
                return None
        except (OSError, IndexError):
            return None
    return "WSL interop is disabled: echo 1 into its binfmt_misc entry, or restart WSL"


def in_wsl(proc_version: Path = Path("/proc/version")) -> bool:
    """Inside WSL (its kernel names Microsoft): only there is interop's state worth asking."""
    if os.environ.get("WSL_DISTRO_NAME") or "microsoft" in platform.release().lower():
        return True
    try:
        return "microsoft" in proc_version.read_text(errors="replace").lower()
    except OSError:
        return False


class ToastSender:
    """Shows each news as a Windows toast. `powershell`: the executable (default: the one on
    PATH, else Windows' usual place as WSL mounts it). Interop is checked first inside WSL
    (`check_interop`, by default); elsewhere a `powershell.exe` on the PATH is simply run.
    It runs from `windows_drive` when that is a directory (PowerShell starts in a fraction
    of the time it takes from the Linux file system), else from where vramtop runs."""

    name = "toast"

    def __init__(
        self,
        *,
        powershell: str | None = None,
        binfmt_dir: Path = BINFMT_DIR,
        timeout_s: float = TOAST_TIMEOUT_S,
        check_interop: bool | None = None,
        windows_drive: Path = WINDOWS_DRIVE,
    ) -> None:
        self._powershell = powershell
        self._windows_drive = windows_drive
        self._binfmt_dir = binfmt_dir
        self._check_interop = in_wsl() if check_interop is None else check_interop
        self._timeout_s = timeout_s

    def _executable(self) -> str:
        found = self._powershell or shutil.which("powershell.exe")
        if found is None and Path(DEFAULT_POWERSHELL).is_file():
            found = DEFAULT_POWERSHELL
        if found is None:
            raise SendFailed("powershell.exe is not on the PATH (is this WSL2 with interop on?)")
        return found

    def send(self, news: News) -> None:
        problem = interop_problem(self._binfmt_dir) if self._check_interop else None
        if problem is not None:
            raise SendFailed(problem)
        argv = [self._executable(), "-NoProfile", "-NonInteractive", "-Command", "-"]
        try:
            done = run_program(
                argv,
                stdin=toast_script(news).encode("ascii"),
                timeout_s=self._timeout_s,
                cwd=windows_cwd(self._windows_drive),
            )
        except TimedOut as exc:
            raise SendFailed(f"powershell.exe {exc}") from None
        except OSError as exc:
            raise SendFailed(f"powershell.exe could not run: {exc}") from None
        if done.returncode != 0:
            raise SendFailed(
                f"powershell.exe exited with code {done.returncode}: {said(done.stderr)}"
            )

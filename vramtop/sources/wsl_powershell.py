"""PowerShell run from WSL2 for Windows' GPU counters: the loop it runs, its command line,
whether it can run here at all, and why it stopped, in words. The process itself is kept
and read by `windows_counters`.

How the script is passed: `-EncodedCommand` (base64 of UTF-16LE). `-Command -` (script on
stdin) runs each stdin line as it arrives, and Windows PowerShell 5.1 mishandles multi-line
blocks that way (a loop's body needs a trailing blank line, errors are reported per line);
quoting a multi-line script through WSL's argument translation is fragile too. A base64
argument survives both untouched and is far below Windows' 32,767-character command line.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

# "about_Execution_Policies", "execution policy", "ExecutionPolicy", "is not digitally signed".
_POLICY = re.compile(r"execution[ _]?polic|not digitally signed", re.IGNORECASE)
DEFAULT_POWERSHELL = "/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe"
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")

# The loop PowerShell runs. Shapes and why:
# - Select-Object turns each CimInstance into a plain object: ConvertTo-Json of a raw
#   CimInstance drags in CimClass/CimInstanceProperties and is huge.
# - @(...) keeps a one-instance answer an array (ConvertTo-Json writes a lone object
#   otherwise; the parser accepts both). -Depth 4 keeps the rows' fields from being
#   stringified. Counter values are uint64 and come out as JSON integers.
# - Hashtable keys are strings: Windows PowerShell 5.1's ConvertTo-Json rejects int keys.
# - try/catch around the queries: a missing class on an old build ("Invalid class") or a CIM
#   error becomes an {"error": ...} line and the loop keeps going.
# - A failed write means vramtop is gone: exit instead of looping on Windows forever.
SCRIPT = r"""
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
try { [Console]::OutputEncoding = [Text.Encoding]::UTF8 } catch { }
$IntervalMs = __INTERVAL_MS__
$ProcClass = 'Win32_PerfFormattedData_GPUPerformanceCounters_GPUProcessMemory'
$AdapterClass = 'Win32_PerfFormattedData_GPUPerformanceCounters_GPUAdapterMemory'
function Emit($obj) {
  try {
    [Console]::Out.WriteLine(($obj | ConvertTo-Json -Compress -Depth 4))
    [Console]::Out.Flush()
  } catch { exit 0 }
}
while ($true) {
  try {
    $procs = @(Get-CimInstance -ClassName $ProcClass -ErrorAction Stop |
      Where-Object { $_.DedicatedUsage -gt 0 -or $_.SharedUsage -gt 0 } |
      Select-Object Name, DedicatedUsage, SharedUsage, LocalUsage, NonLocalUsage, TotalCommitted)
    $adapters = @(Get-CimInstance -ClassName $AdapterClass -ErrorAction Stop |
      Select-Object Name, DedicatedUsage, SharedUsage, TotalCommitted)
    $ids = @($procs | ForEach-Object { if ($_.Name -match '^pid_(\d+)_') { [int]$Matches[1] } } |
      Sort-Object -Unique)
    $names = @{}
    if ($ids.Count -gt 0) {
      foreach ($p in @(Get-Process -Id $ids -ErrorAction SilentlyContinue)) {
        $names["$($p.Id)"] = $p.ProcessName
      }
    }
    Emit @{ v = 1; processes = $procs; adapters = $adapters; names = $names }
  } catch {
    Emit @{ v = 1; error = $_.Exception.Message }
  }
  Start-Sleep -Milliseconds $IntervalMs
}
"""


def build_script(interval_s: float) -> str:
    return SCRIPT.replace("__INTERVAL_MS__", str(max(50, int(interval_s * 1000))))


def encode_command(script: str) -> str:
    """PowerShell's -EncodedCommand form: base64 of the UTF-16LE text."""
    return base64.b64encode(script.encode("utf-16-le")).decode("ascii")


def powershell_argv(executable: str, interval_s: float) -> list[str]:
    return [
        executable,
        "-NoProfile",
        "-NonInteractive",
        "-ExecutionPolicy",
        "Bypass",
        "-EncodedCommand",
        encode_command(build_script(interval_s)),
    ]


def find_powershell(path_env: str | None = None) -> str | None:
    """`powershell.exe` on PATH, else Windows' usual location as WSL mounts it."""
    found = shutil.which("powershell.exe", path=path_env)
    if found:
        return found
    if os.access(DEFAULT_POWERSHELL, os.X_OK):
        return DEFAULT_POWERSHELL
    return None


def interop_problem(binfmt_dir: Path | None = None) -> str | None:
    """Why Windows programs cannot run from this WSL distro, or None when they might.

    WSL registers a binfmt_misc handler named `WSLInterop` (`WSLInterop-late` on newer
    releases) for Windows executables; `[interop] enabled=false` in /etc/wsl.conf removes it.
    When binfmt_misc is not mounted at all we cannot tell, and simply try.
    """
    binfmt_dir = BINFMT_DIR if binfmt_dir is None else binfmt_dir
    if not binfmt_dir.is_dir():
        return None
    try:
        entries = [p.name for p in binfmt_dir.iterdir()]
    except OSError:
        return None
    if not entries or "register" not in entries:
        return None  # not a mounted binfmt_misc: no evidence either way
    if any(name.startswith("WSLInterop") for name in entries):
        return None
    return (
        "WSL interop is disabled, so powershell.exe cannot run "
        "(enable [interop] in /etc/wsl.conf and restart WSL)"
    )


def describe_exit(returncode: int | None, stderr_lines: Sequence[str]) -> str:
    """Why PowerShell stopped, from its exit code and what it wrote on stderr."""
    text = " ".join(line.strip() for line in stderr_lines if line.strip())
    text = _strip_clixml(text)
    low = text.lower()
    if _POLICY.search(text) or "running scripts is disabled" in low:
        return f"PowerShell's execution policy refused the script: {text[:160]}"
    if "exec format error" in low:
        return "WSL interop could not start powershell.exe (Exec format error: interop is off?)"
    detail = f": {text[:160]}" if text else ""
    return f"PowerShell exited with code {returncode}{detail}"


def _strip_clixml(text: str) -> str:
    # Windows PowerShell writes errors as CLIXML when its stderr is redirected: keep the words.
    if "#< CLIXML" not in text:
        return text
    parts = re.findall(r'<S S="Error">(.*?)</S>', text)
    words = "".join(parts) if parts else re.sub(r"<[^>]+>", " ", text)
    return " ".join(words.replace("_x000D__x000A_", " ").split())

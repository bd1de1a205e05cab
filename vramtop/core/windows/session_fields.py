"""A reading in the session format: the optional `windows` field of a sample line, both ways."""

from __future__ import annotations

from collections.abc import Mapping

from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.core.windows.reading import (
    WSL_VM_NAMES,
    WindowsGpuReading,
    WindowsProcessGpu,
    counter_bytes,
    json_list,
    unavailable,
)


def windows_sample_fields(reading: WindowsGpuReading | None) -> JsonObject:
    """The optional `windows` field of a sample line (merge it into the line's dict).

    Unknown → no field at all; a failed source → {"windows": {"error": reason}} so a recording
    says why the numbers are missing.
    """
    if reading is None:
        return {}
    if reading.error is not None:
        return {"windows": {"error": reading.error}}
    body: JsonObject = {
        "wsl_vm_dedicated_bytes": reading.wsl_vm.dedicated_bytes if reading.wsl_vm else None,
        "wsl_vm_shared_bytes": reading.wsl_vm.shared_bytes if reading.wsl_vm else None,
        "desktop": [
            {
                "pid": p.pid,
                "name": p.name,
                "dedicated_bytes": p.dedicated_bytes,
                "shared_bytes": p.shared_bytes,
            }
            for p in reading.desktop
        ],
    }
    if reading.wsl_vm is not None:
        body["wsl_vm_name"] = reading.wsl_vm.name
    return {"windows": body}


def reading_from_sample(line: Mapping[str, JsonValue]) -> WindowsGpuReading | None:
    """A recorded sample line's `windows` field back as a reading (None when absent)."""
    body = line.get("windows")
    raw_t = line.get("t")
    t = float(raw_t) if isinstance(raw_t, int | float | str) and raw_t else 0.0
    if not isinstance(body, dict):
        return None
    if body.get("error"):
        return unavailable(str(body["error"]), t, source="recording")
    vm = None
    if body.get("wsl_vm_dedicated_bytes") is not None:
        vm = WindowsProcessGpu(
            pid=0,
            name=str(body.get("wsl_vm_name") or WSL_VM_NAMES[0]),
            dedicated_bytes=counter_bytes(body.get("wsl_vm_dedicated_bytes")),
            shared_bytes=counter_bytes(body.get("wsl_vm_shared_bytes")),
        )
    desktop = tuple(
        WindowsProcessGpu(
            counter_bytes(d.get("pid")),
            str(d.get("name", "")),
            counter_bytes(d.get("dedicated_bytes")),
            counter_bytes(d.get("shared_bytes")),
        )
        for d in json_list(body.get("desktop"))
        if isinstance(d, dict)
    )
    return WindowsGpuReading(wsl_vm=vm, desktop=desktop, t=t, source="recording")

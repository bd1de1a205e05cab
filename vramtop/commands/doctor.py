"""`vramtop doctor [--json]`: what vramtop can see on this machine, and why not.

Exit 0 when the console can show the split, 3 when it can only derive it, 4 when it cannot
read the GPU at all (1 and 2 keep their meaning: an unexpected error, bad usage).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given, Target
from vramtop.machines.doctor_report import render, run_checks
from vramtop.machines.setup_checks import Facts, wait_for_windows

WINDOWS_WAIT_S = 15.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "doctor",
        help=summary("doctor"),
    )
    from vramtop.commands.shared_options import add_shared_options

    add_shared_options(p, "json", "profile", "url")
    p.add_argument(
        "--no-windows",
        action="store_true",
        default=argparse.SUPPRESS,
        help="WSL2: do not try Windows' GPU counters",
    )


@dataclass(frozen=True)
class DoctorOptions:
    """`vramtop doctor`'s options (see commands/shared_options.py): of the `Target`, the
    profile, the URL, the API key variable and whether Windows' counters are tried."""

    target: Target
    json: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DoctorOptions:
        return cls(target=Target.from_args(args), json=Given(args).flag("json"))


def run(args: argparse.Namespace) -> int:
    options = DoctorOptions.from_args(args)
    facts = gather(options.target)
    code, report = run_checks(facts)
    print(json.dumps(report, indent=2) if options.json else render(report))
    return code


def gather(target: Target) -> Facts:
    from vramtop.settings import ConfigError, load_settings
    from vramtop.sources.amd import AmdProbe, amd_cards
    from vramtop.sources.host import is_wsl
    from vramtop.sources.probes import choose_probe

    config_error = None
    try:
        setting = load_settings().gpu_probe
    except ConfigError as exc:
        config_error, setting = str(exc), "auto"
    probe = choose_probe(setting)
    try:
        reading = probe.read()
    finally:
        probe.close()
    facts = Facts(probe_name=probe.name, reading=reading, wsl=is_wsl(), config_error=config_error)
    facts.amd_cards = len(amd_cards())
    if facts.amd_cards:
        amd = probe if isinstance(probe, AmdProbe) else AmdProbe()
        if amd is not probe:
            amd.read()
            amd.close()
        facts.amdsmi_error, facts.fdinfo_denied = amd.amdsmi_error, amd.denied_pids
    if facts.wsl:
        _windows(facts, windows=target.windows)
        from vramtop.sources.dxg_kmsg import kmsg_problem

        facts.kernel_log_problem = kmsg_problem()  # dxgkrnl's residency failures
    _server(facts, target)
    return facts


def _windows(facts: Facts, *, windows: bool) -> None:
    from vramtop.sources.windows_counters import WindowsGpuSource
    from vramtop.sources.wsl_powershell import find_powershell, interop_problem

    facts.powershell = find_powershell()
    facts.interop_problem = interop_problem()
    if facts.powershell is None or facts.interop_problem is not None:
        return
    if not windows:
        facts.windows_error = "not tried (--no-windows)"
        return
    source = WindowsGpuSource(powershell=facts.powershell)
    try:
        reading = wait_for_windows(source.read, WINDOWS_WAIT_S)
    finally:
        source.close()
    facts.windows_error = reading.error
    facts.windows_vm = reading.wsl_vm.name if reading.wsl_vm is not None else None


def _server(facts: Facts, target: Target) -> None:
    from vramtop import locations
    from vramtop.config import ConfigError
    from vramtop.machines.live_machine import DEFAULT_URL, api_key_from
    from vramtop.profiles import load_default_profile, load_profile
    from vramtop.sources.scraper import Scraper
    from vramtop.supervisor import state

    profile = None
    try:
        name = target.profile
        profile = load_profile(name) if name else load_default_profile()
    except ConfigError as exc:
        facts.profile_error = str(exc)
    if profile is not None:
        facts.profile = profile.name
        facts.log_path = state.log_path(profile.name)
        from vramtop.supervisor.launch import launch_problem

        facts.launch_problem = launch_problem(profile)
        from vramtop.supervisor.step_phases import model_on_slow_place

        facts.model_place = model_on_slow_place(profile.argv, profile.env, profile.cwd)
    facts.url = target.url or (profile.url if profile else DEFAULT_URL)
    scraper = Scraper(facts.url, api_key=api_key_from(profile, target.api_key_env))
    try:
        facts.server = scraper.read_sync()
    finally:
        scraper.close()
    from vramtop.core.secrets import mask_url

    facts.url = mask_url(facts.url)  # shown from here on: a password in it is not
    paths = [locations.config_dir(), locations.state_dir(), locations.log_dir()]
    paths += [p for p in (locations.settings_file(), locations.own_log_file()) if p.exists()]
    facts.private_paths = paths

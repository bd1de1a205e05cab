"""`vramtop export`: serve what vramtop derives as Prometheus metrics, headless.

Samples the profile's server (or `--url`, or the simulated machine with `--demo`) as the
console does, in the background, and serves the latest sample on `--listen` (loopback by
default). `--print-rules` and `--print-dashboard` print the bundled alert rules and Grafana
dashboard.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
import threading
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from vramtop.commands.argtypes import interval_seconds
from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target, add_shared_options
from vramtop.core.addresses import parse_host_port
from vramtop.core.secrets import mask_url
from vramtop.outcomes import ExitCode
from vramtop.sim.card import CARDS

if TYPE_CHECKING:
    from vramtop.machines.machine_backend import MachineBackend

DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_INTERVAL_S = 1.0
RULES_FILE = "vramtop-rules.yml"
DASHBOARD_FILE = "vramtop-dashboard.json"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "export",
        help=summary("export"),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve /metrics (default {DEFAULT_LISTEN}; an address beyond loopback "
        "is served but warned about)",
    )
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=argparse.SUPPRESS,
        help=f"seconds between samples (default {DEFAULT_INTERVAL_S})",
    )
    parser.add_argument(
        "--print-rules", action="store_true", help="print the Prometheus alert rules and exit"
    )
    parser.add_argument(
        "--print-dashboard", action="store_true", help="print the Grafana dashboard and exit"
    )
    parser.add_argument(
        "--card",
        choices=tuple(CARDS),
        default=argparse.SUPPRESS,
        help="with --demo: which machine to simulate (see vramtop --help)",
    )
    add_shared_options(parser, "demo", "wsl", "url", "profile")


def asset_text(name: str) -> str:
    """A file bundled with the exporter (the rules, the dashboard)."""
    return (resources.files("vramtop.export") / name).read_text(encoding="utf-8")


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT` or a bare `PORT` (loopback). ValueError with the reason."""
    try:
        return parse_host_port(value, bare_port_host="127.0.0.1", lowest_port=0)
    except ValueError as exc:
        raise ValueError(f"--listen {exc} (0.0.0.0:9464 serves every interface)") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, it may be reachable from outside


def exposure_warning(host: str) -> str | None:
    if is_loopback(host):
        return None
    where = "every network interface" if host in ("0.0.0.0", "::") else host
    return (
        f"warning: the metrics are served on {where}: anyone who can reach this machine can "
        "read them (model, budget, findings). Fix: allow the port only from the Prometheus "
        "host in your firewall, or keep --listen on 127.0.0.1 and let Prometheus reach it "
        "through an SSH tunnel."
    )


@dataclass(frozen=True)
class ExportOptions:
    """`vramtop export`'s options (see commands/shared_options.py)."""

    target: Target
    listen: str = DEFAULT_LISTEN
    interval: float = DEFAULT_INTERVAL_S
    print_rules: bool = False
    print_dashboard: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExportOptions:
        given = Given(args)
        interval, listen = given.number("interval"), given.text("listen")
        return cls(
            target=Target.from_args(args),
            listen=DEFAULT_LISTEN if listen is None else listen,
            interval=DEFAULT_INTERVAL_S if interval is None else interval,
            print_rules=given.flag("print_rules"),
            print_dashboard=given.flag("print_dashboard"),
        )


def run(args: argparse.Namespace) -> int:
    options = ExportOptions.from_args(args)
    if options.print_rules or options.print_dashboard:
        if options.print_rules:
            sys.stdout.write(asset_text(RULES_FILE))
        if options.print_dashboard:
            sys.stdout.write(asset_text(DASHBOARD_FILE))
        return 0
    interval, target = options.interval, options.target
    if interval <= 0:
        return _usage("--interval must be a positive number of seconds.")
    if target.wsl and not target.demo:
        return _usage("--wsl only applies with --demo.")
    url = target.url
    if url and not url.startswith(("http://", "https://")):
        return _usage(f"--url {mask_url(url)!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
    try:
        host, port = parse_listen(options.listen)
    except ValueError as exc:
        return _usage(str(exc))
    from vramtop.commands.common import backend_for

    try:
        backend, owned = backend_for(target)
    except CommandError as exc:
        return _usage(str(exc))
    try:
        backend.run_housekeeping()  # crashes settled beside the samples, not in them
        return _serve(backend, host, port, interval)
    finally:
        backend.close(stop_server=owned)


def _serve(backend: MachineBackend, host: str, port: int, interval: float) -> int:
    from vramtop.export.exporter import Exporter
    from vramtop.export.http_server import MetricsServer

    exporter = Exporter(backend, interval_s=interval, say=_say)
    try:
        httpd = MetricsServer(host, port, exporter.registry())
    except OSError as exc:  # in use, not an address of this machine, a name that resolves not
        return _usage(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    httpd.start()
    warning = exposure_warning(host)
    if warning:
        print(warning, file=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if backend.autostart:
        threading.Thread(target=_start_server, args=(backend,), daemon=True).start()
    shown = f"[{host}]" if ":" in host else host
    where = f"http://{shown}:{httpd.server_port}/metrics"
    _say(f"serving {where} for {_watched(backend)} (Ctrl+C to stop)")
    exporter.start()
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        httpd.shutdown()
        httpd.server_close()
        exporter.stop()
    return 0


def _watched(backend: MachineBackend) -> str:
    if backend.demo:
        return "the simulated machine"
    url, name = backend.url, backend.profile_name
    return f"the profile {name!r} at {url}" if name else f"the server at {url}"


def _say(line: str) -> None:
    print(f"vramtop export: {line}", file=sys.stderr, flush=True)


def _start_server(backend: MachineBackend) -> None:
    """The simulated machine's server, started beside the sampling (as the console does)."""
    result = backend.start()
    if not result.ok:
        _say(result.message)


def _usage(message: str) -> int:
    print(f"vramtop export: {message}", file=sys.stderr)
    return ExitCode.USAGE

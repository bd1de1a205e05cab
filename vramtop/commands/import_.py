"""`vramtop import launch.sh`: turn an existing launch script into a profile."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from vramtop import profiles
from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given
from vramtop.config import ConfigError
from vramtop.core import secrets
from vramtop.core.json_types import JsonObject
from vramtop.core.launch.interpreter import ParsedLaunch
from vramtop.core.launch.problems import LaunchScriptError
from vramtop.core.launch.script import parse_launch_script
from vramtop.core.vllm import args as vllm_args
from vramtop.outcomes import ExitCode
from vramtop.profile_file import profile_to_toml, shown_input


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("import", help=summary("import"), description=__doc__)
    parser.add_argument("script", help="the bash script that starts vLLM")
    parser.add_argument("--name", help="the profile's name (default: the script's name)")
    parser.add_argument("--print", action="store_true", help="show the profile; save nothing")
    parser.add_argument("--force", action="store_true", help="replace a profile of that name")
    parser.add_argument(
        "--front-door",
        metavar="ADDR",
        default=argparse.SUPPRESS,  # (also taken before the subcommand's name)
        help="put vramtop's front door at HOST:PORT (e.g. 127.0.0.1:8000, the address your "
        "agent uses): restarts and relaunches hold the agent's requests instead of failing "
        "them; vLLM then listens on a loopback port vramtop chooses",
    )


# A launch script or its --config YAML is a few KB: anything past this is not one (a device
# such as /dev/zero never ends).
MAX_SCRIPT_BYTES = 1 << 20


def _read_small(path: Path, encoding: str) -> str:
    """`path`'s text, read up to `MAX_SCRIPT_BYTES`; ConfigError past it."""
    with path.open("rb") as f:
        raw = f.read(MAX_SCRIPT_BYTES + 1)
    if len(raw) > MAX_SCRIPT_BYTES:
        raise ConfigError(
            f"{path}: larger than {MAX_SCRIPT_BYTES >> 20} MiB, not a launch script or its "
            "config; give the script that starts vLLM"
        )
    return raw.decode(encoding)


def read_script(path: Path) -> ParsedLaunch:
    """Read and parse a script; `ConfigError` (with the file name) when it cannot be used."""
    try:
        text = _read_small(path, "utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    try:
        return parse_launch_script(text, script_dir=str(path.resolve().parent))
    except LaunchScriptError as exc:
        lines = "\n".join(f"{path}: {p}" for p in exc.problems)
        raise ConfigError(f"{lines}\nNothing was saved.") from None


def read_config_defaults(parsed: ParsedLaunch, script: Path) -> JsonObject:
    """The `--config` YAML's values (defaults under the command line), or {} without one."""
    name = vllm_args.config_path(parsed.argv)
    if name is None:
        return {}
    base = Path(parsed.cwd) if parsed.cwd else script.resolve().parent
    path = Path(name).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        data = yaml.safe_load(_read_small(path, "utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: the --config file cannot be read ({exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:  # the YAML parser recurses into each nested list or mapping
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a --config file must hold `flag: value` pairs")
    return data


def default_name(script: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", script.stem).strip("-.") or "vllm"
    return name[:64]


def _validation_problems(exc: ValidationError) -> str:
    """What is wrong with the profile, in the words of the command line (no pydantic dump,
    and no value that may be a key)."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"])
        where = {"name": "--name", "front_door": "--front-door"}.get(field, field)
        message = secrets.mask_line(str(error["msg"]).removeprefix("Value error, "))
        shown = shown_input(error)
        subject = " ".join(part for part in (where, shown) if part)
        problems.append(f"{subject}: {message}" if subject else message)
    return secrets.mask_pasted_keys("; ".join(problems)) + ". Nothing was saved."


@dataclass(frozen=True)
class ImportOptions:
    """`vramtop import`'s options (see commands/shared_options.py)."""

    script: str
    name: str | None = None
    print_only: bool = False  # --print: show the profile, save nothing
    force: bool = False
    front_door: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ImportOptions:
        given = Given(args)
        return cls(
            script=given.text("script") or "",
            name=given.text("name"),
            print_only=given.flag("print"),
            force=given.flag("force"),
            front_door=given.text("front_door"),
        )


def run(args: argparse.Namespace) -> int:
    options = ImportOptions.from_args(args)
    script = Path(options.script)
    try:
        parsed = read_script(script)
        defaults = read_config_defaults(parsed, script)
        profile = profiles.profile_from_launch(
            parsed,
            default_name(script) if options.name is None else options.name,
            source=str(script.resolve()),
        )
        if defaults:
            # Host and port from the YAML count too (the command line still wins).
            update: dict[str, str | int] = {}
            host, port = vllm_args.host([], defaults), vllm_args.port([], defaults)
            if vllm_args.host(profile.argv) is None and host:
                update["host"] = host
            if vllm_args.port(profile.argv) is None and port:
                update["port"] = port
            profile = profile.model_validate(profile.model_dump() | update)
        if options.front_door is not None:
            profile = profile.model_validate(
                profile.model_dump() | {"front_door": options.front_door.strip()}
            )
    except ValidationError as exc:
        print(f"vramtop import: {_validation_problems(exc)}", file=sys.stderr)
        return ExitCode.USAGE
    except (ConfigError, ValueError) as exc:
        print(f"vramtop import: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    for warning in parsed.warnings:
        print(f"note: {script}: {warning}", file=sys.stderr)
    if parsed.api_key_in_script:
        print(
            "note: the API key in the script was not stored. Export it before starting the "
            f"server: export {parsed.api_key_env or secrets.VLLM_API_KEY}=…"
            + (
                "  (vLLM reads it itself)"
                if parsed.api_key_env in (None, secrets.VLLM_API_KEY)
                else f"  (handed to the server as {secrets.VLLM_API_KEY})"
            ),
            file=sys.stderr,
        )
    elif parsed.api_key_env and parsed.api_key_env != "VLLM_API_KEY":
        print(
            f"note: the API key will be read from ${parsed.api_key_env} and handed to the "
            "server as VLLM_API_KEY (the only variable vLLM reads it from)",
            file=sys.stderr,
        )
    if parsed.hf_token_env and parsed.hf_token_env != "HF_TOKEN":
        print(
            f"note: the Hugging Face token will be read from ${parsed.hf_token_env} and handed "
            "to the server as HF_TOKEN",
            file=sys.stderr,
        )
    if options.print_only:
        sys.stdout.write(profile_to_toml(profile, shown=True))
        return 0
    try:
        path = profiles.save_profile(profile, overwrite=options.force)
    except profiles.ProfileExists as exc:
        print(f"vramtop import: {exc}; use --force to replace it", file=sys.stderr)
        return ExitCode.USAGE
    except ConfigError as exc:
        print(f"vramtop import: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"saved profile {profile.name!r} to {path}")
    return 0

"""Server profiles (profiles/NAME.toml): models, loading, saving (the settings are in
settings.py).

Every field carries a docstring: they are the user documentation of the files. A broken file
never gives a traceback: `ConfigError` names the file, the line (TOML syntax) or the field
(validation), and what is wrong. What each field accepts is its type's rule
(profile_fields.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from vramtop.core.addresses import parse_host_port
from vramtop.core.vllm import args as vllm_args
from vramtop.profile_fields import (
    CommandLine,
    DoorAddress,
    Environment,
    Port,
    ProfileName,
    Seconds,
    SecondsOrZero,
    VariableName,
    refuse_nul,
)
from vramtop.settings import ConfigError as ConfigError  # the error of every config file

# Where a listening-on-everything host is scraped from this machine.
_ALL_INTERFACES = {"0.0.0.0", "::", "", "[::]"}


class ProfileChange(BaseModel):
    """One flag changed by a relaunch (kept so the user can see and undo what changed)."""

    model_config = ConfigDict(extra="forbid")

    at: datetime
    """When the relaunch happened."""
    flag: str
    """The vLLM flag, e.g. `--gpu-memory-utilization`."""
    old: str | None = None
    """Its value before (absent: the flag was not set)."""
    new: str | None = None
    """Its value after (absent: the flag was removed)."""


class Profile(BaseModel):
    """How to run one vLLM server: its own command line plus what it needs around it."""

    model_config = ConfigDict(extra="forbid")

    name: ProfileName
    """The profile's name (also its file name: profiles/NAME.toml)."""
    argv: CommandLine
    """vLLM's own command line, word by word, e.g. ["vllm", "serve", "MODEL", "--port", "8000"].
    Never run through a shell."""
    env: Environment = Field(default_factory=dict)
    """Environment variables set for the server (vramtop never puts a key here itself)."""
    cwd: str | None = None
    """Working directory for the server (absent: vramtop's own)."""
    prelude: str | None = None
    """Shell commands run before the server, e.g.
    `source ~/miniconda3/etc/profile.d/conda.sh && conda activate env_vllm`."""
    host: str = "127.0.0.1"
    """Where the server listens (from `--host`); 0.0.0.0 is scraped on 127.0.0.1."""
    port: Port = 8000
    """The server's port (from `--port`)."""
    api_key_env: VariableName | None = None
    """The name of the environment variable holding the API key (never the key itself). The
    server gets its value as VLLM_API_KEY, the only variable vLLM reads it from; starting is
    refused while that variable is not set, rather than serving without a key."""
    hf_token_env: VariableName | None = None
    """The name of the environment variable holding the Hugging Face token (never the token
    itself); the server gets its value as HF_TOKEN."""
    stop_timeout_s: Seconds = 15.0
    """Seconds to wait after SIGTERM before SIGKILL when stopping."""
    auto_restart: bool = False
    """Restart the server (with backoff, a limited number of times) when it exits unasked."""
    front_door: DoorAddress | None = None
    """Where vramtop's front door listens, `HOST:PORT` (e.g. "127.0.0.1:8000", the address
    the agent already uses); absent: no front door. With one, vLLM listens on a loopback port
    vramtop chooses, and the door, a process of its own, forwards every request to it and
    holds the requests that arrive while it restarts or relaunches."""
    front_door_hold_s: Seconds = 600.0
    """With a front door: how long a request may be held while the server restarts before
    it is answered 503 (with Retry-After), in seconds."""
    drain_s: SecondsOrZero = 120.0
    """With a front door: how long a restart or relaunch lets the requests in flight finish
    before it stops the server anyway, in seconds."""
    notify: list[str] | None = None
    """Where `vramtop guard` sends its news (a finding opened or closed, an action taken):
    any of "toast" (WSL2: a Windows toast), "notify-send" (a Linux desktop), "terminal";
    absent: the machine's defaults. `--notify` on the command line replaces it."""
    auto_remedy: Literal["off", "between-turns"] = "off"
    """`vramtop guard`: "between-turns" relaunches with a collapse's remedy once it has been
    open 10 s, at a moment with no request running (at most 3 an hour); "off" only tells."""
    adaptive: bool = False
    """`vramtop guard`: this profile's budget is the one for outside calls; when the desktop's
    share rises towards what it leaves the desktop, step down to the remedy's flags between
    agent turns, and back up once the desktop has settled for `settle_s`."""
    settle_s: Seconds = 300.0
    """`vramtop guard --adaptive`: seconds the desktop must stay within the outside-call
    allowance before the budget steps back up."""
    history: list[ProfileChange] = Field(default_factory=list)
    """Flag changes made by relaunches, oldest first."""
    source: str | None = None
    """The launch script this profile was imported from."""

    # The file this profile was read from (None: made in memory): a save writes it, not the
    # file its `name` would give (a profile copied to another file is saved where it is).
    _loaded_from: Path | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        # What a profile is, not where it was read from: one read back equals the one written.
        if not isinstance(other, Profile):
            return NotImplemented
        return self.__dict__ == other.__dict__

    @property
    def loaded_from(self) -> Path | None:
        """The file this profile was read from; its copies (a relaunch's) keep it."""
        return self._loaded_from

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: object) -> object:
        return refuse_nul(value)

    @model_validator(mode="after")
    def _port_is_the_one_vllm_binds(self) -> Profile:
        """vLLM listens where its own command line says: a `--port` in argv is the profile's
        port, and a profile whose `port` says otherwise is refused (vramtop would wait for
        the server on a port it never binds)."""
        given = vllm_args.get_flag(self.argv, vllm_args.PORT)
        if given is None:
            return self
        try:
            bound = int(given)
        except ValueError:
            raise ValueError(f"the command line's --port {given!r} is not a number") from None
        if "port" in self.model_fields_set and self.port != bound:
            raise ValueError(
                f"port = {self.port} but the command line says --port {bound}, where vLLM "
                "will listen: remove `port` or make the two agree"
            )
        if not 1 <= bound <= 65535:
            raise ValueError(f"the command line's --port {bound} is not between 1 and 65535")
        self.port = bound
        return self

    @property
    def url(self) -> str:
        """The base URL to scrape: a server listening everywhere is reached on loopback."""
        host = "127.0.0.1" if self.host in _ALL_INTERFACES else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def flag(self, name: str) -> str | None:
        """The value vLLM would use for `name` (last occurrence wins), or None."""
        return vllm_args.get_flag(self.argv, name)

    def relaunched(self, changes: Mapping[str, str | None], at: datetime) -> Profile:
        """A copy with flags changed (None removes one) and the change kept in `history`.

        A flag whose value does not change is not recorded.
        """
        argv = list(self.argv)
        history = list(self.history)
        for flag, new in changes.items():
            flag = vllm_args.canonical_flag(flag)
            old = vllm_args.get_flag(argv, flag)
            if old == new:
                continue
            if new is None:
                argv = vllm_args.remove_flag(argv, flag)
            else:
                argv = vllm_args.set_flag(argv, flag, new)
            history.append(ProfileChange(at=at, flag=flag, old=old, new=new))
        return self.model_copy(update={"argv": argv, "history": history})

    def shown_argv(self) -> list[str]:
        """The command line with secrets masked: use this for anything shown or written."""
        return vllm_args.mask_secrets(self.argv)


# The guard's profile fields and their defaults (see `Profile`).
GUARD_DEFAULTS: dict[str, object] = {"auto_remedy": "off", "adaptive": False, "settle_s": 300.0}


def parse_door_address(text: str) -> tuple[str, int]:
    """A front door's `HOST:PORT` ("127.0.0.1:8000", "[::1]:8000", "localhost:8000") as its
    host and port; ValueError with what is wrong."""
    return parse_host_port(text)


def profile_from_argv(name: str, argv: list[str], **fields: Any) -> Profile:
    """A profile whose host and port are read from the command line."""
    host = vllm_args.host(argv) or "127.0.0.1"
    port_text = vllm_args.get_flag(argv, vllm_args.PORT)
    port = int(port_text) if port_text and port_text.isdigit() else 8000
    return Profile(name=name, argv=argv, host=host, port=port, **fields)

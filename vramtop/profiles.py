"""Profiles on disk: list, load, save (profiles/NAME.toml), the default one, and the demo's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vramtop import locations, settings
from vramtop.core.names import PROFILE_NAME_RULE, is_profile_name
from vramtop.core.secrets import looks_like_key
from vramtop.settings import ConfigError

if TYPE_CHECKING:
    # Loaded where a profile is: watching a URL lists the profiles (often none) and needs
    # neither pydantic nor the launch-script parser before its first frame.
    from vramtop.config import Profile
    from vramtop.core.launch.interpreter import ParsedLaunch


def profile_path(name: str) -> Path:
    """profiles/NAME.toml; `ConfigError` for a name no profile can have (a path, 5,000
    characters), which would otherwise reach the file system."""
    if not is_profile_name(name):
        raise ConfigError(
            f"{_no_profile(name)}: a profile's name is {PROFILE_NAME_RULE}; "
            "`vramtop profile list` shows them"
        )
    return locations.profiles_dir() / f"{name}.toml"


def _no_profile(name: str) -> str:
    """That no profile has this name, the name repeated cut to 40 characters, and not at all
    where it looks like a key typed in the wrong place."""
    if looks_like_key(name):
        return "no profile has the name given (it looks like a key, so it is not repeated here)"
    return f"no profile named {repr(name) if len(name) <= 40 else repr(name[:40]) + '…'}"


def list_profiles() -> list[str]:
    """Names of the saved profiles, sorted."""
    return sorted(p.stem for p in locations.profiles_dir().glob("*.toml"))


def load_profile(name: str | None = None) -> Profile:
    """The named profile, else the default one; `ConfigError` says what is missing or wrong."""
    if name is None:
        name = settings.load_settings().default_profile
        if name is None:
            raise ConfigError(
                "no profile given and no default profile set: "
                "run `vramtop import launch.sh` or pass --profile NAME"
            )
    path = profile_path(name)
    if not path.exists():
        known = ", ".join(list_profiles()) or "none yet"
        raise ConfigError(f"{_no_profile(name)} (profiles: {known})")
    from vramtop import profile_file

    profile = profile_file.load_profile_file(path)
    if profile.name != name:
        # Its one identity is its file name: every file of its server (state, lock, log,
        # events, door) is found by it. Taken at its word, a copy (`cp p1.toml p2.toml`)
        # would start, stop, relaunch and save over p1's server; ignored, `profile show`
        # and the file would go on saying another name than the one acted on.
        raise ConfigError(
            f"{path}: name = {profile.name!r} is not its file name; a profile's name is its "
            f'file name: write name = "{name}" in it'
        )
    return profile


class ProfileExists(ConfigError):
    """A profile of that name is saved already (`--force` replaces it)."""


def load_default_profile() -> Profile | None:
    """The default profile, or None when none is set (a broken one is a `ConfigError`)."""
    name = settings.load_settings().default_profile
    return None if name is None else load_profile(name)


def save_profile(profile: Profile, *, overwrite: bool = False) -> Path:
    """Write the profile (mode 0600); the first profile saved becomes the default."""
    path = profile_path(profile.name)
    if path.exists() and not overwrite:
        raise ProfileExists(f"a profile named {profile.name!r} already exists ({path})")
    from vramtop import profile_file

    # The settings are read before anything is written: a config.toml that cannot be used
    # must not leave a profile saved and no default set.
    current = settings.load_settings()
    first = not list_profiles()
    profile_file.save_profile_file(path, profile)
    if first or current.default_profile is None:
        set_default_profile(profile.name)
    return path


def set_default_profile(name: str) -> None:
    if not profile_path(name).exists():
        raise ConfigError(_no_profile(name))
    settings.save_settings(settings.load_settings().replace(default_profile=name))


def profile_from_launch(parsed: ParsedLaunch, name: str, source: str | None = None) -> Profile:
    """A profile from a parsed launch script (its API key, if any, stays outside)."""
    from vramtop import config

    return config.profile_from_argv(
        name,
        parsed.argv,
        env=parsed.env,
        cwd=parsed.cwd,
        prelude=parsed.prelude_text,
        api_key_env=parsed.api_key_env,
        hf_token_env=parsed.hf_token_env,
        source=source,
    )

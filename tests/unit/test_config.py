"""Settings and profiles: models, TOML round trips, and errors a user can act on."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vramtop import config, profile_file
from vramtop.config import ConfigError, Profile
from vramtop.core.vllm import args as vllm_args
from vramtop.settings import Settings, load_settings, save_settings

WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def _profile(**kw: object) -> Profile:
    argv = ["vllm", "serve", "m", "--host", "0.0.0.0", "--port", "8001", "--api-key", "sk-x"]
    return config.profile_from_argv(kw.pop("name", "p"), argv, **kw)  # type: ignore[arg-type]


def test_host_and_port_come_from_argv_and_url_uses_loopback() -> None:
    p = _profile()
    assert (p.host, p.port) == ("0.0.0.0", 8001)
    assert p.url == "http://127.0.0.1:8001"
    assert config.profile_from_argv("q", ["vllm", "serve", "m"]).url == "http://127.0.0.1:8000"
    assert p.flag("--port") == "8001"


def test_a_save_keeps_the_persons_key_and_only_the_shown_toml_masks_it(tmp_path: Path) -> None:
    """Masking is for display: a key written into one's own profile must survive a save (a
    save that wrote `***` would make `***` the server's key after the next restart)."""
    p = _profile(env={"A": "1", "OPENAI_API_KEY": "sk-env"}, prelude="source x", cwd="/srv")
    path = tmp_path / "p.toml"
    profile_file.save_profile_file(path, p)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    back = profile_file.load_profile_file(path)
    assert back == p
    assert back.flag("--api-key") == "sk-x"
    shown = profile_file.profile_to_toml(p, shown=True)
    assert "sk-x" not in shown and "sk-env" not in shown
    assert "***" in shown and 'A = "1"' in shown


def test_a_relaunch_save_rewrites_only_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    saved = _profile().relaunched({"--gpu-memory-utilization": "0.65"}, WHEN)
    profile_file.save_profile_file(path, saved)
    back = profile_file.load_profile_file(path)
    assert back.flag("--api-key") == "sk-x"
    assert back.flag("--gpu-memory-utilization") == "0.65"
    assert vllm_args.remove_flag(back.argv, "--gpu-memory-utilization") == _profile().argv


def test_relaunched_changes_flags_and_keeps_history() -> None:
    p = _profile().relaunched({"--gpu-memory-utilization": "0.85", "--port": "8001"}, WHEN)
    assert p.flag("--gpu-memory-utilization") == "0.85"
    assert [(c.flag, c.old, c.new) for c in p.history] == [
        ("--gpu-memory-utilization", None, "0.85")
    ]
    q = p.relaunched({"--gpu-memory-utilization": "0.8"}, WHEN)
    assert q.history[-1].old == "0.85" and len(q.history) == 2


def test_history_survives_toml(tmp_path: Path) -> None:
    p = _profile().relaunched({"--max-model-len": "4096"}, WHEN)
    profile_file.save_profile_file(tmp_path / "p.toml", p)
    assert profile_file.load_profile_file(tmp_path / "p.toml").history[0].at == WHEN


def test_broken_toml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "p"\nargv = ["vllm",\nport = \n')
    with pytest.raises(ConfigError) as err:
        profile_file.load_profile_file(path)
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_invalid_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "p"\nargv = ["vllm", "serve", "m"]\nport = "eighty"\n')
    with pytest.raises(ConfigError, match=r"bad.toml: field 'port': .*'eighty'"):
        profile_file.load_profile_file(path)


def test_unknown_setting_is_called_a_typo(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("interval = 2\n")
    with pytest.raises(ConfigError, match=r"field 'interval': unknown field"):
        load_settings(path)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("interval_s = 0", r"field 'interval_s': must be at least 0.1 seconds \(got 0\)"),
        # A console sampling every 1e-300 s would spin; inf would read once and never again.
        ("interval_s = 1e-300", r"field 'interval_s': must be at least 0.1 seconds"),
        ("interval_s = inf", r"field 'interval_s': must be a number \(got inf\)"),
        ('interval_s = "nan"', r"field 'interval_s': must be a number \(got 'nan'\)"),
        ('interval_s = "two"', r"field 'interval_s': must be a number \(got 'two'\)"),
        ("min_desktop_headroom_gib = -1", r"field 'min_desktop_headroom_gib': must be 0 or more"),
        ('gpu_probe = "cuda"', r"field 'gpu_probe': must be one of auto, nvml, .*'cuda'"),
        ('record_sessions = "maybe"', r"field 'record_sessions': must be true or false"),
        ("record_sessions = 2", r"field 'record_sessions': must be true or false"),
        ("keys = { relaunch = 3 }", r"field 'keys': must be a table of action = key strings"),
    ],
)
def test_an_unusable_setting_is_named_with_what_it_must_be(
    tmp_path: Path, line: str, said: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"{line}\n")
    with pytest.raises(ConfigError, match=rf"config.toml: {said}"):
        load_settings(path)


def test_settings_read_whole_numbers_as_the_numbers_they_are(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('interval_s = 2\ngpu_probe = "amd"\n')
    settings = load_settings(path)
    assert settings == Settings(interval_s=2.0, gpu_probe="amd")
    assert isinstance(settings.interval_s, float)
    with pytest.raises(ValueError, match="interval_s"):
        settings.replace(interval_s=-1)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ('interval_s = "2"', Settings(interval_s=2.0)),
        ('min_desktop_headroom_gib = " 3.5 "', Settings(min_desktop_headroom_gib=3.5)),
        ('record_sessions = "yes"', Settings(record_sessions=True)),
        ('record_sessions = "Off"', Settings(record_sessions=False)),
        ("record_sessions = 1", Settings(record_sessions=True)),
    ],
)
def test_settings_take_what_they_always_took(
    tmp_path: Path, lines: str, expected: Settings
) -> None:
    # Quoted numbers and yes/no words were taken by every earlier vramtop: a config.toml that
    # worked keeps working.
    path = tmp_path / "config.toml"
    path.write_text(f"{lines}\n")
    assert load_settings(path) == expected


def test_missing_required_field(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\n')
    with pytest.raises(ConfigError, match=r"field 'argv': Field required"):
        profile_file.load_profile_file(path)


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".hidden"])
def test_profile_names_must_be_file_names(name: str) -> None:
    with pytest.raises(ValueError):
        Profile(name=name, argv=["vllm", "serve", "m"])


def test_settings_defaults_and_round_trip(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "none.toml") == Settings()
    s = Settings(default_profile="p", keys={"relaunch": "ctrl+r"}, interval_s=0.5)
    save_settings(s, tmp_path / "c.toml")
    assert load_settings(tmp_path / "c.toml") == s


def test_every_field_is_documented() -> None:
    import ast
    import dataclasses
    import inspect
    import itertools

    for model in (Settings, Profile, config.ProfileChange):
        tree = ast.parse(inspect.getsource(model))
        body = tree.body[0].body  # type: ignore[attr-defined]
        documented = {
            stmt.target.id
            for stmt, nxt in itertools.pairwise(body)
            if isinstance(stmt, ast.AnnAssign)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
        }
        names = (
            {f.name for f in dataclasses.fields(model)}
            if dataclasses.is_dataclass(model)
            else set(model.model_fields)
        )
        assert names == documented, model.__name__


def test_the_port_is_the_one_on_the_command_line(tmp_path: Path) -> None:
    """A profile with `--port 18960` in argv and no `port =` waits on 18960, not 8000."""
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nargv = ["vllm", "serve", "m", "--port", "18960"]\n')
    assert profile_file.load_profile_file(path).port == 18960
    assert profile_file.load_profile_file(path).url == "http://127.0.0.1:18960"


def test_a_profile_that_contradicts_its_command_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "p"\nport = 8000\n'
        'argv = ["vllm", "serve", "m", "--port=18960", "--api-key", "sk-hidden-3"]\n'
    )
    with pytest.raises(ConfigError) as err:
        profile_file.load_profile_file(path)
    message = str(err.value)
    assert "port = 8000" in message and "--port 18960" in message
    assert "sk-hidden-3" not in message
    path.write_text('name = "p"\nargv = ["vllm", "serve", "m", "--port", "eighty"]\n')
    with pytest.raises(ConfigError, match="not a number"):
        profile_file.load_profile_file(path)

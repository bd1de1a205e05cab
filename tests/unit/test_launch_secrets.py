"""A key is found wherever a launch script can set it, and kept out of every part of the
profile and every message (pure: the parser alone)."""

from __future__ import annotations

import pytest

from vramtop.core.launch.interpreter import ParsedLaunch
from vramtop.core.launch.problems import LaunchScriptError
from vramtop.core.launch.script import parse_launch_script
from vramtop.core.secrets import MASK, mask_env

KEY = "sk-LIVE-321"


def _everything(r: ParsedLaunch) -> str:
    """Every part of a parsed launch a profile or a message is made from."""
    return repr((r.argv, r.env, r.prelude, r.cwd, [str(w) for w in r.warnings]))


@pytest.mark.parametrize(
    ("script", "key_env"),
    [
        (f"export VLLM_API_KEY=${{VLLM_API_KEY:-{KEY}}}\n", "VLLM_API_KEY"),
        (f'export VLLM_API_KEY="${{VLLM_API_KEY:-{KEY}}}"\n', "VLLM_API_KEY"),
        (f"export VLLM_API_KEY=${{VLLM_API_KEY:={KEY}}}\n", "VLLM_API_KEY"),
        (f"export VLLM_API_KEY=${{VLLM_API_KEY={KEY}}}\n", "VLLM_API_KEY"),
        (f"declare -x VLLM_API_KEY={KEY}\n", "VLLM_API_KEY"),
        (f"typeset -rx VLLM_API_KEY='{KEY}'\n", "VLLM_API_KEY"),
        (f"set -a\nVLLM_API_KEY={KEY}\nset +a\n", "VLLM_API_KEY"),
        (f"set -o allexport\nVLLM_API_KEY={KEY}\n", "VLLM_API_KEY"),
        (f"export PATH=$HOME/bin:$PATH VLLM_API_KEY={KEY} A=1\n", "VLLM_API_KEY"),
    ],
)
def test_an_exported_key_is_found_in_every_form_and_not_stored(script: str, key_env: str) -> None:
    r = parse_launch_script(script + "vllm serve m --host 0.0.0.0\n")
    assert KEY not in _everything(r)
    assert (r.api_key_env, r.api_key_in_script) == (key_env, True)
    assert any(f"export {key_env}" in str(w) for w in r.warnings)


def test_a_token_with_a_default_is_found() -> None:
    r = parse_launch_script(f"export HF_TOKEN=${{HF_TOKEN:-hf_{KEY}}}\nvllm serve m\n")
    assert KEY not in _everything(r) and r.hf_token_env == "HF_TOKEN"


def test_the_other_exports_of_a_line_with_a_key_stay() -> None:
    r = parse_launch_script(f'export PATH="$HOME/bin:$PATH" VLLM_API_KEY={KEY} A=1\nvllm serve m\n')
    assert r.prelude == ['export PATH="$HOME/bin:$PATH"'] and r.env == {"A": "1"}


def test_a_key_from_another_variable_is_named() -> None:
    r = parse_launch_script('export VLLM_API_KEY="$MY_KEY"\nvllm serve m --host 0.0.0.0\n')
    assert r.prelude == [] and (r.api_key_env, r.api_key_in_script) == ("MY_KEY", False)
    r = parse_launch_script(f"MY_KEY={KEY}\nvllm serve m --api-key $MY_KEY\n")
    assert KEY not in _everything(r) and (r.api_key_env, r.api_key_in_script) == ("MY_KEY", True)


def test_set_a_stays_around_what_the_prelude_sources() -> None:
    r = parse_launch_script("set -a\nsource .env\nset +a\nvllm serve m\n")
    assert r.prelude == ["set -a", "source .env", "set +a"]


@pytest.mark.parametrize(
    "command",
    [
        f'vllm serve m "--api-key" "{KEY}"',
        f"vllm serve m '--api-key={KEY}'",
        f'vllm serve m --api-key "${{VLLM_API_KEY:-{KEY}}}"',
    ],
)
def test_a_quoted_key_or_one_with_a_default_on_the_vllm_command_is_taken_out(
    command: str,
) -> None:
    r = parse_launch_script(command + " --host 0.0.0.0\n")
    assert KEY not in _everything(r) and r.api_key_env == "VLLM_API_KEY" and r.api_key_in_script


def test_a_bearer_token_is_a_key_whatever_its_name() -> None:
    r = parse_launch_script(f'export AUTH="Bearer {KEY}"\nvllm serve m\n')
    assert KEY not in _everything(r) and "AUTH" not in r.env
    assert mask_env({"AUTH": f"Bearer {KEY}"}) == {"AUTH": f"Bearer {MASK}"}


@pytest.mark.parametrize(
    "script",
    [
        f"huggingface-cli login --token {KEY}\nvllm serve m\n",
        f"ARGS='--api-key {KEY}'\nvllm serve m $ARGS\n",
        f"vllm serve m --middleware 'Bearer {KEY}'\n",
        # The shell's other ways of setting a variable: appending, printf -v.
        f"export VLLM_API_KEY+={KEY}\nvllm serve m\n",
        f"printf -v VLLM_API_KEY '{KEY}'\nexport VLLM_API_KEY\nvllm serve m\n",
    ],
)
def test_a_key_written_elsewhere_is_refused_without_being_repeated(script: str) -> None:
    with pytest.raises(LaunchScriptError) as caught:
        parse_launch_script(script)
    assert KEY not in str(caught.value) and "never stores" in str(caught.value)


def test_several_api_keys_are_refused_and_none_is_kept_as_a_word() -> None:
    # vLLM's --api-key takes several keys: the second is a key too, not a positional word.
    with pytest.raises(LaunchScriptError) as caught:
        parse_launch_script(f"vllm serve m --api-key {KEY} {KEY}2 --port 8001\n")
    assert KEY not in str(caught.value) and "several keys" in str(caught.value)


def test_a_key_read_at_launch_from_a_file_stays_a_command_of_the_prelude() -> None:
    # Not written in the script: the shell reads it when the server starts.
    r = parse_launch_script("printf -v VLLM_API_KEY '%s' \"$(cat ~/.key)\"\nvllm serve m\n")
    assert any("cat ~/.key" in line for line in r.prelude)


def test_no_error_repeats_a_key() -> None:
    script = f"export VLLM_API_KEY={KEY}\nVLLM_API_KEY=$(echo {KEY}) vllm serve m --port $P\n"
    with pytest.raises(LaunchScriptError) as caught:
        parse_launch_script(script)
    assert KEY not in str(caught.value) and "$P is not defined" in str(caught.value)


@pytest.mark.parametrize(
    ("script", "api_key_env", "hf_token_env"),
    [
        # A default assigned by the no-op command (`:` or `true`), quoted or not, `:=` or `=`.
        (f": ${{VLLM_API_KEY:={KEY}}}\n", "VLLM_API_KEY", None),
        (f': "${{HF_TOKEN:=hf_{KEY}}}"\n', None, "HF_TOKEN"),
        (f"true ${{VLLM_API_KEY={KEY}}}\n", "VLLM_API_KEY", None),
        (f": ${{MY_TOKEN:={KEY}}}\n", None, None),
        (f": ${{CREDENTIALS:={KEY}}}\n", None, None),
        # The same set with the export after it (said once, not twice).
        (f": ${{VLLM_API_KEY:={KEY}}}\nexport VLLM_API_KEY\n", "VLLM_API_KEY", None),
        # An assignment to a variable exported earlier exports its value.
        (f"export HF_TOKEN\nHF_TOKEN=hf_{KEY}\n", None, "HF_TOKEN"),
        # `readonly`, `local`, `typeset` without -x: assignments, then exported.
        (f"readonly VLLM_API_KEY={KEY}\nexport VLLM_API_KEY\n", "VLLM_API_KEY", None),
        (f"typeset VLLM_API_KEY={KEY}; export VLLM_API_KEY\n", "VLLM_API_KEY", None),
        # ANSI-C quoting, and a command that only echoes text written here.
        (f"export VLLM_API_KEY=$'{KEY}'\n", "VLLM_API_KEY", None),
        (f"export HF_TOKEN=$(echo hf_{KEY})\n", None, "HF_TOKEN"),
        # A non-secret name given a secret-named variable's default.
        (f"export X=${{VLLM_API_KEY:-{KEY}}}\n", None, None),
    ],
)
def test_every_form_that_sets_a_key_keeps_it_out_names_it_and_says_where_to_export_it(
    script: str, api_key_env: str | None, hf_token_env: str | None
) -> None:
    r = parse_launch_script(script + "vllm serve m --host 0.0.0.0\n")
    assert KEY not in _everything(r)
    assert (r.api_key_env, r.hf_token_env) == (api_key_env, hf_token_env)
    notes = [str(w) for w in r.warnings if "does not store it" in str(w)]
    assert len(notes) == 1 and "export " in notes[0], r.warnings


def test_a_default_that_is_no_key_stays_and_is_known_to_the_vllm_command() -> None:
    r = parse_launch_script(
        f": ${{PORT:=8001}} ${{VLLM_API_KEY:={KEY}}}\nvllm serve m --port $PORT\n"
    )
    assert KEY not in _everything(r)
    assert r.prelude == [": ${PORT:=8001}"] and r.argv[-2:] == ["--port", "8001"]


@pytest.mark.parametrize(
    "script",
    [
        f"echo ${{VLLM_API_KEY:={KEY}}}\n",
        f'test -n "${{HF_TOKEN:-hf_{KEY}}}"\n',
        f"read VLLM_API_KEY <<< {KEY}\n",
        f'read -r HF_TOKEN <<< "hf_{KEY}"\n',
        f"mapfile -t API_KEY <<< {KEY}\n",
        f"read HF_TOKEN < <(echo hf_{KEY})\n",
        f"printf -v VLLM_API_KEY %s {KEY}\n",
        f'eval "export VLLM_API_KEY={KEY}"\n',
        f'eval "$(echo export VLLM_API_KEY={KEY})"\n',
        f"source <(echo VLLM_API_KEY={KEY})\n",
        f'source /dev/stdin <<< "VLLM_API_KEY={KEY}"\n',
        f"let MY_TOKEN={KEY}\n",
        f"VLLM_API_KEY={KEY} huggingface-cli whoami\n",
        f"conda activate x; echo `echo HF_TOKEN=hf_{KEY}`\n",
        f"cat <<< 'token: {KEY}'\n",
        f"command export VLLM_API_KEY={KEY}\n",
        f"VLLM_API_KEY={KEY}\nvllm serve m --served-model-name $VLLM_API_KEY\n",
        # Arrays and references to other variables: not followed, so refused.
        f"declare -a KEYS=({KEY})\n",
        f"API_KEYS=({KEY} two)\n",
        f"API_KEY[0]={KEY}\n",
        f"export API_KEY[0]={KEY}\n",
        f"declare -n REF=VLLM_API_KEY\nREF={KEY}\n",
    ],
)
def test_a_form_that_cannot_be_followed_is_refused_without_being_repeated(script: str) -> None:
    with pytest.raises(LaunchScriptError) as caught:
        parse_launch_script(script + "vllm serve m\n")
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("script", "prelude"),
    [
        # Read at launch, not written here: the shell's own business.
        ("read HF_TOKEN < ~/.hf\n", ["read HF_TOKEN < ~/.hf"]),
        ('export HF_TOKEN="$(cat ~/.hf)"\n', ['export HF_TOKEN="$(cat ~/.hf)"']),
        ("source <(conda shell.bash hook)\n", ["source <(conda shell.bash hook)"]),
        ('eval "$(conda shell.bash hook)"\n', ['eval "$(conda shell.bash hook)"']),
        (
            'huggingface-cli login --token "$HF_TOKEN"\n',
            ['huggingface-cli login --token "$HF_TOKEN"'],
        ),
    ],
)
def test_a_key_the_shell_reads_at_launch_stays_in_the_prelude(
    script: str, prelude: list[str]
) -> None:
    assert parse_launch_script(script + "vllm serve m\n").prelude == prelude


def test_ansi_c_quoting_is_read_as_bash_reads_it() -> None:
    r = parse_launch_script("export SEP=$'a\\tb\\x41\\'c'\nvllm serve $'my\\x20model'\n")
    assert r.env == {"SEP": "a\tbA'c"} and r.argv == ["vllm", "serve", "my model"]


FORMED = "sk-proj-Q7xLEAK0a1b2c3d4e5"  # a key by its form: a known prefix, then random


@pytest.mark.parametrize(
    "script",
    [
        f"export OPENAI={FORMED}\n",
        f"export DB_PASS='{FORMED}'\n",
        f"export OPENAI_APIKEY={FORMED}\n",
        "export HUB=hf_QxLEAKabcdefghijklmnopqrstuvw\n",
    ],
)
def test_a_value_that_is_a_key_by_its_form_is_kept_out_whatever_its_name(script: str) -> None:
    r = parse_launch_script(script + "vllm serve m\n")
    assert "LEAK" not in _everything(r)
    assert any("does not store it" in str(w) for w in r.warnings), r.warnings


@pytest.mark.parametrize(
    "script",
    [
        f"printf -v X '%s' {FORMED}\n",
        f"read -r MYPASS <<< {FORMED}\n",
        f"echo {FORMED} > ~/.key\n",
        f'export X="$(printf %s {FORMED})"\n',
    ],
)
def test_a_key_by_its_form_written_into_a_prelude_command_is_refused(script: str) -> None:
    with pytest.raises(LaunchScriptError) as caught:
        parse_launch_script(script + "vllm serve m\n")
    assert "LEAK" not in str(caught.value)


@pytest.mark.parametrize(
    "script", ["export HF_HOME=/data/hf_cache_directory\n", "export CACHE=hf_cache_directory\n"]
)
def test_a_name_that_only_begins_as_a_key_does_stays(script: str) -> None:
    r = parse_launch_script(script + "vllm serve m\n")
    assert r.env or r.prelude, r

"""A bash launch script → the parts of a profile: prelude, environment, cwd, vLLM's argv.

Pure: text in, values out. What the script does that a profile cannot hold is reported with
its line number, and nothing is returned (`LaunchScriptError`); what can be dropped safely is
dropped with a warning.

Decisions (each is what the supervisor can reproduce faithfully):
- `export NAME=literal` → `env`. An export whose value refers to other variables
  (`export PATH="$CUDA_HOME/bin:$PATH"`) stays a shell line in the prelude, so the shell
  expands it at launch against the real environment. (Literal exports are set before the
  prelude runs; an export that a later `conda activate` would override is the one case where
  the order differs from the script.)
- `source …`, `conda activate …` and other simple commands before the vLLM command → the
  prelude, joined with ` && `. `set -e…` is dropped (the `&&` chain already stops on failure).
- `cd DIR` → `cwd` (`cd "$(dirname "$0")"` → the script's own directory, when known).
- `NAME=value` assignments are resolved into the vLLM arguments (`--port $PORT`); a variable
  the script does not define is an error naming it (`${PORT:-8000}` uses its default).
- On the vLLM command: `exec` is dropped silently; `nohup`, `&`, output redirects
  (`> log 2>&1`) and `| tee log` are dropped with a warning, because vramtop runs the server
  in its own session and writes its log itself. Other pipes, input redirects, here-documents,
  command substitution, functions, loops and conditionals around it are errors.
- Inline assignments (`CUDA_VISIBLE_DEVICES=0 vllm serve …`, `env A=B vllm serve …`) → `env`.
- A secret is never kept: `--api-key VALUE` and `--hf-token VALUE` are removed from the argv,
  and `api_key_env` / `hf_token_env` name the variable the key is taken from at launch
  (`--api-key "$MY_KEY"` → `MY_KEY`; a written value → `VLLM_API_KEY` / `HF_TOKEN`, with a
  note saying to export it). An exported or inline variable whose name says it holds a secret
  (`VLLM_API_KEY=…`, `HF_TOKEN=…`, `*_KEY`, `*_TOKEN`) is not stored either: a note says
  to export it in the shell instead. A key is found wherever the script can set one:
  `export`, `declare -x`, an assignment under `set -a`, `env`, inline, a default
  (`${VLLM_API_KEY:-sk-…}`, `${X:=…}`), quoted or not; a value that is a key by its form
  (`Bearer …`) counts whatever its name. `export VLLM_API_KEY="$MY_KEY"` names MY_KEY as
  the key's variable. A prelude command or a vLLM word that writes a key elsewhere
  (`huggingface-cli login --token hf_…`) is refused: the prelude is stored. No message
  repeats a key the script writes.
- `set -a` / `set +a` around prelude commands are kept, so what they source is exported.

Tokenising is `shell_lex`, grouping into commands `shell_commands`, the constructs a profile
cannot hold `checks`, and what each command becomes `interpreter`.
"""

from __future__ import annotations

from vramtop.core.launch import checks
from vramtop.core.launch.interpreter import Interpreter, ParsedLaunch
from vramtop.core.launch.problems import LaunchScriptError, Problem
from vramtop.core.launch.shell_commands import split_commands
from vramtop.core.launch.shell_lex import ShellSyntaxError, tokenize


def parse_launch_script(text: str, script_dir: str | None = None) -> ParsedLaunch:
    """Parse a bash launch script; raise `LaunchScriptError` listing every problem found.

    `script_dir` (the script's directory) resolves `cd "$(dirname "$0")"`.
    """
    # Scripts edited on Windows (WSL users): CRLF line ends, and a UTF-8 byte order mark that
    # would otherwise glue itself to the first command.
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise LaunchScriptError(
            [
                Problem(
                    line,
                    "a NUL character (\\0), which no command line, environment or path can "
                    "carry: remove it",
                )
            ]
        )
    try:
        tokens = tokenize(text)
    except ShellSyntaxError as exc:
        raise LaunchScriptError([Problem(exc.line, exc.message)]) from exc
    interp = Interpreter(text, script_dir)
    commands = split_commands(tokens)
    # A pipe's consumer (`| tee log`) is handled with the command that feeds it.
    interp.run([c for c in commands if not (c.piped_in and c.words and checks.is_tee(c))])
    if interp.blocks and not interp.errors:
        interp.errors.append(checks.never_closed(interp.blocks))
    if interp.result is None and not interp.errors:
        interp.errors.append(
            Problem(None, f"no vLLM command found; vramtop recognises {checks.FORMS}")
        )
    if interp.errors:
        problems = [interp.secrets.redact(p) for p in interp.errors]
        raise LaunchScriptError(sorted(problems, key=lambda p: p.line or 0))
    return interp.finish()

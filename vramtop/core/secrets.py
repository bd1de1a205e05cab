"""Secrets: which names hold one, and masking them in any line vramtop shows, stores or records.

Masking is for display and records only: a profile the person wrote is saved as they wrote
it. A key vramtop reads from somewhere else (a script it imports, a server's log) is never
written by vramtop in plaintext anywhere.

What counts as a secret in a line of text:
- the values of vLLM's secret flags: `--api-key KEY`, `--api-key=KEY`, `--hf-token …`;
- a value given to a name that ends in `key`, `token`, `secret` or `password` (`api_key`,
  `VLLM_API_KEY`, `hf_token`, `HF_TOKEN`…) in the forms logs and reprs use:
  `NAME=value`, `NAME: value`, `'name': 'value'`, `'name': ['v1', 'v2']`, `"name": "value"`;
- `Bearer TOKEN` (an Authorization header);
- the password of a URL (`http://user:PASSWORD@host`).
"""

from __future__ import annotations

import re

MASK = "***"

# The variables vLLM and Hugging Face read their secrets from.
VLLM_API_KEY = "VLLM_API_KEY"
HF_TOKEN = "HF_TOKEN"

_SECRET_SUFFIXES = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD")


def is_secret_name(name: str) -> bool:
    """Whether a variable or field called `name` holds a secret (`VLLM_API_KEY`, `hf_token`)."""
    upper = name.upper().lstrip("-").replace("-", "_")
    return any(upper == s or upper.endswith("_" + s) for s in _SECRET_SUFFIXES) or upper in (
        "APIKEY",
        "AUTHORIZATION",
    )


_WORD = r"(?:apikey|key|token|secret|password|passwd)"
# A name whose last part (after `_` or `-`) is a secret word: `api_key`, `HF_TOKEN`, `apikey`.
_NAME = rf"(?:[A-Za-z0-9]+[_-])*{_WORD}"
_START = r"(?<![A-Za-z0-9_-])"
# `--api-key VALUE`, `--api-key=VALUE`, `--hf-token VALUE` (any secret-named flag).
_FLAG = re.compile(rf"(?i)(?<![\w-])(--{_NAME})((?:=|\s+)['\"]?)(?!-)([^\s'\",\]]+)")
# `'api_key': ['a', 'b']` (a repr of a list of keys: vLLM's "non-default args").
_LIST = re.compile(rf"(?i)(['\"]?{_START}{_NAME}['\"]?\s*[:=]\s*)\[([^\]]*)\]")
# `'api_key': 'VALUE'`, `"api_key": "VALUE"`, `api_key='VALUE'`.
_QUOTED = re.compile(rf"(?i)(['\"]?{_START}{_NAME}['\"]?\s*[:=]\s*)(['\"])(.*?)\2")
# `VLLM_API_KEY=VALUE`, `token: VALUE` (unquoted, up to white space or a delimiter).
# (`NAME+=VALUE`, the shell's appending form, too)
_BARE = re.compile(
    rf"(?i)({_START}{_NAME}\s*\+?[:=]\s*)(?![\['\"*]|None\b|null\b)([^\s,;'\"\]\}})]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?!\*\*\*)([^\s'\",]+)")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)([^/\s@]+)(@)")
_LIST_ITEM = re.compile(r"(['\"])(.*?)\1")
# A part of every secret name `_NAME` matches (key, apikey, token, secret, password, passwd).
_SECRET_WORDS = ("key", "token", "secret", "passw")
# What each of _FLAG, _LIST, _QUOTED and _BARE needs where it matches: a secret word right
# before a value's start (an optional quote, then `:` or `=`, or white space). Lines that
# only mention one ("tokens/s", "max_tokens=16", "prompt_token_ids") have none.
_ASSIGNED = re.compile(rf"(?i){_WORD}['\"]?(?:\s*\+?[:=]|\s)")


def mask_line(text: str) -> str:
    """`text` with every secret it carries replaced by `***` (see the module's docstring)."""
    if not text:
        return text
    # Each pattern is tried only on a line holding the words it needs: a busy server's log is
    # mostly request lines that hold none, and trying all six on each was most of what
    # reading a line cost. The words are looked for in the line as given, before any
    # replacement, so the test lets through every line the patterns could change; casefold()
    # folds the letters that (?i) matches besides the ASCII ones (the Kelvin sign, the long
    # s). A line with a secret word is then searched once for one followed by a value
    # (`_ASSIGNED`) before the four patterns of names run: vLLM's stats line says "tokens/s"
    # every second, and trying them on it cost ten times the rest of reading it.
    folded = text.casefold()
    if "://" in text and "@" in text:
        text = _URL_PASSWORD.sub(rf"\1{MASK}\3", text)
    if any(word in folded for word in _SECRET_WORDS) and _ASSIGNED.search(text):
        text = _FLAG.sub(rf"\1\2{MASK}", text)
        text = _LIST.sub(_mask_list, text)
        text = _QUOTED.sub(rf"\1\2{MASK}\2", text)
        text = _BARE.sub(rf"\1{MASK}", text)
    if "bearer" in folded:
        text = _BEARER.sub(rf"\1{MASK}", text)
    return text


def _mask_list(match: re.Match[str]) -> str:
    items = _LIST_ITEM.sub(rf"\1{MASK}\1", match.group(2))
    return f"{match.group(1)}[{items}]"


def mask_lines(lines: list[str]) -> list[str]:
    return [mask_line(line) for line in lines]


def mask_url(url: str) -> str:
    """A URL with its password (`user:PASSWORD@`) replaced, for messages."""
    return _URL_PASSWORD.sub(rf"\1{MASK}\3", url)


def mask_env(env: dict[str, str]) -> dict[str, str]:
    """Environment variables for display: secret-named ones shown as `***`, and a key inside
    any other value masked (`AUTH="Bearer …"`)."""
    return {name: MASK if is_secret_name(name) else mask_line(value) for name, value in env.items()}


def written_secret(text: str) -> bool:
    """Whether `text` carries a key in one of the forms `mask_line` masks."""
    return mask_line(text) != text


def holds_secret(name: str, value: str) -> bool:
    """Whether setting `name` to `value` sets a key: by the name (`VLLM_API_KEY`, `*_TOKEN`)
    or by the value (`Bearer …`, a URL's password, `--api-key …`)."""
    return is_secret_name(name) or written_secret(value)

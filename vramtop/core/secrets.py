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
- a word that is a key by its form, whatever it is given to: a known key's prefix (`sk-`,
  `hf_`, `ghp_`, `AKIA`…) then 12 or more characters, a capital or a digit among them;
- the password of a URL (`http://user:PASSWORD@host`), and the value of a URL's query or
  fragment parameter named as a key (`?api_key=…`, `&token=…`, `&sig=…`, `#access_token=…`).
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"

# The variables vLLM and Hugging Face read their secrets from.
VLLM_API_KEY = "VLLM_API_KEY"
HF_TOKEN = "HF_TOKEN"

_SECRET_SUFFIXES: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD")
_SECRET_SUFFIXES += ("PASSPHRASE", "CREDENTIAL", "CREDENTIALS")


def is_secret_name(name: str) -> bool:
    """Whether a variable or field called `name` holds a secret (`VLLM_API_KEY`, `hf_token`)."""
    upper = name.upper().lstrip("-").replace("-", "_")
    return any(upper == s or upper.endswith("_" + s) for s in _SECRET_SUFFIXES) or upper in (
        "APIKEY",
        "AUTHORIZATION",
    )


_WORD = r"(?:apikey|key|token|secret|password|passwd|passphrase|credentials?)"
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
# How the keys people paste most often begin: OpenAI-style, Hugging Face, GitHub, GitLab,
# Slack, AWS access key ids, a JWT.
_KEY_PREFIX = r"(?:sk-|sk_|hf_|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-|AKIA|eyJ)"
# What each of those begins with, looked for first (a plain search): most lines hold none.
_KEY_STARTS: tuple[str, ...] = ("sk-", "sk_", "hf_", "ghp_", "gho_", "ghs_", "github_pat_")
_KEY_STARTS += ("glpat-", "xox", "AKIA", "eyJ")
# Such a key as a word of a line, whatever it is given to (`--served-model-name sk-…`,
# `OPENAI=sk-…`): not a part of a longer word, and with a capital or a digit after its
# prefix, as random keys have and a name made of words (`hf_cache_directory`) does not.
_KEY_WORD = re.compile(
    rf"(?<![A-Za-z0-9_.-]){_KEY_PREFIX}(?=[a-z_.-]*[A-Z0-9])[A-Za-z0-9_.-]{{12,}}"
)
# A URL in a line of text (up to white space or a quote, less the punctuation that ends a
# sentence or a clause after it), and a parameter of its query or
# fragment: `?NAME=VALUE`, `&NAME=VALUE`, `#NAME=VALUE`.
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;)\]}]")
_URL_PARAM = re.compile(r"([?&;#])([^=&;#\s]+)=([^&;#\s'\"]+)")
# What a URL's parameter carries a key under besides a secret name (`api_key`, `token`,
# `access_token`, `client_secret`): a signature (`sig`, `X-Amz-Signature`), `auth`, `pwd`,
# `pass`.
_URL_KEY_PARAMS = ("SIG", "SIGNATURE", "AUTH", "PWD", "PASS")
# A part of every secret name `_NAME` matches (key, apikey, token, secret, password, passwd,
# passphrase, credential(s)).
_SECRET_WORDS = ("key", "token", "secret", "passw", "passphrase", "credential")
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
    if "://" in text:
        if "@" in text:  # (a password may hold a quote, where a URL in a line ends)
            text = _URL_PASSWORD.sub(rf"\1{MASK}\3", text)
        text = _URL.sub(lambda match: mask_url(match.group(0)), text)
    if any(word in folded for word in _SECRET_WORDS) and _ASSIGNED.search(text):
        text = _FLAG.sub(rf"\1\2{MASK}", text)
        text = _LIST.sub(_mask_list, text)
        text = _QUOTED.sub(rf"\1\2{MASK}\2", text)
        text = _BARE.sub(rf"\1{MASK}", text)
    if "bearer" in folded:
        text = _BEARER.sub(rf"\1{MASK}", text)
    if any(start in text for start in _KEY_STARTS):
        text = _KEY_WORD.sub(MASK, text)
    return text


def _mask_list(match: re.Match[str]) -> str:
    items = _LIST_ITEM.sub(rf"\1{MASK}\1", match.group(2))
    return f"{match.group(1)}[{items}]"


def mask_lines(lines: list[str]) -> list[str]:
    return [mask_line(line) for line in lines]


def mask_url(url: str) -> str:
    """A URL with its password (`user:PASSWORD@`) and the values of its key parameters
    (`?api_key=…`, `&sig=…`, `#access_token=…`) replaced, for messages; a URL given without
    its scheme (`host:8000/?token=…`) too."""
    if "@" in url:
        url = _URL_PASSWORD.sub(rf"\1{MASK}\3", url)
    start = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=-1)
    if start < 0:
        return url
    return url[:start] + _URL_PARAM.sub(_mask_param, url[start:])


def _mask_param(match: re.Match[str]) -> str:
    mark, name, value = match.groups()
    if value == MASK or not is_url_key_param(name):
        return match.group(0)
    return f"{mark}{name}={MASK}"


def is_url_key_param(name: str) -> bool:
    """Whether a URL's query or fragment parameter `name` carries a key (`api_key`, `token`,
    `access_token`, `sig`, `X-Amz-Signature`), its name percent-decoded."""
    name = urllib.parse.unquote_plus(name)
    last = name.upper().replace("-", "_").rsplit("_", 1)[-1]
    return is_secret_name(name) or last in _URL_KEY_PARAMS


def mask_env(env: dict[str, str]) -> dict[str, str]:
    """Environment variables for display: secret-named ones shown as `***`, and a key inside
    any other value masked (`AUTH="Bearer …"`)."""
    return {name: MASK if is_secret_name(name) else mask_line(value) for name, value in env.items()}


def is_key_by_form(word: str) -> bool:
    """Whether `word` (a command's word) is a key by its form (`sk-…`, `hf_…`), whatever
    flag or variable it is given to."""
    return _KEY_WORD.fullmatch(word) is not None


def written_secret(text: str) -> bool:
    """Whether `text` carries a key in one of the forms `mask_line` masks."""
    return mask_line(text) != text


def holds_secret(name: str, value: str) -> bool:
    """Whether setting `name` to `value` sets a key: by the name (`VLLM_API_KEY`, `*_TOKEN`)
    or by the value (`Bearer …`, a URL's password, `--api-key …`)."""
    return is_secret_name(name) or written_secret(value)


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A key pasted whole (a known key's prefix, then its characters).
_PREFIXED_KEY = re.compile(rf"{_KEY_PREFIX}[A-Za-z0-9_.-]{{12,}}")
# A run of 16 or more letters and digits, digits among them, with no `_` between: what a
# random key looks like, and what a variable's name made of words does not.
_RANDOM_RUN = re.compile(r"(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{16,}")


def looks_like_key(text: str) -> bool:
    """Whether `text` looks like a key pasted where something else belongs: a known key's
    prefix, or a long run of letters and digits mixed."""
    return _PREFIXED_KEY.match(text) is not None or _RANDOM_RUN.search(text) is not None


_TOKEN = re.compile(r"[^\s'\"]+")


def mask_pasted_keys(text: str) -> str:
    """`text` (a message that repeats what was typed: `unrecognized arguments: …`) with every
    key `mask_line` finds masked, and every word that looks like a pasted key (`sk-…`,
    `hf_…`, 16 or more letters and digits mixed) replaced by `***` too."""
    return _TOKEN.sub(lambda m: MASK if looks_like_key(m.group(0)) else m.group(0), mask_line(text))


def variable_name_problem(text: str) -> str | None:
    """Why `text`, given where the name of a variable holding a key belongs, is not one, in
    words that never repeat it (it may be the key itself); None when it is a name."""
    if not _VARIABLE.fullmatch(text):
        return (
            "is not a variable's name (letters, digits and _, not starting with a digit): "
            "give the name of the variable that holds the key, never the key itself"
        )
    if looks_like_key(text):
        return (
            "looks like a key, not a variable's name: export the key in a variable "
            "(export MY_KEY=…) and give that variable's name"
        )
    return None

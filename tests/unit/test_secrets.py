"""Masking secrets in any line vramtop shows, stores or records (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.secrets import (
    MASK,
    is_secret_name,
    mask_line,
    mask_url,
    variable_name_problem,
)
from vramtop.core.vllm.args import mask_secrets

KEY = "sk-Zq81x"


@pytest.mark.parametrize(
    "line",
    [
        f"non-default args: {{'host': '0.0.0.0', 'api_key': ['{KEY}', 'second'], 'port': 8000}}",
        f"vllm serve m --api-key {KEY} --port 8000",
        f"vllm serve m --api-key={KEY}",
        f"vllm serve m --hf-token {KEY}",
        f"VLLM_API_KEY={KEY} vllm serve m",
        f'export HF_TOKEN="{KEY}"',
        f"Namespace(model='m', api_key='{KEY}')",
        f'{{"api_key": "{KEY}", "n": 1}}',
        f"Authorization: Bearer {KEY}",
        f"could not reach http://admin:{KEY}@127.0.0.1:8000/metrics",
        f"could not reach http://admin:x'{KEY}@127.0.0.1:8000/metrics",
        f"OPENAI_API_KEY: {KEY}",
    ],
)
def test_every_form_of_a_key_is_masked(line: str) -> None:
    masked = mask_line(line)
    assert KEY not in masked
    assert MASK in masked


@pytest.mark.parametrize(
    "line",
    [
        "GPU KV cache size: 1,048,576 tokens, Maximum concurrency for 512 tokens per request",
        "non-default args: {'model': 'm', 'max_model_len': 512, 'max_num_batched_tokens': 8192}",
        "monkey=1 turkey: 2",
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 77.1 tokens/s",
        "http://127.0.0.1:8000/metrics",
        "Namespace(api_key=None)",
    ],
)
def test_lines_without_a_key_are_left_alone(line: str) -> None:
    assert mask_line(line) == line


def test_url_keeps_everything_but_the_password() -> None:
    assert mask_url("http://me:pw@host:8000/x") == f"http://me:{MASK}@host:8000/x"
    assert mask_url("http://host:8000") == "http://host:8000"


def test_secret_names() -> None:
    for name in ("VLLM_API_KEY", "HF_TOKEN", "MY_KEY", "api_key", "hf_token", "DB_PASSWORD"):
        assert is_secret_name(name), name
    for name in ("CUDA_VISIBLE_DEVICES", "TOKENIZERS_PARALLELISM", "MONKEY", "max_tokens"):
        assert not is_secret_name(name), name


@given(st.text(alphabet="abcXYZ019-_.+/=:", min_size=1, max_size=40))
def test_a_written_key_is_replaced_whole(key: str) -> None:
    key = "s" + key  # (a word after `--api-key ` that starts with `-` is the next flag)
    assert mask_line(f"--api-key {key}") == f"--api-key {MASK}"
    assert mask_line(f"VLLM_API_KEY={key} vllm") == f"VLLM_API_KEY={MASK} vllm"
    assert mask_line(f"{{'api_key': ['{key}']}}") == f"{{'api_key': ['{MASK}']}}"


def _every_pattern(text: str) -> str:
    """mask_line as it was: every pattern tried on every line."""
    from vramtop.core import secrets

    if not text:
        return text
    text = secrets._URL_PASSWORD.sub(rf"\1{MASK}\3", text)
    text = secrets._FLAG.sub(rf"\1\2{MASK}", text)
    text = secrets._LIST.sub(secrets._mask_list, text)
    text = secrets._QUOTED.sub(rf"\1\2{MASK}\2", text)
    text = secrets._BARE.sub(rf"\1{MASK}", text)
    text = secrets._BEARER.sub(rf"\1{MASK}", text)
    return secrets._KEY_WORD.sub(MASK, text)


@pytest.mark.parametrize(
    "line",
    [
        # Letters that (?i) matches besides ASCII: the Kelvin sign, the long s.
        f"API_\u212aEY={KEY}",
        f"hf_tokeN: {KEY}",
        f"my_\u017fecret='{KEY}'",
        f"--pa\u017f\u017fword {KEY}",
        f"BEARER {KEY}",
        f"https://u:{KEY}@host/x and token={KEY}",
        '(APIServer pid=42) INFO:     127.0.0.1:40000 - "POST /v1/completions HTTP/1.1" 200 OK',
        # Secret words with no value after them, and with one after a quote, white space.
        "(APIServer pid=42) INFO 12-01 10:25:49 [loggers.py:335] Engine 000: Avg prompt "
        "throughput: 21.0 tokens/s, Avg generation throughput: 599.6 tokens/s, Running: 3 reqs",
        "SamplingParams(max_tokens=16, prompt_token_ids=[1, 2]), token_budget: 5",
        f"{{'hf_token' :\t'{KEY}'}} --api-key\t{KEY} secret\n={KEY}",
        f"monkey=1 TOKEN\u2028{KEY} passwd='' apikey \"{KEY}\"",
    ],
)
def test_a_line_is_masked_as_if_every_pattern_were_tried(line: str) -> None:
    assert mask_line(line) == _every_pattern(line)


@given(
    st.lists(
        st.sampled_from(
            [
                "key",
                "KEY",
                "K",
                "to",
                "ken",
                "secret",
                "ſ",
                "passwd",
                "bearer",
                "Bearer ",
                "://",
                "@",
                ":",
                "=",
                " ",
                "'",
                '"',
                "[",
                "]",
                "--",
                "-",
                "_",
                "api",
                "x",
                "1",
                "s",
                "\t",
                "\n",
                "tokens/s",
            ]
        ),
        max_size=14,
    ).map("".join)
)
def test_any_line_is_masked_as_if_every_pattern_were_tried(line: str) -> None:
    assert mask_line(line) == _every_pattern(line)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://h:8000/v1?api_key=K1&x=1", "http://h:8000/v1?api_key=***&x=1"),
        (
            "http://h/?token=K1&access_token=K2&sig=K3",
            "http://h/?token=***&access_token=***&sig=***",
        ),
        ("h:8000/?X-Amz-Signature=K1&key=K2", "h:8000/?X-Amz-Signature=***&key=***"),
        ("http://h/#access_token=K1&state=s", "http://h/#access_token=***&state=s"),
        ("http://h/?api%5Fkey=K1&max_tokens=5", "http://h/?api%5Fkey=***&max_tokens=5"),
        ("http://u:K1@h/?client_secret=K2", "http://u:***@h/?client_secret=***"),
    ],
)
def test_a_key_in_a_urls_query_is_masked_as_its_password_is(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    if "://" in url:  # in a line of text, a URL is known by its scheme
        assert mask_line(f"cannot reach {url}: refused") == f"cannot reach {shown}: refused"


def test_credentials_and_passphrases_are_secret_names() -> None:
    for name in ("CREDENTIALS", "AWS_CREDENTIALS", "GPG_PASSPHRASE", "db_credential"):
        assert is_secret_name(name), name
        assert MASK in mask_line(f"{name}=abc123"), name


@pytest.mark.parametrize(
    "text", ["sk-abc", "hf_abcdefghijklmnop", "a b", "", "1ABC", "ab12cd34ef56gh78ij"]
)
def test_a_key_given_for_a_variable_name_is_refused_in_words_that_do_not_repeat_it(
    text: str,
) -> None:
    problem = variable_name_problem(text)
    assert problem is not None and (not text or text not in problem)


@pytest.mark.parametrize("text", ["VLLM_API_KEY", "MY_KEY", "hf_token_2", "OPENAI_API_KEY_PROD"])
def test_a_variable_name_is_taken(text: str) -> None:
    assert variable_name_problem(text) is None


FORMED = "sk-proj-Q7xLEAK0a1b2c3d4e5"  # a key by its form: a known prefix, then random


@pytest.mark.parametrize(
    "line",
    [
        f"vllm serve m --served-model-name {FORMED}",
        f"export OPENAI={FORMED}",
        f"printf -v X %s '{FORMED}'",
        "x hf_QxLEAKabcdefghijklmnop y",
        "AKIAIOSFODNN7LEAKEXAMPLE",
    ],
)
def test_a_key_by_its_form_is_masked_whatever_it_is_given_to(line: str) -> None:
    assert "LEAK" not in mask_line(line) and MASK in mask_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "HF_HOME=/data/hf_cache_directory",
        "task-0123456789ABCDEF",
        "sk-short",
        "disk_sk-ABCDEF0123456789",
    ],
)
def test_a_word_that_only_begins_as_a_key_does_is_left_alone(line: str) -> None:
    assert mask_line(line) == line


def test_a_key_by_its_form_is_masked_in_a_command_line() -> None:
    argv = ["vllm", "serve", "m", "--served-model-name", FORMED, "--api-key", "plain"]
    assert mask_secrets(argv) == [
        "vllm",
        "serve",
        "m",
        "--served-model-name",
        MASK,
        "--api-key",
        MASK,
    ]

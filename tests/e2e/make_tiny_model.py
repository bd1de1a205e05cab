"""Write a tiny random Llama model that real vLLM can serve, without downloading anything.

Run it with the Python of the vLLM environment (it needs the ``transformers``,
``tokenizers``, ``torch`` and ``safetensors`` that vLLM installs):

    <vllm-python> tests/e2e/make_tiny_model.py OUT_DIR

The sizes are the smallest that vLLM's CPU attention accepts: a head_dim of 16 crashes
it, 64 works. The tokenizer is word-level over a small fixed vocabulary, so any prompt
made of those words (or anything else, as ``<unk>``) tokenizes, and it carries a chat
template so ``/v1/chat/completions`` works too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# Everything is generated here; make sure nothing reaches for the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HIDDEN = 256
HEADS = 4
KV_HEADS = 2
LAYERS = 2
INTERMEDIATE = 512
MAX_POSITIONS = 2048
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ message['role'] }} : {{ message['content'] }} </s> "
    "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}"
)


def _words() -> list[str]:
    # A vocabulary of plain words and digits: enough for prompts and for generated text
    # to look like text; the size stays small so the embedding matrix is tiny.
    base = [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "is",
        "are",
        "was",
        "be",
        "it",
        "this",
        "that",
        "with",
        "for",
        "from",
        "by",
        "as",
        "hello",
        "world",
        "model",
        "server",
        "token",
        "memory",
        "cache",
        "gpu",
        "cpu",
        "request",
        "reply",
        "user",
        "assistant",
        "system",
        ":",
        ",",
        ".",
        "!",
        "?",
        "yes",
        "no",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
    ]
    extra = [f"w{i}" for i in range(512 - len(SPECIAL) - len(base) - 10)]
    return base + [str(d) for d in range(10)] + extra


def write_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + _words())}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return len(vocab)


def write_model(out: Path, vocab_size: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HIDDEN // HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    # bf16 on disk, as served: vLLM would otherwise warn about downcasting every weight.
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write the model into")
    args = parser.parse_args(argv)
    out: Path = args.out
    # Build beside the target and rename, so an interrupted run never leaves a directory
    # that looks complete to the next one.
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    vocab_size = write_tokenizer(tmp)
    write_model(tmp, vocab_size)
    config = json.loads((tmp / "config.json").read_text())
    if not list(tmp.glob("*.safetensors")):
        print("no safetensors file was written", file=sys.stderr)
        return 1
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)
    print(
        f"tiny model: {out} (hidden {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, {config['num_key_value_heads']} kv heads, "
        f"{config['num_hidden_layers']} layers, vocab {config['vocab_size']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

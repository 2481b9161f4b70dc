"""Build small offline tokenizers for four chat-template families (fully offline, deterministic).

Run from the repository root::

    .venv/bin/python tests/assets/build_template_tokenizers.py

Each ``tests/assets/templates/<family>/`` holds the demo tokenizer's byte-level BPE (vocab 8192),
with the demo's ChatML and think tokens (ids 0-4) replaced by the family's own special tokens (the rest
from id 8192 on; ``<think>`` is plain text here, as in these families) and the family's
chat template, written from its public format (the real models' templates are longer; what matters
here is each family's markup, BOS/EOS handling, default system prompt and trimming):

* ``llama3``:  ``<|begin_of_text|><|start_header_id|>role<|end_header_id|>\\n\\n{content|trim}<|eot_id|>``,
  always a system header with a date line ("Cutting Knowledge Date ... Today Date ..."), tools as JSON.
* ``mistral``: ``<s>[INST] {system\\n\\n}{user}[/INST] {assistant}</s>``; roles other than
  system/user/assistant/tool raise.
* ``gemma``:   ``<bos><start_of_turn>user\\n{system\\n\\n}{content|trim}<end_of_turn>\\n<start_of_turn>model\\n...``.
* ``phi3``:    ``<|user|>\\n{content}<|end|>\\n<|assistant|>\\n{content}<|end|>\\n...<|endoftext|>`` (no trimming).

``generation_template.jinja`` beside each is the same template with ``{% generation %}`` around each
assistant's content and closing token: the reference for ``return_assistant_tokens_mask=True``.
The ids 5-10 (the media tokens) are the demo's, so media placeholders work.
"""

from __future__ import annotations

import json
from pathlib import Path

ASSETS = Path(__file__).resolve().parent
DEMO = ASSETS / "demo_tokenizer"
OUT = ASSETS / "templates"
KEPT_SPECIAL = ("<image>", "<img>", "</img>", "<so_start>", "<so_embedding>", "<so_end>")  # demo ids 5-10

LLAMA3 = (
    "{{- bos_token }}"
    "{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] | trim %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set system_message = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{%- if tools is not none %}{{- 'Environment: ipython\\n' }}{%- endif %}"
    "{{- 'Cutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: ' + date_string + '\\n\\n' }}"
    "{%- if tools is not none %}{{- 'You have access to the following functions.\\n\\n' }}"
    "{%- for tool in tools %}{{- tool | tojson(indent=4) }}{{- '\\n\\n' }}{%- endfor %}{%- endif %}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'tool' %}{%- set role = 'ipython' %}{%- else %}{%- set role = message['role'] %}"
    "{%- endif %}"
    "{{- '<|start_header_id|>' + role + '<|end_header_id|>\\n\\n' }}"
    "{%- if message['role'] == 'assistant' %}GEN_OPEN{{- message['content'] | trim + '<|eot_id|>' }}GEN_CLOSE"
    "{%- else %}{{- message['content'] | trim + '<|eot_id|>' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
MISTRAL = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'user' or message['role'] == 'tool' %}"
    "{%- if loop.first and system_message is defined %}"
    "{{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' }}GEN_OPEN{{- message['content'] + eos_token }}GEN_CLOSE"
    "{%- else %}{{- raise_exception('Only system, user, assistant and tool roles are supported!') }}"
    "{%- endif %}"
    "{%- endfor %}"
)
GEMMA = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set first_user_prefix = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'assistant' %}{%- set role = 'model' %}{%- else %}{%- set role = message['role'] %}"
    "{%- endif %}"
    "{{- '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
    "{%- if message['role'] == 'assistant' %}GEN_OPEN{{- message['content'] | trim + '<end_of_turn>' }}GEN_CLOSE"
    "{%- else %}{{- message['content'] | trim + '<end_of_turn>' }}{%- endif %}"
    "{{- '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"
)
PHI3 = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'tool' %}{%- set role = 'user' %}{%- else %}{%- set role = message['role'] %}"
    "{%- endif %}"
    "{{- '<|' + role + '|>\\n' }}"
    "{%- if message['role'] == 'assistant' %}GEN_OPEN{{- message['content'] + '<|end|>' }}GEN_CLOSE"
    "{%- else %}{{- message['content'] + '<|end|>' }}{%- endif %}"
    "{{- '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- else %}{{- eos_token }}{%- endif %}"
)

# family -> (template, special tokens in id order (the first five take ids 0-4), bos, eos, pad)
FAMILIES: dict[str, tuple[str, tuple[str, ...], str | None, str, str]] = {
    "llama3": (
        LLAMA3,
        (
            "<|finetune_right_pad_id|>",
            "<|begin_of_text|>",
            "<|eot_id|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|python_tag|>",
        ),
        "<|begin_of_text|>",
        "<|eot_id|>",
        "<|finetune_right_pad_id|>",
    ),
    "mistral": (MISTRAL, ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]"), "<s>", "</s>", "<unk>"),
    "gemma": (
        GEMMA,
        ("<pad>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<unused0>"),
        "<bos>",
        "<eos>",
        "<pad>",
    ),
    "phi3": (
        PHI3,
        ("<unk>", "<s>", "<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
        "<s>",
        "<|endoftext|>",
        "<|endoftext|>",
    ),
}


def _added(content: str, token_id: int) -> dict[str, object]:
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def build(family: str) -> Path:
    template, specials, bos, eos, pad = FAMILIES[family]
    backend = json.loads((DEMO / "tokenizer.json").read_text())
    vocab: dict[str, int] = backend["model"]["vocab"]
    by_id = {i: t for t, i in vocab.items()}
    for old_id in range(5):
        del vocab[by_id[old_id]]
    ids = {token: i for i, token in enumerate(specials[:5])}
    ids.update({token: len(by_id) + n for n, token in enumerate(specials[5:])})
    ids.update({token: vocab[token] for token in KEPT_SPECIAL})
    vocab.update(ids)
    backend["added_tokens"] = [_added(token, token_id) for token, token_id in sorted(ids.items(), key=lambda x: x[1])]
    out = OUT / family
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(backend, ensure_ascii=False) + "\n")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1_000_000,
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": template.replace("GEN_OPEN", "").replace("GEN_CLOSE", ""),
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    generation = template.replace("GEN_OPEN", "{%- generation %}").replace("GEN_CLOSE", "{%- endgeneration %}")
    (out / "generation_template.jinja").write_text(generation + "\n")
    return out


def main() -> None:
    from transformers import AutoTokenizer

    for family in FAMILIES:
        out = build(family)
        tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
        messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
        print(family, repr(tok.apply_chat_template(messages, tokenize=False)))


if __name__ == "__main__":
    main()

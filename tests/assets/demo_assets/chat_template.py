"""The demo chat template (Jinja, as transformers runs it): the one chat renderer of the demo assets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# ----------------------------------------------------------------------------------------------------
# Chat template (Jinja, as transformers' apply_chat_template runs it); the self-checks pin its rules.
# Per message: <|im_start|>{role}\n{body}<|im_end|>\n.  For assistants
# body = <think>{reasoning.strip()}</think>{answer.lstrip()}, reasoning taken from a non-empty
# ``reasoning_content`` or else from the first inline </think> (after the first <think> before it, if
# any).  Content given as a list of parts is flattened by concatenating the ``text`` of its
# ``{"type": "text"}`` parts with no separator.
# ----------------------------------------------------------------------------------------------------
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set ns = namespace(content='', reasoning='', answer='') -%}"
    "{%- if message['content'] is string -%}"
    "{%- set ns.content = message['content'] -%}"
    "{%- elif message['content'] is iterable and message['content'] is not mapping -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part is mapping and part['type'] == 'text' and part['text'] is string -%}"
    "{%- set ns.content = ns.content + part['text'] -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- if message['reasoning_content'] is string and message['reasoning_content'] -%}"
    "{%- set ns.reasoning = message['reasoning_content'] -%}"
    "{%- set ns.answer = ns.content -%}"
    "{%- elif '</think>' in ns.content -%}"
    "{%- set ns.before = ns.content.split('</think>', 1)[0] -%}"
    "{%- set ns.answer = ns.content.split('</think>', 1)[1] -%}"
    "{%- if '<think>' in ns.before -%}"
    "{%- set ns.reasoning = ns.before.split('<think>', 1)[1] -%}"
    "{%- else -%}"
    "{%- set ns.reasoning = ns.before -%}"
    "{%- endif -%}"
    "{%- else -%}"
    "{%- set ns.answer = ns.content -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\\n<think>' + ns.reasoning.strip() + '</think>' + ns.answer.lstrip()"
    " + '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + ns.content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)


def flatten_content(content: object) -> str:
    """Content as one string: strings as is, lists of parts joined (text parts only, no separator)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    return ""


def render_template(messages: Sequence[dict[str, Any]]) -> str:
    """``CHAT_TEMPLATE`` rendered as transformers' ``apply_chat_template(tokenize=False)`` renders it
    (a sandboxed Jinja environment with ``trim_blocks`` and ``lstrip_blocks``)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=False)

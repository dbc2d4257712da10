"""Final-answer extraction from model output and from dataset gold fields.

Pure string scanning (no regex backtracking on unbounded input, no recursion): linear in the
length of the text, so it is safe on megabyte-long adversarial responses.

Rules, in priority order (``extract_final_answer``):

1. Qwen3-style ``<think>...</think>`` spans are removed first; text inside an unclosed ``<think>``
   is reasoning, not an answer.
2. The LAST ``\\boxed{...}`` / ``\\fbox{...}`` with matched braces (``\\{``/``\\}`` are escapes, not
   braces); ``\\boxed 5`` (a single token after a space) counts too.
3. The LAST answer phrase: ``The answer is:`` (MetaMathQA), ``Final answer:``, ``Answer:``
   (markdown bold allowed), up to the end of its line.
4. The LAST GSM8K ``#### N`` marker, up to the end of its line.

No final answer means ``None``: we never fall back to "the last number in the text", which
would reward truncated traces for intermediate values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_BOX_COMMANDS = ("\\boxed", "\\fbox")

# "The answer is: X", "Final answer: X", "**Answer:** X", "Answer: X" (case-insensitive).
_PHRASE_RE = re.compile(
    r"(?:the\s+final\s+answer\s+is|final\s+answer|the\s+answer\s+is|answer)"
    r"\s*(?:\*\*)?\s*[:：]?\s*(?:\*\*)?[ \t]*",
    re.IGNORECASE,
)
_GSM_RE = re.compile(r"####[ \t]*")


@dataclass(frozen=True)
class Extraction:
    """Result of answer extraction.

    Attributes:
        answer: The extracted answer string (stripped), or ``None`` when there is no final answer.
        method: ``"boxed"``, ``"phrase"``, ``"gsm8k"`` or ``"none"``.
    """

    answer: Optional[str]
    method: str


def strip_think(text: str) -> str:
    """Remove ``<think>...</think>`` reasoning spans (Qwen3 hybrid thinking).

    Text before the last ``</think>`` is reasoning (chat templates often open ``<think>`` in the
    prompt, so the response may hold only the closing tag). An opened but never closed
    ``<think>`` means the model was still thinking: everything after it is dropped.
    """
    close = text.rfind("</think>")
    if close != -1:
        text = text[close + len("</think>"):]
    open_ = text.find("<think>")
    if open_ != -1:
        text = text[:open_]
    return text


def _match_brace(text: str, open_idx: int) -> int:
    """Index of the ``}`` matching the ``{`` at ``open_idx``, or -1. Skips ``\\{`` and ``\\}``."""
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def last_boxed(text: str) -> Optional[str]:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with matched braces.

    Scans backwards so that an unclosed last box (a truncated trace) falls back to the previous
    complete one. ``\\boxed 5`` yields ``"5"``. Returns ``None`` when no complete box exists or the
    last complete box is empty.
    """
    end = len(text)
    while True:
        start = max(text.rfind(cmd, 0, end) for cmd in _BOX_COMMANDS)
        if start == -1:
            return None
        cmd_len = len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox")
        j = start + cmd_len
        # \boxedfoo is a different macro name.
        if j < len(text) and text[j].isalpha():
            end = start
            continue
        k = j
        while k < len(text) and text[k] in " \t":
            k += 1
        if k < len(text) and text[k] == "{":
            close = _match_brace(text, k)
            if close != -1:
                content = text[k + 1:close].strip()
                return content if content else None
        elif k > j and k < len(text):
            # "\boxed 5": one token up to whitespace or '$'
            m = k
            while m < len(text) and not text[m].isspace() and text[m] not in "$":
                m += 1
            content = text[k:m].strip()
            if content:
                return content
        end = start


def _clean_line_answer(s: str) -> Optional[str]:
    s = s.strip()
    # Strip wrapping markdown bold / math delimiters and trailing sentence punctuation.
    for _ in range(3):
        before = s
        if s.startswith("**") and s.endswith("**") and len(s) > 4:
            s = s[2:-2].strip()
        if s.startswith("$$") and s.endswith("$$") and len(s) > 4:
            s = s[2:-2].strip()
        elif s.startswith("$") and s.endswith("$") and len(s) > 2 and s.count("$") == 2:
            s = s[1:-1].strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
        if s.startswith("\\[") and s.endswith("\\]"):
            s = s[2:-2].strip()
        s = s.rstrip(" .。")
        if s.endswith("**"):
            s = s[:-2].rstrip()
        if s.startswith("**"):
            s = s[2:].lstrip()
        if s == before:
            break
    return s or None


def last_phrase_answer(text: str) -> Optional[str]:
    """Answer after the last ``The answer is:`` / ``Final answer:`` / ``Answer:`` phrase."""
    last = None
    for m in _PHRASE_RE.finditer(text):
        last = m
    while last is not None:
        rest = text[last.end():]
        line_end = rest.find("\n")
        line = rest if line_end == -1 else rest[:line_end]
        inner = last_boxed(line)
        ans = inner if inner is not None else _clean_line_answer(line)
        if ans:
            return ans
        # "Final Answer\n\boxed{..}" style: the phrase with nothing after it on the line.
        return None
    return None


def last_gsm8k_answer(text: str) -> Optional[str]:
    """Answer after the last GSM8K ``#### `` marker, to the end of its line."""
    last = None
    for m in _GSM_RE.finditer(text):
        last = m
    if last is None:
        return None
    rest = text[last.end():]
    line_end = rest.find("\n")
    line = rest if line_end == -1 else rest[:line_end]
    return _clean_line_answer(line)


def extract_final_answer(text: str) -> Extraction:
    """Extract the final answer of a model response (see the module docstring for the rules).

    Args:
        text: The response (any length; non-strings raise ``TypeError``).
    Returns:
        An :class:`Extraction`; ``answer`` is ``None`` with method ``"none"`` when there is no
        final answer.
    """
    if not isinstance(text, str):
        raise TypeError(f"response must be a str, got {type(text).__name__}")
    body = strip_think(text)
    boxed = last_boxed(body)
    if boxed is not None:
        return Extraction(boxed, "boxed")
    phrase = last_phrase_answer(body)
    if phrase is not None:
        return Extraction(phrase, "phrase")
    gsm = last_gsm8k_answer(body)
    if gsm is not None:
        return Extraction(gsm, "gsm8k")
    return Extraction(None, "none")


# ---------------------------------------------------------------------- dataset gold answers
_METAMATH_RE = re.compile(r"The answer is:?\s*(.+?)\s*$", re.IGNORECASE | re.DOTALL)


def gold_from_metamathqa(response: str) -> Optional[str]:
    """Gold answer of a MetaMathQA row: the text after the last ``The answer is:`` (dataset card)."""
    idx = response.lower().rfind("the answer is")
    if idx == -1:
        return None
    m = _METAMATH_RE.match(response[idx:])
    if not m:
        return None
    ans = m.group(1).strip()
    ans = _clean_line_answer(ans.split("\n")[0]) if ans else None
    return ans


def gold_from_gsm8k(answer: str) -> Optional[str]:
    """Gold answer of a GSM8K row: the text after ``#### ``, thousands separators removed."""
    ans = last_gsm8k_answer(answer)
    if ans is None:
        return None
    return ans.replace(",", "").strip() or None


def gold_from_boxed(solution: str) -> Optional[str]:
    """Gold answer of a MATH / NuminaMath row: the last ``\\boxed{}`` with matched braces."""
    return last_boxed(solution)

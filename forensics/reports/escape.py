"""Neutralise text that came from an input before it reaches a terminal or a Markdown report.

Log lines and file names are written by whatever produced the run: they can hold terminal escape
sequences (colour, cursor moves, a window-title OSC), bidirectional overrides that reorder what a
reader sees, raw HTML, or backtick runs that close a Markdown code block early. Every string from an
input goes through one of these functions; JSON needs none of them (its encoder escapes by itself).
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, bidirectional marks/overrides/isolates, and the
# lone surrogates that stand for undecodable bytes of a file name (Python's surrogateescape).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]|!#~])")
# Markers that mean something only at the start of a line (list, setext heading, numbered list).
_MD_LEAD = re.compile(r"^(\s*\d*)([+\-=]|(?<=\d)[.)])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKTICKS = re.compile(r"`+")


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name, shown as that byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _entities(text: str) -> str:
    """`&`, `<` and `>` as HTML entities (`&` first, so the others are not escaped twice)."""
    for k, v in _HTML.items():
        text = text.replace(k, v)
    return text


def visible(text: object) -> str:
    """Control characters, bidi overrides and undecodable bytes as visible escapes (`\\x1b`); lines kept."""
    return _UNSAFE.sub(_escape, str(text))


def one_line(text: object) -> str:
    """`visible`, with line breaks escaped too: a file name or summary can never start a line of its own."""
    return visible(str(text).replace("\r", "\\r").replace("\n", "\\n"))


def md_text(text: object) -> str:
    """One line of Markdown prose or a table cell: no raw HTML, no links or images, no table break."""
    # Angle brackets as entities, not backslashes: every renderer reads `&lt;` as text, some read `\<` as a tag.
    out = _MD_SPECIAL.sub(r"\\\1", _entities(one_line(text)))
    return _MD_LEAD.sub(lambda m: m.group(1) + "\\" + m.group(2), out)


def longest_backticks(text: str) -> int:
    """The longest run of backticks in `text`: a Markdown fence around it must be longer."""
    return max((len(r) for r in _BACKTICKS.findall(text)), default=0)


def md_code_span(text: object) -> str:
    """An inline code span that the text cannot close (a fence longer than any backtick run inside)."""
    body = one_line(text)
    fence = "`" * (longest_backticks(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def md_fence(text: str) -> str:
    """A code-block fence longer than any backtick run in the block, so a ``` line inside stays text."""
    return "`" * max(3, longest_backticks(text) + 1)


def html(text: object) -> str:
    """Text for HTML: `&`, `<`, `>` and quotes as entities, control characters as visible escapes."""
    return _entities(visible(text)).replace('"', "&quot;").replace("'", "&#x27;")

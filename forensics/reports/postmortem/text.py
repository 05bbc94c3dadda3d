"""Input text made safe to show: control characters (ANSI/OSC escapes, NUL, bells) become visible `\\xNN` text."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, and C1 controls: a terminal escape in a log must show as text,
# not drive a viewer (OSC 8 links, colour codes, title changes).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_NL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def visible(s: str, keep_newlines: bool = True) -> str:
    """`s` with every control character (but tab, and newline when kept) written as `\\xNN`."""
    rx = _CONTROL if keep_newlines else _CONTROL_NL
    return rx.sub(lambda m: f"\\x{ord(m.group()):02x}", s)

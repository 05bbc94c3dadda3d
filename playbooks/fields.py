"""Helpers to read event fields (the JSON object of named captures) and convert amounts."""

from __future__ import annotations

# One conversion of printed sizes for parsers and playbooks alike (the contract's, not a parser's).
from forensics.contracts.fields import field_expr as field
from forensics.contracts.fields import size_to_mib

# `20.00 MiB`, `1.5 GiB`, `0 bytes` -> MiB as float (null when unparseable).
size_mib = size_to_mib


def fmt_mib(mib: float | None) -> str:
    """MiB as a short human amount (`1.50 GiB`, `20.00 MiB`)."""
    if mib is None:
        return "?"
    if mib >= 1024:
        return f"{mib / 1024:.2f} GiB"
    return f"{mib:.2f} MiB"


__all__ = ["field", "size_mib", "fmt_mib"]

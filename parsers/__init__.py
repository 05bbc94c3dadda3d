"""Parsers: one module per input family, each turning files into evidence tables.

A module that defines `PARSER = Parser(...)` (parsers.base) registers itself; the
registry imports every module of this package, so adding a format is adding a file.
"""

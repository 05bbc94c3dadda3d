"""Capture files holding many nvidia-smi printouts, each under a `# $ <command>` section header.

Layout of the corpus captures (utkuozdemir/nvidia_gpu_exporter `internal/captures/*.txt`):

    ################################################################################
    # load :: query (-q)
    # $ nvidia-smi -q
    ################################################################################
    <raw output>

Each section is handed to the parser of its command (table, `-q`, `-q -x`, `--query-gpu`,
`--query-compute-apps`, `dmon`, `pmon`, `dcgmi dmon`); sections of other commands (`-h`,
`-L`, `topo -m`, `--query-accounted-apps`, …) hold no samples and are listed in the notes.
`seq` runs over the whole file in section order.
"""

from __future__ import annotations

import re

import polars as pl
from forensics.parsers import dcgm_dmon, nvsmi_csv, nvsmi_dmon, nvsmi_q, nvsmi_table, nvsmi_xml
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.lines import ReadStats, iter_frames
from forensics.parsers.nvsmi_csv import result_of

RULE = r"^#{20,}\s*$"
COMMAND = r"^#\s*\$\s*(.+?)\s*$"


def kind_of(command: str) -> str | None:
    """Which parser reads the output of `command` (None: no samples in it)."""
    c = " " + command.strip() + " "
    if "dcgmi" in c:
        return "dcgm" if " dmon " in c and " -l " not in c else None
    if "nvidia-smi" not in c:
        return None
    if "--query-gpu" in c or "--query-compute-apps" in c:
        return "csv"
    if re.search(r" (?:dmon|pmon) ", c):
        return "dmon"
    if re.search(r" -q\b| --query ", c):
        return "xml" if re.search(r" -x\b| --xml-format ", c) else "q"
    # The bare command (optionally looping) prints the table.
    if re.fullmatch(r"\s*nvidia-smi(?:\s+-l(?:ms)?\s+\d+)?\s*", command.strip()):
        return "table"
    return None


def sections(lines: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """(command, body lines) of every section, in file order."""
    rules = lines.filter(pl.col("text").str.contains(RULE)).get_column("line").to_list()
    cmds = lines.filter(pl.col("text").str.contains(COMMAND)).select("line", pl.col("text").str.extract(COMMAND, 1)).rows()
    out = []
    # Rules pair up: the opening rule, the command lines, the closing rule, then the body.
    for k in range(0, len(rules) - 1, 2):
        open_l, close_l = rules[k], rules[k + 1]
        end = rules[k + 2] if k + 2 < len(rules) else None
        command = next((c for ln, c in cmds if open_l < ln < close_l), None)
        if command is None:
            continue
        body = lines.filter((pl.col("line") > close_l) & (pl.col("line") < end if end is not None else pl.lit(True)))
        out.append((command, body))
    return out


def parse_sections(lines: pl.DataFrame) -> tuple[list[pl.DataFrame], list[pl.DataFrame], list[str]]:
    """gpu and procs frames of every known section, renumbered to one `seq` over the file."""
    gpu_parts, proc_parts, skipped = [], [], []
    seq = 0
    for command, body in sections(lines):
        kind = kind_of(command)
        if kind is None:
            skipped.append(command.split()[0] + " " + " ".join(command.split()[1:2]))
            continue
        if kind == "csv":
            state = nvsmi_csv.CsvState(context=command)
            g, p = nvsmi_csv.parse_lines(body, state)
        elif kind == "dmon":
            g, p = nvsmi_dmon.parse_lines(body, nvsmi_dmon.DmonState())
        elif kind == "q":
            g, p = nvsmi_q.parse_lines(body)
        elif kind == "xml":
            g, p = nvsmi_xml.parse_text("\n".join(body.get_column("text").to_list()), int(body.get_column("line").min() or 1))
        elif kind == "table":
            g, p = nvsmi_table.parse_table_lines(body)
        else:
            g, p = dcgm_dmon.parse_lines(body, dcgm_dmon.DcgmState()), pl.DataFrame()
        base = seq
        g, seq_g = F.renumber(g, base)
        p, seq_p = F.renumber(p, base)
        seq = max(seq_g, seq_p, base)
        gpu_parts.append(g)
        proc_parts.append(p)
    notes = [f"{len(skipped)} section(s) without samples not read (help, lists, topology, accounting)"] if skipped else []
    return gpu_parts, proc_parts, notes


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse every section of a capture file whose command prints samples."""
    stats = ReadStats()
    frames = list(iter_frames(src, stats=stats))
    lines = pl.concat(frames) if frames else pl.DataFrame({"line": [], "seg": [], "text": []})
    gpu_parts, proc_parts, notes = parse_sections(lines.select("line", "text"))
    return result_of(src, gpu_parts, proc_parts, notes + stats.problems(), stats)


def sniff(sn: Sniffed) -> int:
    """Section headers naming nvidia-smi / dcgmi commands."""
    hits = re.findall(r"(?m)^#\s*\$\s*(?:nvidia-smi|dcgmi)\b", sn.text)
    return 95 if hits else 0


PARSER = Parser(kind="nvsmi_capture", quotable=True, sniff=sniff, parse=parse, description="multi-section nvidia-smi capture (`# $ command` headers)")

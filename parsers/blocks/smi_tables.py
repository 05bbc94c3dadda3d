"""nvidia-smi default tables pasted into a log (the event only; parsers/nvsmi_table.py reads the numbers)."""

from __future__ import annotations

import datetime as dt
import re

import polars as pl
from forensics.parsers.blocks.common import block_text, event, opener_views, rank_of

NEEDLE = "NVIDIA-SMI "
SMI_START = re.compile(r"^(?P<prefix>.*?)\|\s*NVIDIA-SMI (?P<smi>\d[\w.]*)")


_CTIME = re.compile(r"^\s*[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\s*$")
_SMI_VERSIONS = re.compile(r"NVIDIA-SMI (?P<smi>\S+)\s+Driver Version: (?P<driver>\S+)\s+CUDA Version: (?P<cuda>\S+)")
_SMI_GPU_ROW = re.compile(r"^\|\s+\d+\s+.*\|\s+[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
_SMI_PROC_ROW = re.compile(r"^\|\s+\d+\s+(?:N/A|\d+)\s+(?:N/A|\d+)\s+\d+\s+[CGM+]+\s")


def read(frame: pl.DataFrame, cand: pl.DataFrame, found: list[dict]) -> list[dict]:
    """nvidia-smi tables: the date line above, the header, GPU and process rows down to the last border."""
    text = frame.get_column("text")
    events = []
    for row, m, v, a in opener_views(frame, cand, NEEDLE, SMI_START, 3):
        prefix = m.group("prefix")
        body = v.body
        b = a
        if b - 1 >= 0 and body[b - 1].strip().startswith("+"):
            b -= 1
        date = None
        for k in (b - 1, b - 2):
            if k >= 0 and _CTIME.match(body[k]):
                date, b = body[k].strip(), k
                break
        e = a
        while e + 1 < len(body) and e - a < 400:
            nxt = body[e + 1].strip()
            if nxt.startswith(("|", "+")):
                e += 1
            elif not nxt and e + 2 < len(body) and body[e + 2].strip().startswith("+"):
                e += 2
            else:
                break
        lines = [body[k] for k in range(b, e + 1)]
        vm = _SMI_VERSIONS.search(body[a])
        fields = {
            "smi_version": m.group("smi"),
            "driver_version": vm.group("driver") if vm else None,
            "cuda_version": vm.group("cuda") if vm else None,
            "gpus": sum(1 for ln in lines if _SMI_GPU_ROW.match(ln.strip())),
            "processes": sum(1 for ln in lines if _SMI_PROC_ROW.match(ln.strip())),
            "date": date,
        }
        ts = None
        if date:
            try:
                ts = dt.datetime.strptime(re.sub(r"\s+", " ", date), "%a %b %d %H:%M:%S %Y").replace(tzinfo=dt.timezone.utc)
            except ValueError:
                ts = None
        events.append(
            event(
                line=int(frame.get_column("line")[int(v.rows[b])]),
                end_line=int(frame.get_column("line")[int(v.rows[e])]),
                code="nvidia_smi_table",
                severity="info",
                message=re.sub(r"\s+", " ", body[a].strip("| ")),
                text=block_text(text, v.rows[b : e + 1]),
                fields=fields,
                rank=row["rank"] if row["rank"] is not None else rank_of(prefix),
                ts=ts or row["ts"],
            )
        )
    return events

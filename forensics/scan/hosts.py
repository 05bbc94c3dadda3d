"""Hosts named in a run's logs (hostnames, node-17, SLURM node lists, syslog prefixes) and the Xid codes seen on them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# Names that say nothing about which machine failed.
_NOT_HOSTS = {"localhost", "127.0.0.1", "<n/a>", "n/a", "none", "unknown", "(none)", "::1"}

# `gpu-node-17:29136:29193 [0] NCCL INFO ...` (optionally behind a `[rank3]:` prefix).
_NCCL = re.compile(rb"^(?:\[\w+\]:)?([A-Za-z][\w.-]*):\d+:\d+ \[\d+\] NCCL", re.M)
# torchrun's ChildFailedError block: `host      : gpu-node-17` followed by `rank      : 3 (local_rank: 3)`.
_TORCHRUN = re.compile(rb"^\s*host\s*:\s*(\S+)\s*\n\s*rank\s*:\s*(\d+)", re.M)
# `srun: error: nid01934: task 3: Exited with exit code 1` / `tasks 0-3: Killed`.
_SRUN = re.compile(rb"srun: error: ([\w.-]+): tasks? ([\d,-]+)")
# syslog/journal line: `Nov 22 06:49:54 gpu-node-17 kernel: NVRM: Xid ...`.
_SYSLOG = re.compile(rb"^[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d ([\w.-]+) (?:kernel|systemd|slurmd)\b", re.M)
# SLURM node lists in the environment dump or scontrol output: `SLURM_JOB_NODELIST=node[01-04,07]`.
_NODELIST = re.compile(rb"(?:SLURM_(?:JOB_)?NODELIST|SLURM_NODELIST|NodeList|Nodes)\s*[=:]\s*([\w.\-\[\],]+)")
# `hostname: x`, `Hostname = x`, `on host x`.
_NAMED = re.compile(rb"\b(?:hostname|host name|on host|node name)\s*[:=]?\s*([A-Za-z][\w.-]*\d[\w.-]*)", re.I)
# Bare node-like names: gpu-node-017, node-17, nid01934, compute-3-12, worker-5.
_NODE_WORD = re.compile(rb"\b((?:[a-z][a-z0-9]*-)*(?:node|gpu|host|compute|worker|nid|dgx|cn)[-_]?\d+(?:-\d+)*)\b", re.I)
# `NVRM: Xid (PCI:0000:44:00): 79, pid=...`.
_XID = re.compile(rb"^(.*?)NVRM: Xid \([^)]*\): (\d+)", re.M)


@dataclass
class HostInfo:
    """What one run's logs say about its machines."""

    hosts: set[str] = field(default_factory=set)
    rank_host: dict[int, str] = field(default_factory=dict)
    # (host or None when the line does not say, Xid code)
    xids: list[tuple[str | None, int]] = field(default_factory=list)

    def merge(self, other: HostInfo) -> None:
        self.hosts |= other.hosts
        for rank, host in other.rank_host.items():
            self.rank_host.setdefault(rank, host)
        self.xids.extend(other.xids)


def _ok(name: str) -> bool:
    return name.lower() not in _NOT_HOSTS and len(name) <= 64 and not name.replace(".", "").isdigit()


def expand_nodelist(text: str) -> list[str]:
    """A SLURM node list as host names: `node[01-03,07],gpu5` -> node01 node02 node03 node07 gpu5."""
    out: list[str] = []
    # Split on commas outside brackets.
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in filter(None, parts):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            if not hi:
                out.append(f"{prefix}{lo}{suffix}")
                continue
            if not (lo.isdigit() and hi.isdigit()) or int(hi) - int(lo) > 4096:
                continue  # malformed or absurd: not worth a guess
            width = len(lo)
            out.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(int(lo), int(hi) + 1))
    return out


def _ranks(spec: str) -> list[int]:
    out: list[int] = []
    for item in spec.split(","):
        lo, _, hi = item.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()) and (not hi or int(hi) - int(lo) < 4096):
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def scan_text(data: bytes, file_rank: int | None = None) -> HostInfo:
    """Hosts, rank-to-host links and Xid codes in one file's bytes (regexes over the whole block, no line loop)."""
    info = HostInfo()
    dec = lambda b: b.decode("utf-8", "replace")  # noqa: E731
    for m in _NCCL.finditer(data):
        host = dec(m.group(1))
        if _ok(host):
            info.hosts.add(host)
            if file_rank is not None:
                info.rank_host.setdefault(file_rank, host)
    for m in _TORCHRUN.finditer(data):
        host = dec(m.group(1))
        if _ok(host):
            info.hosts.add(host)
            info.rank_host.setdefault(int(m.group(2)), host)
    for m in _SRUN.finditer(data):
        host = dec(m.group(1))
        if _ok(host):
            info.hosts.add(host)
            for r in _ranks(dec(m.group(2))):
                info.rank_host.setdefault(r, host)
    for m in _NODELIST.finditer(data):
        info.hosts.update(h for h in expand_nodelist(dec(m.group(1))) if _ok(h))
    for rx in (_SYSLOG, _NAMED, _NODE_WORD):
        info.hosts.update(h for h in (dec(m.group(1)) for m in rx.finditer(data)) if _ok(h))
    for m in _XID.finditer(data):
        prefix = m.group(1)
        sm = _SYSLOG.match(prefix + b"kernel") if prefix else None
        host = None
        if sm:
            host = dec(sm.group(1))
        else:
            nm = _NODE_WORD.search(prefix)
            host = dec(nm.group(1)) if nm else None
        info.xids.append((host if host and _ok(host) else None, int(m.group(2))))
    return info


def collect(blocks: Iterable[tuple[bytes, int | None]]) -> HostInfo:
    """Merge the host information of several files' bytes."""
    info = HostInfo()
    for data, rank in blocks:
        info.merge(scan_text(data, rank))
    return info


def attribute_xids(info: HostInfo) -> list[tuple[str | None, int]]:
    """Xids with their host: the line's own host, else the run's only host (a one-machine run's dmesg)."""
    only = next(iter(info.hosts)) if len(info.hosts) == 1 else None
    return [(host or only, code) for host, code in info.xids]

"""Log-record and rank prefixes: peel them off a line, keeping the rank and the timestamp.

Formats follow reference/formats.md §0.1 and §2.5 (DeepSpeed, torch logging old and
glog-style, c10 C++ logging old and new, torchtitan, fairseq, HF example scripts,
mmengine, TensorFlow's C++ logging, Python logging defaults, torchrun `--tee` and excepthook rank prefixes), and the
launchers' own prefixes in front of them (Open MPI / horovod tags, Ray and SkyPilot tags, pdsh hosts,
Slurm `srun --label` task ids), and the `> ` of a log pasted inside a Markdown quote.
Timestamps without a zone are taken as UTC; glog-style `MMDD` stamps get their year
from the caller (the file's modification time).
"""

from __future__ import annotations

import re

import polars as pl

_LVL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
# Leading rank prefixes: `[rank3]:`, `[rank3]: `, `[default3]:`, `[Rank 3] `, `[RANK:3] `, Lightning's `[rank: 3] `
# (lightning_fabric rank_prefixed_message); may repeat. torchrun's `[default3]:` names the LOCAL rank (tail_log.py
# `[{role}{local_rank}]:`), so any other rank prefix on the line wins over it (`[default0]:[rank8]:` is rank 8).
# Pasted logs may put a line counter (`[80746] [rank0]:`, LlamaFactory#7396) or indentation before them.
RANK_PREFIX = r"^(?:\s+|\[\d+\] )?\[(?:rank|default|Rank |RANK:|RANK |rank: )(\d+)\]:?\s?"
# Launcher prefixes, outside every other prefix (the launcher relays each child's lines):
# Open MPI `--tag-output` `[1,3]<stderr>:` (job, rank), SageMaker's `[1,mpirank:3,algo-1]<stdout>:`,
# horovodrun `[3]<stdout>:` (rank only), either after an optional ctime stamp (`--timestamp-output`), and Open MPI 5's
# `[prterun-f5n18-100629@1,2]<stdout>: ` (the job's namespace before the job id, a space after; openpmix/prrte#1405).
MPI_PREFIX = r"^(?P<mpi_ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})?\[(?:(?P<solo>\d+)|(?P<ns>[\w.-]+@)?\d+,(?:mpirank:)?(?P<rank>\d+)(?:,[^\]]*)?)\]<std(?:out|err)>:"
# Ray's relayed worker lines: `(pid=3959, ip=172.31.41.219) `, `(RayTrainWorker pid=1193, ip=10.244.4.193) `,
# `(TrainTrainable pid=47169) `, vLLM's `(VllmWorker rank=3 pid=4665) ` (the only form naming a rank), `(raylet) `.
RAY_PREFIX = r"^\((?:(?:[\w.:-]+ )*(?:rank=(\d+) )?pid=\d+(?:, ip=[^)\s]+)?|raylet(?:, ip=[^)\s]+)?)\) ?"
# SkyPilot's per-node tags: `(head, rank=0, pid=18260) `, `(worker1, rank=1, pid=2769, ip=10.100.10.12) `,
# `(worker1, rank=1, ip=10.0.0.2, pid=4321) `, `(setup pid=1234) `, `(task-name, pid=1234) `. Its `rank` is the
# node's index (SKYPILOT_NODE_RANK), not a process rank, so it is cut and not kept.
SKY_PREFIX = r"^\((?:head|worker\d+|[\w.-]+)(?:, | )(?:rank=\d+, )?(?:ip=[^)\s,]+, )?pid=\d+(?:, ip=[^)\s]+)?\) ?"
# pdsh (DeepSpeed's multi-node launcher) puts `host: ` before each remote line. A word before `: ` is
# taken for a host where it has a host's shape (an IPv4 address; a name with a hyphen and a digit:
# `worker-1`, `algo-1`, `ip-172-31-36-1`; exception names never have a hyphen) or where a log-record
# or rank prefix follows it on some line of the frame (`node01: [2024-...`).
PDSH_HOST = r"^([A-Za-z0-9_.-]+): "
HOST_SHAPE = r"^(?:\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w.]*-[\w.-]*\d[\w.-]*)$"
PDSH_PREFIX = rf"{PDSH_HOST}(?:\[\d{{4}}-\d{{2}}-\d{{2}}[ T]\d{{2}}:\d{{2}}:\d{{2}}|\d{{4}}-\d{{2}}-\d{{2}}[ T]\d{{2}}:\d{{2}}:\d{{2}}|\[(?:rank|default|Rank |RANK:)\d|\[[VIWEFC]\d{{3,4}} \d{{2}}:|\[[VIWEFC] \S+:\d+\] |[VIWEFC]\d{{4}} \d{{2}}:\d{{2}}:\d{{2}}\.\d{{6}} )"
# Slurm `srun --label`: the task id, right-aligned to the width of the largest (`3: `, ` 3: `, `12: `).
# The task is a rank only when srun starts one task per GPU (with torchrun per node it is the node),
# so it is cut and not taken for the rank.
SRUN_LABEL = r"^ *(\d{1,5}): "
# A log pasted inside a Markdown quote in an issue thread: `> ` before every line (`> > ` when a reply quotes it).
QUOTE_MARK = r"^(?:> ?)+"
# Ray's log deduplication suffix (Ray >= 2.3): the line stood for several identical lines.
RAY_REPEATED = r" \[repeated \d+x across cluster\]$"
# A log collector's receive time in front of the child's line: `kubectl logs --timestamps` / `docker logs -t`
# (RFC3339Nano, `2024-07-11T12:28:23.200321639Z `), GitHub Actions raw logs (7 fraction digits), Cloud Logging
# pasted with its severity (`ERROR 2025-03-30T23:51:21.303592681Z `), a CloudWatch table pasted with its bars
# (`  | 2024-08-23T22:22:50.870Z | `). The `T` and the zone tell it from a program's own ISO stamp (which keeps
# its record prefix reading, `iso` below). It is true UTC, so it is the line's time even where the child's
# record prefix has a (zone-less, often local) stamp of its own. A stamp followed by ` - ` or ` | ` is the
# program's own record prefix (`iso`): the character after the space is matched but not cut (`pre` is cut).
# `dmesg --time-format iso` has the same shape with a comma before the fraction (`2024-04-29T14:55:41,679700+02:00 `).
COLLECTOR_TS = r"^(?P<pre>(?:\s*\| )?(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) )?(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}))(?: \| | ))(?:[^|-]|$)"
# A zoned stamp followed by a bare level word is the program's own record prefix, not a collector's: Python logging
# with `%(asctime)s %(levelname)-8s %(message)s` and an ISO datefmt (Katib's mxnet-mnist trial, kubeflow/katib#1182:
# `2020-05-08T01:42:02Z INFO     Epoch[0] Train-accuracy=0.918777`). Such a line is left to `iso` (which cuts the
# level too). vLLM's record prefix behind a collector stamp (`...Z INFO 02-22 06:35:35 [utils.py:325] `) has a digit
# after its level and stays a collector's line.
OWN_ZONED_LEVEL = rf"^\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,9}})?(?:Z|[+-]\d{{2}}:?\d{{2}})\s+{_LVL}:?\s+[^\d\s]"
# journald / syslog (`journalctl -u unit`, /var/log/syslog): `Feb 22 06:35:27 host env[2827]: ` (`short` output:
# no year, local time) and `2026-08-15T14:32:10+0000 host kernel: ` (`short-iso`), before everything the unit printed.
JOURNAL = r"^(?:([A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) [\w.-]+ [^\s:\[\]]+(?:\[\d+\])?|(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})) [\w.-]+ (?:kernel|[^\s:\[\]]+\[\d+\])): "
# docker compose's service column: the container name padded to the longest one, then `| ` (`trainer-1  | `,
# `voice-clone  | `). Told from text by how many lines share it (see _peel_paste_and_labels); the replica
# number is not a rank.
COMPOSE_LABEL = r"^([A-Za-z0-9][\w.-]*) +\| "
# `gh run view --log` (GitHub Actions): the job and the step, each followed by a tab, before the runner's raw line
# (`quality (node 24)\tRun npm test\t2026-08-14T05:58:44.3460626Z ##[group]Run npm test`). The continuation lines of
# a multi-line entry have the columns but no stamp. Columns are cut where the same job/step pair is seen before a
# runner stamp on some line of the frame (a tab-separated table row never is).
GH_COLUMNS = r"^([^\t]+\t[^\t]*\t)"
GH_STAMPED = r"^([^\t]+\t[^\t]*\t)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{1,9}Z "
# Anchored tests without captures that every line of these forms passes (cheap gates for the capturing passes).
JOURNAL_QUICK = r"^(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} |\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\S* \S+ \S+: )"
COLLECTOR_QUICK = r"^(?:\s*\| )?(?:[A-Z]+ )?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"
ANY_QUICK = r"^(?:\[\d{1,6}\] |[A-Z][a-z]{2} [ \d]\d \d{2}:|(?:\s*\| )?(?:[A-Z]+ )?\d{4}-\d{2}-\d{2}T)"
_ALNUM = list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
# MPICH / Intel MPI `mpiexec -l` (`-prepend-rank`): `[3] ` before each line of MPI rank 3 (a global rank).
MPICH_LABEL = r"^\[(\d{1,6})\] "

# DeepSpeed `log_dist`'s `[Rank 4] ` (`[Rank -1]` before dist init: no rank) and axolotl's `[RANK:4] `
# at the end of the record prefix's bracket run (the lazy run stops at the first such marker).
DS_RANK_PREFIX = rf"^\[\d{{4}}-\d{{2}}-\d{{2}}[ T]\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d{{1,9}})?\]\s*\[{_LVL}\]\s*(?:\[[^\]]*\]\s*)*?\[(?:Rank |RANK:)(?:-1|(\d+))\]\s?"

# Rank markers inside a message: ProcessGroupNCCL's `[PG 0 Rank 3]`, `[PG ID 0 PG GUID 0(default_pg) Rank 3]` (the
# default group's only: see _PG_RANK).
INNER_RANK = r"\[PG (?:ID )?0 (?:PG GUID \S+ )?Rank (\d+)\]|^\[Rank (\d+)\]"

# (name, pattern with a `ts` group where the prefix has a time, kind of time stamp). `bracket_iso` also
# takes Ray's C++ (spdlog) stamp `[2025-12-07 09:57:19,206 E 393463 393463]` (level, pid, thread id), and
# Megatron's own ` [2025-03-01 10:00:00.123456] iteration ...` (its log string starts with a space).
LOG_PREFIXES: list[tuple[str, str, str]] = [
    # Also SageMaker debugger's `[2020-06-20 21:49:37.529 algo-1:67 INFO utils.py:25] ` (host:pid level file:line).
    # The bracket run after the level never takes a bracket that opens with a quote: that is a Python list the
    # message starts with (DeepSpeed's `['/usr/bin/python3', '-u', ...] exits with return code = -9`).
    ("bracket_iso", rf"^ ?\[(?P<ts>\d{{4}}-\d{{2}}-\d{{2}}[ T]\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d{{1,9}})?)(?: [A-Z] \d+ \d+| [\w.-]+:\d+ {_LVL} [^\]\s]+:\d+)?\]\s*(?:\[{_LVL}\]\s*(?:\[(?:[^\]'\x22][^\]]*)?\]\s*)*|[\w.]+: \[{_LVL}\]\s*)?", "ymd"),
    ("glog", r"^[VIWEFC](?P<ts>\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6}) +\d+ [^\]\s]+:\d+\] ", "md"),
    # TensorFlow's C++ logging (tsl/platform/default/logging.cc, TF 1.x-2.x): `2019-02-11 16:42:08.131786: E
    # tensorflow/stream_executor/cuda/cuda_blas.cc:366] ` (the file may be a Windows path with backslashes).
    ("tf_cpp", r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}): [VIWEF] [^\]\s]+:\d+\] ", "ymd"),
    ("c10_new", r"^\[[VIWEFC](?P<ts>\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6,9}) [^\]\s]+:\d+\] ", "md"),
    ("c10_old", r"^\[[VIWEFC] [^\]\s]+:\d+\] ", ""),
    # NeMo's logger: `[NeMo W 2023-08-17 22:53:03 optimizers:67] ` (the module may be `<frozen importlib`).
    ("nemo", r"^\[NeMo [DIWECF] (?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) [^\]]*:\d+\] ?", "ymd"),
    ("titan", rf"^\[titan\] (?P<ts>\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}},\d{{3}}) - \S+ - {_LVL} - ", "ymd"),
    ("fairseq", rf"^(?P<ts>\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}) \| {_LVL} \| [\w.]+ \| ", "ymd"),
    ("hf_example", rf"^(?P<ts>\d{{2}}/\d{{2}}/\d{{4}} \d{{2}}:\d{{2}}:\d{{2}}) - {_LVL} - \S+ -\s+", "mdy"),
    ("mmengine", rf"^(?P<ts>\d{{2}}/\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}) - \S+ - {_LVL} - ", "md_slash"),
    # vLLM's logger (`%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] `, datefmt `%m-%d %H:%M:%S`; before
    # 2025 without the brackets): `INFO 02-22 06:35:35 [utils.py:325] `, `ERROR 03-30 23:51:21 multiproc_worker_utils.py:243] `.
    ("vllm", rf"^{_LVL} (?P<ts>\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}})(?:\.\d+)? \[?[^\]\s]+:\d+\] ", "md_dash"),
    # Also Python logging's `%(asctime)s - %(name)s - %(levelname)s - ` and loguru's default
    # `2023-11-29 06:51:23.492 | ERROR    | __main__:<module>:224 - `.
    ("iso", rf"^(?P<ts>\d{{4}}-\d{{2}}-\d{{2}}[T ]\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d{{1,9}})?(?:Z|[+-]\d{{2}}:?\d{{2}})?)(?:\s*[|-]\s*|\s+)(?:[\w.]+ - {_LVL} - |\[?{_LVL}\]?\s*[:|-]?\s*(?:[\w.<>-]+:[\w.<>-]+:\d+ - |[\w.]+\s*[:|-]\s+)?)?", "ymd"),
    # DDIM-family diffusion code (`%(levelname)s - %(filename)s - %(asctime)s - %(message)s`, [OBS]
    # JegZheng/truncated-diffusion-probabilistic-models#3): `INFO - diffusion.py - 2023-01-04 22:14:24,391 - `.
    ("level_file_iso", rf"^{_LVL} - [\w.]+ - (?P<ts>\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}},\d{{3}}) - ", "ymd"),
    ("pylogging", rf"^{_LVL}:[\w.-]+:", ""),
    ("colossalai", rf"^colossalai - \S+ - {_LVL}: ", ""),
]

_ALL = "|".join(f"(?:{p})" for _, p, _ in LOG_PREFIXES)
ANY_LOG_PREFIX = re.sub(r"\?P<ts>", "?:", _ALL)


def _ts_expr(raw: pl.Expr, kind: str, year: int) -> pl.Expr:
    """Turn the captured stamp into ISO `YYYY-MM-DD HH:MM:SS.ffffff` text, by stamp kind."""
    if kind == "ymd":
        iso = raw.str.replace("T", " ", literal=True).str.replace(",", ".", literal=True)
    elif kind == "md":
        # c10 logging prints the month without zero padding (`E810` is 10 August).
        raw = raw.str.replace(r"^(\d{3}) ", "0$1 ")
        iso = pl.lit(f"{year}-") + raw.str.slice(0, 2) + pl.lit("-") + raw.str.slice(2, 2) + raw.str.slice(4)
    elif kind == "mdy":
        iso = raw.str.slice(6, 4) + pl.lit("-") + raw.str.slice(0, 2) + pl.lit("-") + raw.str.slice(3, 2) + raw.str.slice(10)
    elif kind in ("md_slash", "md_dash"):
        iso = pl.lit(f"{year}-") + raw.str.slice(0, 2) + pl.lit("-") + raw.str.slice(3, 2) + raw.str.slice(5)
    else:
        return pl.lit(None, pl.String)
    return iso


def _nulls(n: int, dtype: pl.DataType, name: str = "") -> pl.Series:
    """A column of n nulls, built without a Python list of n items."""
    return pl.Series(name, [], dtype=dtype).extend_constant(None, n)


_ZONE_RE = r"(?:Z|[+-]\d{2}:?\d{2})$"


def parse_iso(iso: pl.Expr) -> pl.Expr:
    """ISO-ish text (optional fraction of up to 9 digits, optional Z or ±hh:mm) to UTC microseconds."""
    offset = iso.str.extract(r"([+-]\d{2}):?(\d{2})$", 1).cast(pl.Int64, strict=False)
    offset_m = iso.str.extract(r"[+-]\d{2}:?(\d{2})$", 1).cast(pl.Int64, strict=False)
    base = iso.str.replace(_ZONE_RE, "").str.replace(r"(\.\d{6})\d+$", "$1")
    naive = base.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    naive = pl.coalesce(naive, base.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"))
    minutes = offset * 60 + offset.sign() * offset_m
    shifted = naive - pl.duration(minutes=minutes.fill_null(0))
    return shifted.dt.replace_time_zone("UTC")


def _parse_iso_series(iso: pl.Series) -> pl.Series:
    """`parse_iso` on a materialised column, skipping the zone and long-fraction work when no row needs it."""
    if iso.null_count() == iso.len():
        return _nulls(iso.len(), pl.Datetime("us", "UTC"), iso.name)
    if iso.str.contains(_ZONE_RE).any():
        if iso.str.contains(r"[+-]\d{2}:?\d{2}$").any():
            return iso.to_frame("iso").select(parse_iso(pl.col("iso"))).to_series().alias(iso.name)
        # `Z` only (collectors' RFC3339 stamps): already UTC, the naive parse below reads the rest.
        iso = iso.str.strip_suffix("Z")
    # No zone suffix anywhere: parse_iso reduces to the naive parse (same formats, same fallbacks).
    base = iso.str.replace(r"(\.\d{6})\d+$", "$1") if iso.str.contains(r"\.\d{7}").any() else iso
    naive = base.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    missing = naive.is_null() & base.is_not_null()
    if missing.any():
        naive = pl.coalesce(naive, base.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"))
    return naive.dt.replace_time_zone("UTC").alias(iso.name)


# For each prefix, a regex whose group 1 is exactly the `ts` group of the full pattern whenever
# the full pattern matches: it stops right after the stamp, at a character the stamp cannot
# contain, so no backtracking of the rest could give the group another extent. Capturing on
# this short span costs a fraction of capturing the whole prefix. (`iso` is not listed: its
# optional zone can be given back to its separator, so it is captured with the full pattern.)
_TS_NARROW = {
    "bracket_iso": r"^ ?\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)[ \]]",
    "glog": r"^[VIWEFC](\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6}) ",
    "tf_cpp": r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}):",
    "c10_new": r"^\[[VIWEFC](\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6,9}) ",
    "nemo": r"^\[NeMo [DIWECF] (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ",
    "titan": r"^\[titan\] (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) ",
    "fairseq": r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ",
    "hf_example": r"^(\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2}) ",
    "mmengine": r"^(\d{2}/\d{2} \d{2}:\d{2}:\d{2}) ",
    "vllm": r"^[A-Z]+ (\d{2}-\d{2} \d{2}:\d{2}:\d{2})[ .]",
}
# INNER_RANK without its second alternative (`^\[Rank N\]`), which RANK_PREFIX always claims first, and for the
# default process group only. ProcessGroupNCCL's logPrefix is `[PG {uid_} Rank {rank_}] ` (2.2-2.3) and
# `[PG ID {local_id_} PG GUID {pg_uid_}({pg_desc_}) Rank {rank_}] ` (2.4+): `rank_` is the rank within that group,
# and the id counts the process groups the process made, so 0 is the default (world) group, whose `groupRanks()` is
# 0..size-1. In `[PG ID 1 PG GUID 1 Rank 2]` (ROCm/ROCm#4021) or `[PG 1 Rank 5]` (deepseek-ai/DeepEP#106) the number
# is a sub-group rank, not the global rank: such a marker names no rank of the line.
_PG_RANK = r"\[PG (?:ID )?0 (?:PG GUID \S+ )?Rank (\d+)\]"


def _peel_rank(msg: pl.Series, ranks: list[pl.Series], local: list[pl.Series]) -> tuple[pl.Series, bool]:
    """Remove one leading rank prefix where there is one, noting its rank; False when no row had one.

    torchrun's `[defaultN]:` rows go to `local` (a local rank), the others to `ranks`.
    """
    found = msg.str.extract(RANK_PREFIX, 1)
    if found.null_count() == found.len():
        return msg, False
    found = found.cast(pl.Int32, strict=False)
    is_local = msg.str.starts_with("[default")
    n_local = is_local.sum()
    if n_local == 0:
        ranks.append(found)
    elif n_local == msg.len():
        local.append(found)
    else:
        none = _nulls(msg.len(), pl.Int32)
        local.append(found.zip_with(is_local, none))
        ranks.append(none.zip_with(is_local, found))
    return msg.str.replace(RANK_PREFIX, ""), True


# The characters a line can start with for each time-stamped prefix to match (a prefix whose
# first character is absent from a frame is not tried). A prefix not listed is always tried.
_FIRST_CHARS = {
    "bracket_iso": "[ ",
    "glog": "VIWEFC",
    "tf_cpp": "12",
    "c10_new": "[",
    "nemo": "[",
    "titan": "[",
    "fairseq": "0123456789",
    "hf_example": "0123456789",
    "mmengine": "0123456789",
    "vllm": "DIWECF",
    "iso": "0123456789",
}


def _stamps(msg: pl.Series, year: int) -> pl.Series:
    """Each line's time stamp from the first log-record prefix (in LOG_PREFIXES order) that matches it.

    A prefix is tried only on the lines no earlier prefix claimed, and stamps are converted and
    parsed only for the lines that have one.
    """
    n = msg.len()
    firsts = set(msg.str.slice(0, 1).unique().drop_nulls().to_list())
    rest_idx: pl.Series | None = None  # rows not yet claimed (None: all rows)
    rest = msg
    idx_parts: list[pl.Series] = []
    iso_parts: list[pl.Series] = []
    for name, pattern, kind in LOG_PREFIXES:
        if not kind or rest.len() == 0:
            continue
        chars = _FIRST_CHARS.get(name)
        if chars is not None and not firsts.intersection(chars):
            continue
        hit = rest.str.contains(pattern)
        if not hit.any():
            continue
        pos = hit.arg_true()
        raw = rest.gather(pos).str.extract(_TS_NARROW.get(name) or pattern, 1)
        iso_parts.append(pl.select(_ts_expr(pl.lit(raw), kind, year)).to_series())
        idx_parts.append(pos if rest_idx is None else rest_idx.gather(pos))
        keep = ~hit
        rest_idx = keep.arg_true() if rest_idx is None else rest_idx.filter(keep)
        rest = rest.filter(keep)
    ts = _nulls(n, pl.Datetime("us", "UTC"), "ts")
    if idx_parts:
        idx = pl.concat(idx_parts)
        ts = ts.scatter(idx, _parse_iso_series(pl.concat(iso_parts).alias("iso")))
    return ts


def unquote(msg: pl.Series) -> pl.Series:
    """The lines without their Markdown quote marks, when most lines of the frame carry one (a quoted paste)."""
    if msg.len() and msg.str.starts_with(">").sum() * 5 >= msg.len() * 3:
        return msg.str.replace(QUOTE_MARK, "")
    return msg


def _peel_paste_and_labels(msg: pl.Series, year: int, lines: pl.Series | None = None) -> tuple[pl.Series, pl.Series | None, pl.Series | None]:
    """Remove quote marks, collector columns (compose name, receive time, journald) and task labels.

    Returns the text, the collector's time stamp (UTC) and the MPI rank of `mpiexec -l` labels, where found.
    A quote mark, a compose name or a task label is told from a line's own text (`> `, `trainer-1  | `,
    `12: `, `[3] `) only by how many lines share it: on most lines of the frame, each value on several
    lines (a hand-printed `120: loss 2.31` has a new number on every line). Each form is looked for only
    when some line starts with a character it can start with.
    """
    n = msg.len()
    if n == 0:
        return msg, None, None
    msg = unquote(msg)
    if msg.str.contains("\t20", literal=True).any():  # a tab right before a stamp's year (a cheap literal gate)
        proven = msg.str.extract(GH_STAMPED, 1).drop_nulls().unique()
        if proven.len():
            cols = msg.str.extract(GH_COLUMNS, 1)
            is_gh = cols.is_in(proven.implode()).fill_null(False)
            msg = msg.zip_with(~is_gh, msg.str.slice(cols.str.len_chars().fill_null(0)))
    first = msg.str.slice(0, 1)
    stamp: pl.Series | None = None
    rank: pl.Series | None = None
    # A compose name starts with a letter or digit on at least half the lines (the labelled ones), and compose
    # pads every name to one width: the bar is in the same column on every labelled line.
    if (first.is_in(_ALNUM).sum() * 2 >= n and _labels(msg, COMPOSE_LABEL, lines=lines) is not None
            and msg.str.extract(r"^([A-Za-z0-9][\w.-]* +)\| ", 1).str.len_chars().drop_nulls().n_unique() == 1):
        msg = msg.str.replace(COMPOSE_LABEL, "")
        first = msg.str.slice(0, 1)
    # One cheap anchored test (no captures) for the three forms below decides whether any of them is tried.
    maybe = msg.str.contains(ANY_QUICK).any()
    if maybe and msg.str.contains(JOURNAL_QUICK).any():
        groups = msg.str.extract_groups(JOURNAL)
        bsd, iso = groups.struct.field("1"), groups.struct.field("2")
        if bsd.is_not_null().any() or iso.is_not_null().any():
            # `short` output has no year and pads the day with a space (`Mar  1`): the caller's year is used.
            old = bsd.str.replace("  ", " 0", literal=True)
            old = (pl.lit(f"{year} ") + pl.lit(old)).str.to_datetime("%Y %b %d %H:%M:%S", strict=False, time_unit="us")
            old = pl.select(old.dt.replace_time_zone("UTC")).to_series()
            stamp = pl.select(pl.coalesce(_parse_iso_series(iso.str.replace("T", " ", literal=True)), old)).to_series()
            msg = msg.str.replace(JOURNAL, "")
    if maybe and msg.str.contains(COLLECTOR_QUICK).any():
        # One capturing pass gives the stamp and the prefix to cut (its length: a slice, not a second regex pass).
        groups = msg.str.extract_groups(COLLECTOR_TS)
        found, pre = groups.struct.field("ts"), groups.struct.field("pre")
        if found.is_not_null().any():
            own = msg.str.contains(OWN_ZONED_LEVEL)
            if own.any():
                found = found.zip_with(~own, _nulls(n, pl.String))
                pre = pre.zip_with(~own, _nulls(n, pl.String))
        if found.is_not_null().any():
            outer = _parse_iso_series(found.str.replace("T", " ", literal=True).str.replace(",", ".", literal=True))
            stamp = outer if stamp is None else pl.select(pl.coalesce(stamp, outer)).to_series()
            msg = msg.str.slice(pre.str.len_chars().fill_null(0))
            first = msg.str.slice(0, 1)
    if first.is_in(list(" 0123456789")).sum() * 2 >= n and _labels(msg, SRUN_LABEL, lines=lines) is not None:
        # srun's task id: a rank only when srun starts one task per GPU (with torchrun per node it is the
        # node), so it is cut and not kept.
        msg = msg.str.replace(SRUN_LABEL, "")
    elif maybe and (first == "[").sum() * 2 >= n and msg.str.contains(MPICH_LABEL).any():
        # MPI ranks print a line or two each where a paste's line counter never repeats: one repeated label is enough.
        labels = _labels(msg, MPICH_LABEL, per_label=1.01, lines=lines)
        if labels is not None:
            rank = labels.cast(pl.Int32, strict=False)
            msg = msg.str.replace(MPICH_LABEL, "")
    return msg, stamp, rank


def _labels(msg: pl.Series, pattern: str, per_label: float = 2, lines: pl.Series | None = None) -> pl.Series | None:
    """Group 1 of `pattern` on each row when the frame is labelled by it (see _peel_paste_and_labels), else None.

    Labelled: at least half the rows, and on average at least `per_label` rows per distinct label. Rows are
    counted once per physical line (`lines`): the `\r` segments of a line carry copies of its prefix
    (parsers/lines.py), which would make a paste's line counter on a tqdm line look like a repeated label.
    """
    labels = msg.str.extract(pattern, 1)
    counted, total = labels, msg.len()
    if lines is not None and lines.len() > 1 and lines.n_unique() < lines.len():
        firsts = lines.is_first_distinct()
        counted, total = labels.filter(firsts), int(firsts.sum())
    labelled = counted.is_not_null().sum()
    if labelled * 2 >= total and labelled >= 2 and labelled >= per_label * counted.drop_nulls().n_unique():
        return labels
    return None


def _peel_launchers(msg: pl.Series, year: int, lines: pl.Series | None = None) -> tuple[pl.Series, pl.Series | None, pl.Series | None, pl.Series | None]:
    """Remove collector, Ray/SkyPilot, MPI/horovod and pdsh prefixes.

    Also returns the rank they name, the collector's stamp (which wins over the child's) and Open MPI's
    ctime stamp (which the child's own wins over), where found. MPI and Ray forms are looked for only
    when a cheap literal test says a row may hold them; pdsh's only on the rows that start with `word: `.
    """
    stamp: pl.Series | None = None
    msg, outer, rank = _peel_paste_and_labels(msg, year, lines)
    # Ray and SkyPilot relay other launchers' output (mpirun on a SkyPilot head): their tags are outermost.
    if msg.str.starts_with("(").any():
        found = msg.str.extract(RAY_PREFIX, 1).cast(pl.Int32, strict=False)
        if found.is_not_null().any():
            rank = found if rank is None else pl.select(pl.coalesce(found, rank)).to_series()
        msg = msg.str.replace(RAY_PREFIX, "")
        if msg.str.contains(", pid=", literal=True).any() or msg.str.contains(", rank=", literal=True).any():
            msg = msg.str.replace(SKY_PREFIX, "")
        if msg.str.contains("across cluster]", literal=True).any():
            msg = msg.str.replace(RAY_REPEATED, "")
    if msg.str.contains("]<std", literal=True).any():
        groups = msg.str.extract_groups(MPI_PREFIX)
        hit = groups.struct.field("solo").is_not_null() | groups.struct.field("rank").is_not_null()
        if hit.any():
            mpi_rank = pl.select(pl.coalesce(groups.struct.field("rank"), groups.struct.field("solo"))).to_series()
            mpi_rank = mpi_rank.cast(pl.Int32, strict=False)
            rank = mpi_rank if rank is None else pl.select(pl.coalesce(mpi_rank, rank)).to_series()
            raw = groups.struct.field("mpi_ts")
            if raw.is_not_null().any():
                # ctime: `Thu Jan 23 11:55:50 2025`, the day padded with a space (`Thu Jan  2 ...`).
                stamp = raw.str.replace("  ", " 0", literal=True).str.to_datetime(
                    "%a %b %d %H:%M:%S %Y", strict=False, time_unit="us").dt.replace_time_zone("UTC")
            msg = msg.str.replace(MPI_PREFIX, "")
            ns = groups.struct.field("ns")
            if ns.is_not_null().any():
                # Open MPI 5 (PRRTE) puts a space after its tag.
                msg = msg.zip_with(ns.is_null(), msg.str.strip_prefix(" "))
    word = msg.str.extract(PDSH_HOST, 1)
    if word.is_not_null().any():
        # Only the rows that start with `word: ` are looked at further.
        pos = word.is_not_null().arg_true()
        sub, words = msg.gather(pos), word.gather(pos)
        hosts = sub.str.extract(PDSH_PREFIX, 1).drop_nulls().unique()
        # Every line of a host loses the prefix, not only those with a record prefix after it.
        is_host = words.str.contains(HOST_SHAPE) | words.is_in(hosts.implode())
        if is_host.any():
            at = pos.filter(is_host)
            msg = msg.clone().scatter(at, sub.filter(is_host).str.slice(words.filter(is_host).str.len_chars() + 2))
    return msg, rank, outer, stamp


def split_prefixes(df: pl.DataFrame, year: int) -> pl.DataFrame:
    """Add `rank`, `ts` and `msg` (the text without its prefixes) to a frame with `text`.

    Work is per column, and a step no row of the frame needs is skipped (a file without
    rank prefixes never pays for them), so the cost follows what the lines contain.
    """
    msg = df.get_column("text")
    ranks: list[pl.Series] = []
    local: list[pl.Series] = []  # torchrun `[defaultN]:` (local ranks): used only where nothing else names one
    # Launchers relay each child's lines with their own prefix in front of everything else.
    lines = df.get_column("line") if "line" in df.columns else None
    msg, launcher_rank, outer_ts, launcher_ts = _peel_launchers(msg, year, lines)
    # Rank prefixes may stack (`[default0]:[rank0]: `), so peel twice.
    msg, more = _peel_rank(msg, ranks, local)
    if more:
        msg, _ = _peel_rank(msg, ranks, local)
    ts = _stamps(msg, year)
    # The collector's UTC receive time first, then the child's own stamp, then mpirun's ctime.
    parts = [t for t in (outer_ts, ts, launcher_ts) if t is not None]
    if len(parts) > 1:
        ts = pl.select(pl.coalesce(parts)).to_series().alias("ts")
    stripped = msg.str.replace(ANY_LOG_PREFIX, "")
    if msg.str.contains("] [R", literal=True).any():
        # DeepSpeed `log_dist` / axolotl put `[Rank 4]` / `[RANK:4]` after the record prefix's bracket
        # run, which would swallow it: those rows are cut right after the rank marker instead.
        in_run = msg.str.contains(DS_RANK_PREFIX)
        if in_run.any():
            # Captured and cut on the matching rows only (the capture is the costly part).
            pos = in_run.arg_true()
            sub = msg.gather(pos)
            none = _nulls(msg.len(), pl.Int32)
            ranks.append(none.scatter(pos, sub.str.extract(DS_RANK_PREFIX, 1).cast(pl.Int32, strict=False)))
            stripped = stripped.clone().scatter(pos, sub.str.replace(DS_RANK_PREFIX, ""))
    msg = stripped
    # After the record prefix: another rank prefix, or ProcessGroupNCCL's rank marker.
    pg = msg.str.extract(_PG_RANK, 1).cast(pl.Int32, strict=False) if msg.str.contains("[PG ", literal=True).any() else None
    msg, _ = _peel_rank(msg, ranks, local)
    if pg is not None:
        ranks.append(pg)
    if launcher_rank is not None:
        ranks.append(launcher_rank)
    ranks.extend(local)
    if ranks:
        rank = pl.select(pl.coalesce(ranks)).to_series() if len(ranks) > 1 else ranks[0]
    else:
        rank = _nulls(msg.len(), pl.Int32)
    return df.with_columns(msg.alias("msg"), rank.alias("rank"), ts.alias("ts"))


# File names that carry a rank: rank3.log, node1-rank12.out, DeepSpeed `--enable_each_rank_log`'s
# `20240101120000_rank3.log` (global rank), worker_3.err, torchrun --log-dir `attempt_0/3/stderr.log`.
# Not ranks: `local_rank3` (a local rank); `worker-1` with a hyphen (a host or pod: DeepSpeed hostfiles name
# nodes `worker-0`, `worker-1`; Kubeflow pods are `<job>-worker-N`); Slurm's `slurm-1234_3.out` (`%A_%a`: the
# array task index) and any other bare number (`run_2024.log`, `llama-7b.log`, `step100.log`).
# torchrun's `attempt_N/<k>/` directory is the LOCAL rank (torch/distributed/elastic/multiprocessing/api.py
# `os.path.join(attempt_log_dir, str(local_rank))`): it equals the global rank on one node only, so it is a
# fallback that any rank prefix inside the file overrides (textlog fills only rows without a rank).
_PATH_RANK = [
    re.compile(r"(?<![a-z])(?<!local_)(?<!local-)(?:global_?)?rank[_-]?(\d+)(?![0-9])", re.I),
    re.compile(r"(?<![a-z])(?:worker_?|(?:proc|process|gpu|device)[_-]?)(\d+)(?![0-9])", re.I),
    re.compile(r"attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$"),
    re.compile(r"(?:^|/)(?:default|trainer)(\d+)[./]"),
]


def rank_from_path(rel: str) -> int | None:
    """The rank a file belongs to, from its path, or None."""
    name = rel.replace("\\", "/")
    base = name.rsplit("/", 1)[-1]
    for pattern in _PATH_RANK:
        m = pattern.search(base) or pattern.search(name)
        if m:
            return int(m.group(1))
    return None

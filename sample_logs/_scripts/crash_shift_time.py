"""Shift every timestamp of a recorded run folder by one constant, so an anchor line reads a chosen time.

Only the clock moves: order, gaps and sub-second digits are kept. Forms handled: `YYYY-MM-DD HH:MM:SS`
(with `,mmm`/`.ffffff`), `MM/DD/YYYY HH:MM:SS`, glog-style `L[M]MDD HH:MM:SS.f` (torch logging and c10,
month zero-padded or not, as recorded), torchrun's `time      : YYYY-MM-DD_HH:MM:SS`, and error.json's
epoch-seconds `"timestamp": "N"`.

usage: crash_shift_time.py FOLDER --anchor FILE --anchor-pattern TEXT --to 'YYYY-MM-DD HH:MM:SS'
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from pathlib import Path

ISO = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})([ _T])(\d{2}):(\d{2}):(\d{2})(?!\d)")
US = re.compile(r"(?<!\d)(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2})(?!\d)")
GLOG = re.compile(r"(?:(?<=^)|(?<=\[)|(?<=\]:))([IWEFV])(\d{3,4}) (\d{2}):(\d{2}):(\d{2})(?=\.\d)", re.M)
EPOCH = re.compile(r'("timestamp": ")(\d{9,10})(")')


def shift_text(text: str, delta: dt.timedelta, year: int) -> str:
    def iso(m: re.Match) -> str:
        t = dt.datetime(*map(int, m.group(1, 2, 3)), *map(int, m.group(5, 6, 7))) + delta
        return t.strftime(f"%Y-%m-%d{m.group(4)}%H:%M:%S")

    def us(m: re.Match) -> str:
        t = dt.datetime(int(m.group(3)), int(m.group(1)), int(m.group(2)), *map(int, m.group(4, 5, 6))) + delta
        return t.strftime("%m/%d/%Y %H:%M:%S")

    def glog(m: re.Match) -> str:
        md = m.group(2)
        month, day = int(md[:-2]), int(md[-2:])
        t = dt.datetime(year, month, day, *map(int, m.group(3, 4, 5))) + delta
        mm = f"{t.month:02d}" if len(md) == 4 and md[0] == "0" else str(t.month)
        return f"{m.group(1)}{mm}{t.day:02d} {t:%H:%M:%S}"

    def epoch(m: re.Match) -> str:
        return f"{m.group(1)}{int(m.group(2)) + int(delta.total_seconds())}{m.group(3)}"

    text = ISO.sub(iso, text)
    text = US.sub(us, text)
    text = GLOG.sub(glog, text)
    return EPOCH.sub(epoch, text)


def anchor_time(path: Path, pattern: str) -> dt.datetime:
    for line in path.read_text(errors="replace").splitlines():
        if pattern in line:
            m = ISO.search(line)
            if m:
                return dt.datetime(*map(int, m.group(1, 2, 3)), *map(int, m.group(5, 6, 7)))
            m = US.search(line)
            if m:
                return dt.datetime(int(m.group(3)), int(m.group(1)), int(m.group(2)), *map(int, m.group(4, 5, 6)))
    raise SystemExit(f"anchor {pattern!r} with a timestamp not found in {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--anchor", required=True)
    ap.add_argument("--anchor-pattern", required=True)
    ap.add_argument("--to", required=True)
    a = ap.parse_args()
    target = dt.datetime.strptime(a.to, "%Y-%m-%d %H:%M:%S")
    delta = target - anchor_time(a.folder / a.anchor, a.anchor_pattern)
    for p in sorted(a.folder.rglob("*")):
        if p.is_file():
            p.write_text(shift_text(p.read_text(errors="surrogateescape"), delta, target.year), errors="surrogateescape")
    print(f"shifted {a.folder} by {delta}")


if __name__ == "__main__":
    main()

"""procps `free` tables pasted in a log become host memory samples, and memory-leak reads a short series of them.

Each table is a real shape (URL beside it); the leak cases repeat a shape with the numbers of a sampled run.
"""

from __future__ import annotations

from pathlib import Path

from forensics.parsers.free_table import unit_of

from tests.metrics_util import rows
from tests.test_short_series_rules import findings, first

NEW_HEADER = "               total        used        free      shared  buff/cache   available"


def table(used: int, total: int = 65, header: str = NEW_HEADER) -> str:
    """One `free -g` table (procps-ng 3.3.10+ columns), as google/automl#224 pasted four of them."""
    return f"{header}\nMem:      {total:>10}  {used:>10}  {total - used - 44:>10}           0          44  {total - used - 2:>10}\nSwap:             2           0           2\n\n"


def test_free_m_new_columns(tmp_path: Path):
    # https://github.com/fabriziosalmi/proxmox-lxc-autoscale/pull/18 (`free -m`)
    text = (NEW_HEADER + "\nMem:           31966       10870        9147        1572       14146       21095\n"
            "Swap:           2047         137        1910\n")
    assert rows(tmp_path, text) == [(None, "host_mem_total_mib", 31966.0), (None, "host_mem_used_mib", 10870.0)]


def test_old_columns_take_used_without_the_page_cache(tmp_path: Path):
    # https://github.com/ultrabug/py3status/pull/301 (procps-ng 3.3.9 `free -m`: Mem: used counts buffers and cache)
    text = ("$ free -m\n"
            "             total       used       free     shared    buffers     cached\n"
            "Mem:          4045       3761        284        145        220       1991\n"
            "-/+ buffers/cache:       1548       2497\n"
            "Swap:         7632         74       7557\n")
    assert rows(tmp_path, text) == [(None, "host_mem_total_mib", 4045.0), (None, "host_mem_used_mib", 1548.0)]


def test_human_units_and_wide_columns(tmp_path: Path):
    # https://github.com/RocketChat/Rocket.Chat/issues/15011 (`free -mh`) and Wang-Kai/cherish-today#64 (`free -hwt`)
    text = (NEW_HEADER + "\nMem:           7.8G        5.2G        155M        5.6M        2.5G        3.0G\n"
            "Swap:            0B          0B          0B\n\n"
            "              total        used        free      shared     buffers       cache   available\n"
            "Mem:           7.6G        2.0G        3.3G        384M          0B        2.3G        4.9G\n"
            "Swap:          511M        114M        397M\nTotal:         8.1G        2.1G        3.7G\n")
    got = rows(tmp_path, text)
    assert [(n, round(v, 1)) for _, n, v in got] == [("host_mem_total_mib", 7987.2), ("host_mem_used_mib", 5324.8),
                                                     ("host_mem_total_mib", 7782.4), ("host_mem_used_mib", 2048.0)]


def test_bare_numbers_take_the_command_option_else_the_magnitude():
    assert unit_of("$ free --giga -s 1800", 65) == 1e9 / 2**20
    assert unit_of("free -g", 31) == 1024.0
    # No command in the paste: free's default KiB for millions, MiB for thousands, GiB for a two-digit total.
    assert unit_of(None, 65_000_000) == 1 / 1024 and unit_of(None, 31966) == 1.0 and unit_of(None, 65) == 1024.0


def test_mem_rows_outside_a_free_table_give_nothing(tmp_path: Path):
    # Near miss: a `Mem:` line of another tool (top's summary) and prose, no free header above them.
    text = ("MiB Mem :  15866.4 total,   1196.3 free,   9822.2 used,   4847.9 buff/cache\n"
            "Mem: 16 GB, used 10 GB\n")
    assert rows(tmp_path, text) == []


def test_host_memory_rising_at_every_sample_is_a_leak(tmp_path: Path):
    # google/automl#224: `free --giga -s 1800` printed as training ran, used 1 -> 6 -> 8 -> 10 until the kill.
    text = "".join(table(u) for u in (1, 6, 8, 10))
    assert first(tmp_path, text) == "memory-leak"


def test_flat_or_wobbling_host_memory_is_quiet(tmp_path: Path):
    assert "memory-leak" not in findings(tmp_path, "".join(table(u) for u in (10, 10, 11, 10, 10)))
    assert "memory-leak" not in findings(tmp_path / "w", "".join(table(u) for u in (6, 8, 7, 9)))


def test_a_small_rise_at_every_sample_is_quiet(tmp_path: Path):
    # Near miss: used creeps 20 -> 23 GB over four samples (page tables, a growing log): +15% is no blatant leak.
    assert "memory-leak" not in findings(tmp_path, "".join(table(u) for u in (20, 21, 22, 23)))

"""procps `free` tables pasted in a log (header, `Mem:` and `Swap:` rows) into host memory samples (MiB)."""

from __future__ import annotations

import polars as pl

# The header of procps-ng free(1): 3.3.10+ (`total used free shared buff/cache available`, `-w` splits
# buff/cache into `buffers cache`) and the older one (`total used free shared buffers cached`), whose `Mem:`
# `used` still counts the page cache: its `-/+ buffers/cache:` row holds the used memory proper.
HEADER = r"^\s*total\s+used\s+free\s+shared\s+(?:buff/cache|buffers\s+cached?)(?:\s+available)?\s*$"
# A value: a number, with `-h`'s unit suffix (`7.6G`, `62Gi`, `384M`, `0B`; a decimal comma in some locales).
_VAL = r"(\d+(?:[.,]\d+)?)([KMGTP]i?|B)?"
MEM_ROW = rf"^\s*Mem:\s+{_VAL}\s+{_VAL}\b"
OLD_USED = rf"^\s*-/\+ buffers/cache:\s+{_VAL}\b"
# The command line above a table (`$ free -g`, `free --giga -s 1800`): its unit option.
COMMAND = r"(?:^|[\s$#>])free((?:\s+-{1,2}[a-z]+(?:[\s=]+\d+)?)+)\s*$"
# MiB per printed unit: `-h` suffixes, then options (`--giga` is 10^9 bytes, `-g`/`--gibi` 2^30).
SUFFIX_MIB = {"B": 2.0**-20, "K": 2.0**-10, "Ki": 2.0**-10, "M": 1.0, "Mi": 1.0, "G": 1024.0, "Gi": 1024.0,
              "T": 2.0**20, "Ti": 2.0**20, "P": 2.0**30, "Pi": 2.0**30}
OPTION_MIB = {"-b": 2.0**-20, "--bytes": 2.0**-20, "-k": 2.0**-10, "--kibi": 2.0**-10, "--kilo": 1e3 / 2**20,
              "-m": 1.0, "--mebi": 1.0, "--mega": 1e6 / 2**20, "-g": 1024.0, "--gibi": 1024.0, "--giga": 1e9 / 2**20,
              "-t": 2.0**20, "--tebi": 2.0**20, "--tera": 1e12 / 2**20}
SCHEMA = {"line": pl.Int64, "step": pl.Int64, "name": pl.String, "value": pl.Float64, "source": pl.String}


def unit_of(command: str | None, total: float) -> float:
    """MiB per bare printed number: the command's option when the paste shows it; else free's default (KiB) for a
    total of a million or more, MiB for thousands, GiB below (a host's RAM: KiB, MiB and GiB give those magnitudes)."""
    for opt in (command or "").split():
        if opt in OPTION_MIB:
            return OPTION_MIB[opt]
    return 2.0**-10 if total >= 1e6 else 1.0 if total >= 1e3 else 1024.0


def from_log(frame: pl.DataFrame, state: dict) -> pl.DataFrame:
    """`host_mem_used_mib` and `host_mem_total_mib` rows, one per `Mem:` row right under a free header."""
    # One literal scan per frame: the header holds `free ` too, so every line read below is among these.
    hits = frame.filter(pl.col("text").str.contains_any(["Mem:", "buffers/cache:", "free "]))
    if hits.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    cmd = hits.filter(pl.col("text").str.contains(COMMAND))
    if cmd.height:
        state["free_command"] = cmd.item(-1, "text")
    heads = hits.filter(pl.col("text").str.contains(HEADER)).select("line")
    if heads.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    mem = hits.filter(pl.col("text").str.contains(MEM_ROW)).select(
        "line", *(pl.col("text").str.extract(MEM_ROW, i).alias(n) for i, n in enumerate(["t", "tu", "u", "uu"], 1)))
    # A `Mem:` row counts only right under a header (a sentence or another tool's `Mem:` gives nothing).
    mem = mem.join(heads.with_columns((pl.col("line") + 1).alias("line")), on="line", how="semi")
    if mem.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    old = hits.filter(pl.col("text").str.contains(OLD_USED)).select(
        (pl.col("line") - 1).alias("line"), pl.col("text").str.extract(OLD_USED, 1).alias("ou"), pl.col("text").str.extract(OLD_USED, 2).alias("ouu"))
    mem = mem.join(old, on="line", how="left").with_columns(pl.coalesce("ou", "u").alias("u"), pl.coalesce("ouu", "uu").alias("uu"))
    total = _num(pl.col("t"))
    first_total = float(mem.select(total).item(0, 0))
    bare = unit_of(state.get("free_command"), first_total)
    scale = [pl.col(u).replace_strict(SUFFIX_MIB, default=None, return_dtype=pl.Float64).fill_null(bare) for u in ("tu", "uu")]
    out = mem.select(
        "line",
        (_num(pl.col("u")) * scale[1]).alias("host_mem_used_mib"),
        (total * scale[0]).alias("host_mem_total_mib"),
    ).unpivot(index="line", variable_name="name", value_name="value")
    return out.select("line", pl.lit(None, pl.Int64).alias("step"), "name", "value", pl.lit("free").alias("source")).cast(SCHEMA).sort("line", "name")


def _num(expr: pl.Expr) -> pl.Expr:
    return expr.str.replace(",", ".", literal=True).cast(pl.Float64, strict=False)

"""`nvidia-smi -q -x` XML into `gpu` / `gpu_procs`: old and new DTDs, MIG devices, concatenated documents.

Element names follow formats.md §3.5 and the corpus files (DTD v12, driver 535, A100 with MIG;
DTD v13, driver 590): `clocks_event_reasons` / older `clocks_throttle_reasons`,
`gpu_power_readings` / older `power_readings`, Ampere+ SRAM/DRAM ECC counters and pre-Ampere
`single_bit` / `double_bit`. `nvidia-smi -q -x -l N` writes one document per sample; each
`<nvidia_smi_log>` element is one sample.

Hardening: the XML prolog is never given to the parser. Only the `<nvidia_smi_log>…</…>`
element text is parsed, with defusedxml's expat parser (DTDs, entity declarations and external
entities refused), so an external DTD (`<!DOCTYPE … SYSTEM "nvsmi_device_v12.dtd">`, which every
real file has) is never fetched and no DTD can declare entities. A file whose text declares entities
or an internal DTD subset (`<!ENTITY`, `<!DOCTYPE x [`) is refused outright: nvidia-smi never writes
one, and entity expansion is the classic XML bomb. Undefined entity references then fail to parse.
Budgets: a document is found in linear time, may not grow past MAX_DOC_CHARS without closing, and
a long one may not nest deeper than MAX_DEPTH.
"""

from __future__ import annotations

import codecs
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import defusedxml
import defusedxml.ElementTree as SafeET
import polars as pl
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.nvsmi_csv import sink_result

OPEN = "<nvidia_smi_log"
CLOSE_RE = re.compile(r"</nvidia_smi_log\s*>")
# One document is one sample (~10-200 KB with 8 GPUs and their processes): far larger is not nvidia-smi.
MAX_DOC_CHARS = 64 * 1024 * 1024
MAX_DEPTH = 64
DEPTH_CHECK_CHARS = 1024 * 1024
TAG_RE = re.compile(r"<(/?)[A-Za-z_][^<>]*?(/?)>")
UNSAFE_RE = re.compile(r"<!ENTITY|<!DOCTYPE[^>\[]*\[", re.I)


class UnsafeXML(ValueError):
    """The document declares entities or an internal DTD subset."""


def _t(el: ET.Element | None, *paths: str) -> str | None:
    """Text of the first path that exists under `el`."""
    if el is None:
        return None
    for path in paths:
        node = el.find(path)
        if node is not None and node.text is not None:
            return node.text.strip()
    return None


def _sum_counts(el: ET.Element | None, names: tuple[str, ...]) -> str | None:
    """Sum of the integer children `names` of `el` (None when none is a number)."""
    if el is None:
        return None
    total, seen = 0, False
    for name in names:
        v = _t(el, name)
        if v is not None and re.fullmatch(r"\d+", v):
            total += int(v)
            seen = True
    return str(total) if seen else None


UNCORR = ("sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable",
          "double_bit/total")
CORR = ("sram_correctable", "dram_correctable", "single_bit/total")


def _gpu_raw(g: ET.Element) -> dict[str, str | None]:
    """Raw strings of one `<gpu>` element, keyed by gpu column."""
    ecc = g.find("ecc_errors")
    power = g.find("gpu_power_readings")
    if power is None:
        power = g.find("power_readings")
    reasons = g.find("clocks_event_reasons")
    if reasons is None:
        reasons = g.find("clocks_throttle_reasons")
    mask: int | None = None
    if reasons is not None:
        for child in reasons:
            name = F.reason_name(child.tag)
            state = (child.text or "").strip()
            if name is None or state not in ("Active", "Not Active"):
                continue
            mask = (mask or 0) | (F.REASON_BITS[name] if state == "Active" else 0)
    return {
        "bus_id": g.get("id"),
        "name": _t(g, "product_name"),
        "uuid": _t(g, "uuid"),
        "mig_mode": _t(g, "mig_mode/current_mig"),
        "fan_pct": _t(g, "fan_speed"),
        "pstate": _t(g, "performance_state"),
        "memory_total_mib": _t(g, "fb_memory_usage/total"),
        "memory_used_mib": _t(g, "fb_memory_usage/used"),
        "memory_free_mib": _t(g, "fb_memory_usage/free"),
        "compute_mode": _t(g, "compute_mode"),
        "utilization_gpu_pct": _t(g, "utilization/gpu_util"),
        "utilization_mem_pct": _t(g, "utilization/memory_util"),
        "ecc_uncorrected_volatile": _sum_counts(ecc.find("volatile") if ecc is not None else None, UNCORR),
        "ecc_corrected_volatile": _sum_counts(ecc.find("volatile") if ecc is not None else None, CORR),
        "ecc_uncorrected_aggregate": _sum_counts(ecc.find("aggregate") if ecc is not None else None, UNCORR),
        "ecc_corrected_aggregate": _sum_counts(ecc.find("aggregate") if ecc is not None else None, CORR),
        "retired_pages_sbe": _t(g, "retired_pages/multiple_single_bit_retirement/retired_count"),
        "retired_pages_dbe": _t(g, "retired_pages/double_bit_retirement/retired_count"),
        "retired_pages_pending": _t(g, "retired_pages/pending_retirement", "retired_pages/pending_blacklist"),
        "remapped_rows_uncorrectable": _t(g, "remapped_rows/remapped_row_unc"),
        "remapped_rows_pending": _t(g, "remapped_rows/remapped_row_pending"),
        "temperature_c": _t(g, "temperature/gpu_temp"),
        "memory_temperature_c": _t(g, "temperature/memory_temp"),
        "power_w": _t(power, "power_draw", "average_power_draw", "instant_power_draw"),
        "power_limit_w": _t(power, "current_power_limit", "enforced_power_limit", "power_limit"),
        "sm_clock_mhz": _t(g, "clocks/sm_clock", "clocks/graphics_clock"),
        "mem_clock_mhz": _t(g, "clocks/mem_clock"),
        "sm_clock_max_mhz": _t(g, "max_clocks/sm_clock", "max_clocks/graphics_clock"),
        "pcie_link_gen": _t(g, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
        "pcie_link_width": _t(g, "pci/pci_gpu_link_info/link_widths/current_link_width"),
        "pcie_rx_kb": _t(g, "pci/rx_util"),
        "pcie_tx_kb": _t(g, "pci/tx_util"),
        "throttle_mask": None if mask is None else str(mask),
    }


def _lines_of(doc: str, tag: str, first_line: int) -> list[int]:
    """1-based file line of every `<tag` opening in `doc` (doc order = ElementTree order)."""
    return [first_line + doc.count("\n", 0, m.start()) for m in re.finditer(rf"<{tag}[\s>/]", doc)]


def _doc_rows(doc: str, first_line: int, seq: int) -> tuple[list[dict], list[dict]]:
    """Rows of one `<nvidia_smi_log>` document."""
    _check_depth(doc)
    root = SafeET.fromstring(doc, forbid_dtd=True)
    ts = _t(root, "timestamp")
    gpu_lines = _lines_of(doc, "gpu", first_line)
    proc_lines = iter(_lines_of(doc, "process_info", first_line))
    mig_lines = iter(_lines_of(doc, "mig_device", first_line))
    gpus, procs = [], []
    for index, g in enumerate(root.findall("gpu")):
        row = _gpu_raw(g)
        base = {"line": gpu_lines[index] if index < len(gpu_lines) else first_line, "seq": seq, "ts_raw": ts, "gpu": index}
        gpus.append({**base, **row, "mig_device": None})
        for mig in g.findall("mig_devices/mig_device"):
            gpus.append({
                **base, "line": next(mig_lines, base["line"]), "bus_id": row["bus_id"], "uuid": row["uuid"], "name": row["name"],
                "mig_mode": row["mig_mode"], "mig_device": _t(mig, "index"),
                "memory_total_mib": _t(mig, "fb_memory_usage/total"), "memory_used_mib": _t(mig, "fb_memory_usage/used"),
                "memory_free_mib": _t(mig, "fb_memory_usage/free"),
                "ecc_uncorrected_volatile": _sum_counts(mig.find("ecc_error_count/volatile_count"), UNCORR),
            })
        for p in g.findall("processes/process_info"):
            procs.append({
                "line": next(proc_lines, base["line"]), "seq": seq, "ts_raw": ts, "gpu": index, "bus_id": row["bus_id"],
                "uuid": row["uuid"], "pid": _t(p, "pid"), "type": _t(p, "type"), "process": _t(p, "process_name"),
                "used_memory_mib": _t(p, "used_memory"), "gpu_instance_id": _t(p, "gpu_instance_id"),
                "compute_instance_id": _t(p, "compute_instance_id"),
            })
    return gpus, procs


NUM_COLS = ("fan_pct", "memory_total_mib", "memory_used_mib", "memory_free_mib", "utilization_gpu_pct", "utilization_mem_pct",
            "temperature_c", "memory_temperature_c", "power_w", "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "sm_clock_max_mhz")
INT_COLS = ("ecc_uncorrected_volatile", "ecc_corrected_volatile", "ecc_uncorrected_aggregate", "ecc_corrected_aggregate",
            "retired_pages_sbe", "retired_pages_dbe", "remapped_rows_uncorrectable")


def _gpu_frame(rows: list[dict]) -> pl.DataFrame:
    raw = pl.DataFrame(rows, infer_schema_length=None).cast({c: pl.String for c in NUM_COLS + INT_COLS if c in rows[0]})
    exprs = [
        pl.col("line").cast(pl.Int64), pl.col("seq").cast(pl.Int64), F.timestamp(pl.col("ts_raw")).alias("ts"),
        pl.col("gpu").cast(pl.Int32), F.integer(pl.col("mig_device").cast(pl.String)).cast(pl.Int32).alias("mig_device"),
        F.bus_id(pl.col("bus_id")).alias("bus_id"), F.text(pl.col("uuid")).alias("uuid"), F.text(pl.col("name")).alias("name"),
        F.text(pl.col("mig_mode")).alias("mig_mode"), F.pstate(pl.col("pstate")).alias("pstate"),
        F.compute_mode(pl.col("compute_mode")).alias("compute_mode"),
        F.yes_no(pl.col("retired_pages_pending")).alias("retired_pages_pending"),
        F.yes_no(pl.col("remapped_rows_pending")).alias("remapped_rows_pending"),
        F.integer(pl.col("pcie_link_gen")).cast(pl.Int32).alias("pcie_link_gen"),
        F.integer(pl.col("pcie_link_width")).cast(pl.Int32).alias("pcie_link_width"),
        (F.num(pl.col("pcie_rx_kb")) / 1000.0).alias("pcie_rx_mb_per_s"),
        (F.num(pl.col("pcie_tx_kb")) / 1000.0).alias("pcie_tx_mb_per_s"),
        pl.col("throttle_mask").cast(pl.String).str.to_integer(dtype=pl.UInt64, strict=False).alias("throttle_mask"),
    ]
    exprs += [F.num(pl.col(c)).alias(c) for c in NUM_COLS]
    exprs += [F.integer(pl.col(c)).alias(c) for c in INT_COLS]
    full = raw.with_columns([pl.lit(None, pl.String).alias(c) for c in ("pcie_rx_kb", "pcie_tx_kb", "throttle_mask", "mig_device")
                             if c not in raw.columns])
    full = full.with_columns([pl.col(c).cast(pl.String) for c in full.columns if full.schema[c] == pl.Null])
    return full.select(exprs).with_columns(pl.lit("nvsmi_xml").alias("source"))


def _proc_frame(rows: list[dict]) -> pl.DataFrame:
    raw = pl.DataFrame(rows, infer_schema_length=None)
    raw = raw.with_columns([pl.col(c).cast(pl.String) for c in raw.columns if raw.schema[c] == pl.Null])
    return raw.select(
        pl.col("line").cast(pl.Int64), pl.col("seq").cast(pl.Int64), F.timestamp(pl.col("ts_raw")).alias("ts"),
        pl.col("gpu").cast(pl.Int32), F.bus_id(pl.col("bus_id")).alias("bus_id"), F.text(pl.col("uuid")).alias("uuid"),
        F.integer(pl.col("pid")).alias("pid"), F.text(pl.col("type")).alias("type"), F.text(pl.col("process")).alias("process"),
        F.num(pl.col("used_memory_mib")).alias("used_memory_mib"),
        F.integer(pl.col("gpu_instance_id")).cast(pl.Int32).alias("gpu_instance_id"),
        F.integer(pl.col("compute_instance_id")).cast(pl.Int32).alias("compute_instance_id"),
        pl.lit("nvsmi_xml").alias("source"),
    )


def _doc_end(buf: str, start: int) -> int | None:
    """End of the document opening at `start` (its first closing tag), or None."""
    m = CLOSE_RE.search(buf, start)
    return m.end() if m else None


def _doc_start(buf: str, pos: int) -> int:
    """The next `<nvidia_smi_log` opening (a whole tag name) at or after `pos`, or -1."""
    s = buf.find(OPEN, pos)
    while s >= 0 and s + len(OPEN) < len(buf) and (buf[s + len(OPEN)].isalnum() or buf[s + len(OPEN)] == "_"):
        s = buf.find(OPEN, s + 1)
    return s


def documents(chunks: Iterator[str], leftover: list[str] | None = None,
              problems: list[str] | None = None) -> Iterator[tuple[str, int]]:
    """Complete `<nvidia_smi_log>` documents with their first line, from text chunks.

    Text after the last complete document is appended to `leftover` (a cut-off sample). Each byte is searched
    a bounded number of times (thousands of openings that never close must not make it quadratic), and a
    document that grows past MAX_DOC_CHARS without closing ends the reading (noted in `problems`).
    """
    buf, line0 = "", 1
    for chunk in chunks:
        checked = max(0, len(buf) - 256)  # an unsafe declaration may straddle the chunk boundary
        buf += chunk
        if UNSAFE_RE.search(buf, checked):
            raise UnsafeXML("XML declares entities or an internal DTD subset; refused (nvidia-smi never writes one)")
        end = 0
        while (start := _doc_start(buf, end)) >= 0:
            stop = _doc_end(buf, start)
            if stop is None:
                break
            yield buf[start:stop], line0 + buf.count("\n", 0, start)
            line0 += buf.count("\n", 0, stop)
            buf, end = buf[stop:], 0
        if start >= 0 and len(buf) - start > MAX_DOC_CHARS:
            if problems is not None:
                problems.append(f"an XML document longer than {MAX_DOC_CHARS // 1024**2} M characters without its "
                                "closing tag: the rest of the file was not read")
            return
    if leftover is not None and buf.strip():
        leftover.append(buf)


def _check_depth(doc: str) -> None:
    """Refuse a long document nested deeper than MAX_DEPTH (nvidia-smi's are ~6 deep); short ones cannot be deep."""
    if len(doc) < DEPTH_CHECK_CHARS:
        return
    depth = 0
    for m in TAG_RE.finditer(doc):
        if m.group(2):  # <x/>
            continue
        depth += -1 if m.group(1) else 1
        if depth > MAX_DEPTH:
            raise UnsafeXML(f"XML nested deeper than {MAX_DEPTH} levels; refused (nvidia-smi's is about 6)")


def parse_text(text: str, first_line: int = 1, seq0: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """All documents of an XML text (a capture section or a whole small file)."""
    return _parse_docs(documents(iter([text])), first_line - 1, seq0)


def _parse_docs(docs: Iterator[tuple[str, int]], line_shift: int = 0, seq0: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    return next(_batches(docs, line_shift, seq0, batch_rows=None), (pl.DataFrame(), pl.DataFrame()))


# Rows of Python dicts held before they become columns: a long capture is converted batch by batch.
BATCH_ROWS = 200_000


def _batches(docs: Iterator[tuple[str, int]], line_shift: int = 0, seq0: int = 0,
             batch_rows: int | None = BATCH_ROWS) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """(gpu, procs) frames of whole documents, about `batch_rows` gpu rows each (None: one batch of everything)."""
    gpu_rows, proc_rows = [], []
    for seq, (doc, line) in enumerate(docs, start=seq0):
        g, p = _doc_rows(doc, line + line_shift, seq)
        gpu_rows += g
        proc_rows += p
        if batch_rows is not None and len(gpu_rows) >= batch_rows:
            yield _gpu_frame(gpu_rows), (_proc_frame(proc_rows) if proc_rows else pl.DataFrame())
            gpu_rows, proc_rows = [], []
    if gpu_rows or proc_rows:
        yield (_gpu_frame(gpu_rows) if gpu_rows else pl.DataFrame()), (_proc_frame(proc_rows) if proc_rows else pl.DataFrame())


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one `-q -x` file (one or more documents)."""
    # An incremental decoder: a chunk boundary may cut a multi-byte character.
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    chunks = (dec.decode(b) for b in src.chunks(8 * 1024 * 1024))
    rest: list[str] = []
    sink = F.TelemetrySink(src.rel)
    problems: list[str] = []
    try:
        for gpu, procs in _batches(documents(chunks, rest, problems)):
            sink.add(gpu, procs)
    except UnsafeXML as exc:
        return ParseResult(status="failed", error=str(exc))
    except defusedxml.DefusedXmlException as exc:
        return ParseResult(status="failed", error=f"XML refused: {exc}")
    except ET.ParseError as exc:
        return ParseResult(status="failed", error=f"malformed nvidia-smi XML: {exc}")
    cut = bool(rest) and "<nvidia_smi_log" in rest[0] or bool(problems)
    res = sink_result(src, sink, problems or (["the last XML document is incomplete (cut off)"] if cut else []))
    if cut and res.status == "parsed":
        res.status = "partial"
    return res


def sniff(sn: Sniffed) -> int:
    """The root element of `nvidia-smi -q -x`."""
    return 90 if "<nvidia_smi_log" in sn.text[:4096] else 0


PARSER = Parser(kind="nvsmi_xml", sniff=sniff, parse=parse, description="nvidia-smi -q -x XML")

"""Hostile nvidia-smi XML: entity bombs, thousands of openings that never close and absurd nesting each end
quickly with a status row; a real document beside them is still read."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from forensics.ingest import parse_one
from forensics.sources import make_source

PROLOG = '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n <!ENTITY lol "lol">\n'
          + "".join(f' <!ENTITY lol{i} "' + f"&lol{i - 1 if i > 1 else ''};" * 10 + '">\n' for i in range(1, 10))
          + "]>\n<nvidia_smi_log><timestamp>&lol9;</timestamp></nvidia_smi_log>\n")
CASES = {
    "laughs.xml": (LAUGHS, "failed", "entities"),
    "unclosed.xml": (PROLOG + "<nvidia_smi_log>\n" * 45000, "partial", "incomplete"),
    "deep.xml": (PROLOG + "<nvidia_smi_log>" + "<a>" * 200000 + "</a>" * 200000 + "</nvidia_smi_log>\n", "failed", "nested deeper"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_xml_gets_a_status_row_quickly(tmp_path: Path, name):
    text, status, reason = CASES[name]
    (tmp_path / name).write_text(text, encoding="utf-8")
    t = time.perf_counter()
    row, _ = parse_one(make_source(tmp_path / name, name))
    assert time.perf_counter() - t < 30
    assert row["kind"] == "nvsmi_xml" and row["status"] == status and reason in row["error"], row


def test_an_entity_reference_is_never_expanded(tmp_path: Path):
    import xml.etree.ElementTree as ET

    from forensics.parsers import nvsmi_xml

    doc = "<nvidia_smi_log><timestamp>&lol;</timestamp></nvidia_smi_log>"
    with pytest.raises(ET.ParseError):  # undefined: expat refuses it; nothing is looked up or expanded
        nvsmi_xml.parse_text(doc)


def test_a_document_that_never_closes_stops_at_its_budget(tmp_path: Path, monkeypatch):
    from forensics.parsers import nvsmi_xml

    monkeypatch.setattr(nvsmi_xml, "MAX_DOC_CHARS", 1024 * 1024)
    (tmp_path / "big.xml").write_text(PROLOG + "<nvidia_smi_log>\n" + "<x>y</x>\n" * 400_000, encoding="utf-8")
    row, _ = parse_one(make_source(tmp_path / "big.xml", "big.xml"))
    assert row["status"] == "partial" and "without its closing tag" in row["error"]

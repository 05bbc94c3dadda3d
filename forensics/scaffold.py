"""`forensics playbooks new`: write a new playbook's module and its positive and near-miss case skeletons."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from forensics.playbooks.base import CATEGORIES, DOC_SECTIONS

ID = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")

MODULE = '''\
"""{id}: TODO one line: what goes wrong."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="{id}",
        title="TODO the symptom in a few words",
        category="{category}",
        severity=Severity.MEDIUM,
        tables=("events",),  # the evidence tables its detectors read; all empty: the playbook is skipped
        explains=(),  # ids of the playbooks whose findings this one can cause
        codes=(),  # every event code a detector below reads (tests/test_playbook_declaration.py checks)
        causes=(
            Cause("todo_cause", "TODO the most likely cause",
                  verify="TODO the command that confirms it", fix="TODO the fix", prior=1.0),
        ),
        verify="TODO the command that confirms the diagnosis",
        fix="TODO the fix",
        thresholds={{}},  # every number a detector decides by: name -> Threshold(default, doc, origin)
        doc="""\\
{doc}""",
    )
)


@PLAYBOOK.detector()
def detect(ctx: Context, th: dict) -> Detection | None:
    """TODO what this detector looks for; read the tables with polars, never per line."""
    return None
'''

EXPECT_POSITIVE = '''\
description = "TODO the run: what was recorded, where (public thread or script under _scripts/), what went wrong at which step."
fires = ["{id}"]
root = "{id}"
evidence = []  # "file:line" quotes the finding must give
'''

EXPECT_NEARMISS = '''\
description = "TODO a run that looks like {id} but is not (say why), where it comes from."
fires = []
not_fire = ["{id}"]
'''


class ScaffoldError(ValueError):
    """The id, category or target cannot take a new playbook."""


def _doc() -> str:
    return "".join(f"## {section}\nTODO\n\n" for section in DOC_SECTIONS).rstrip("\n") + "\n"


def new_playbook(root: Path, playbook_id: str, category: str, existing: Iterable[str]) -> list[Path]:
    """Write playbooks/<category>/<id>.py and sample_logs/<id>/{positive,nearmiss}/expect.toml under `root`."""
    if not ID.fullmatch(playbook_id):
        raise ScaffoldError(f"{playbook_id!r} is not a playbook id (lowercase words joined by '-')")
    if category not in CATEGORIES:
        raise ScaffoldError(f"no category {category!r}; one of {', '.join(CATEGORIES)}")
    if playbook_id in set(existing):
        raise ScaffoldError(f"playbook {playbook_id!r} exists (see `forensics playbooks show {playbook_id}`)")
    module = root / "playbooks" / category / f"{playbook_id.replace('-', '_')}.py"
    cases = root / "sample_logs" / playbook_id
    for path in (module, cases):
        if path.exists():
            raise ScaffoldError(f"{path} exists")
    files = {
        module: MODULE.format(id=playbook_id, category=category, doc=_doc()),
        cases / "positive" / "expect.toml": EXPECT_POSITIVE.format(id=playbook_id),
        cases / "nearmiss" / "expect.toml": EXPECT_NEARMISS.format(id=playbook_id),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)

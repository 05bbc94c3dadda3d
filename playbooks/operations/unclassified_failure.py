"""unclassified-failure: the run failed with an error no other playbook explains; the failure lexicon ranks suspects."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import lexicon
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import ranks_text
from forensics.playbooks.failure_signals import failure_signals, final_error

from forensics.contracts.context import Context, evidence_rows, onset_of
from forensics.contracts.model import Cause, Detection, Evidence, Severity

PID = "unclassified-failure"
# Cause ids are the candidate playbook ids with `_` for `-`; the candidate that is this playbook itself is the
# program's own bug (an exception no failure pattern names).
OWN = PID.replace("-", "_")
# Characters of failure text read per signal (a 3000-line NCCL dump says nothing more after its first lines).
PER_SIGNAL_CHARS = 4000
# torch.multiprocessing.spawn (and torch < 1.7's plain `Exception`) reports a child that raised as ProcessRaisedException
# with the child's traceback; `process N terminated with exit code N` means the child raised nothing and ended with an
# exit status of its own (the script's sys.exit()/exit(), as at its max_epochs). Alone, that proves no failure: low.
# Only statuses 1-255: a Windows NTSTATUS (3221225477 = 0xC0000005, an access violation) is a crash.
OWN_EXIT = r"(?:ProcessExitedException: |^(?:\w+\.)*Exception: )process \d+ terminated with exit code [1-9]\d{0,2}\s*$"


def _causes() -> tuple[Cause, ...]:
    """One cause per candidate of the shipped lexicon (its playbook's title, verify and fix), equal priors."""
    try:
        cands = lexicon.load()["candidates"]
    except FileNotFoundError:  # the lexicon is being built (bench/build_failure_lexicon.py imports the catalog)
        cands = {}
    own = Cause(OWN, "A bug in the program or a library (no known failure pattern): the final exception names it",
                verify="Read the final exception and the innermost frame of your own code; rerun that step alone",
                fix="Fix the code path the traceback names; if a library upgrade started it, pin the previous version and report it",
                prior=1.0)
    out = [own]
    for cid, c in sorted(cands.items()):
        if cid != PID:
            out.append(Cause(cid.replace("-", "_"), f"{c['title']} ({cid})", verify=c["verify"], fix=c["fix"], prior=1.0, playbook=cid))
    return tuple(out)


PLAYBOOK = declare(
    Playbook(
        id=PID,
        title="The run failed with an error no playbook explains",
        category="operations",
        severity=Severity.HIGH,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang", "rank-straggler", "collective-mismatch"),
        fallback=True,
        # Read by unclassified_failure_not_training: a reinforcement-learning trainer that never trained.
        codes=("rl_trainer_not_training",),
        causes=_causes(),
        verify="Read the quoted final error and the innermost frame of your own code; check the ranked playbooks' verify steps",
        fix="As the most likely cause says; if none fits, fix the code path the traceback names",
        thresholds={
            "impossible_points": Threshold(2, "lines with a perplexity below 1 that make a loss-computation bug", "ours; flashlight/flashlight#137, pytorch/examples#734 (perplexity 0 on every line)"),
        },
        doc="""\
## Symptom
The run failed — a traceback's final exception, a fatal signal (`Segmentation fault`, `Bus error`,
`Aborted`, SIGSEGV/SIGABRT/SIGBUS in a launcher report), `terminate called after throwing …`, a
launcher's non-zero exit (torchrun's `ChildFailedError` with its `exitcode`, srun's `Exited with exit
code`), a kill, or an error line after which its rank logged nothing more — and no playbook of the
catalog recognises the failure. The finding quotes the final error of the first failing rank (the rank
whose first failure sign is earliest) and ranks the playbooks most likely behind it.

## Why it matters
A failed run must never be reported as clean. Even when the failure has no known pattern, the final
error and the rank it started on are where to look first, and the words of the error usually point
to a family of causes.

## Evidence
`events`: the failure signals of every rank, earliest first, the final error quoted first. The
candidates are ranked by a weighted lexicon (`playbooks/failure_lexicon.json`) learned offline from the
recorded real incidents by `bench/build_failure_lexicon.py`: a word of the failure text votes for a
playbook with the log-odds of appearing in that playbook's incidents against the others' (counted
once per public thread, and only words seen in at least two threads of that playbook). Scores are the
candidate's prior plus its words' weights; likelihoods come from a softmax. Each cause lists the words
that voted for it (`facts.votes`). The candidate `unclassified_failure` is the program's own bug.

A metric no correct loss can print is a failure too, with no error line: a perplexity below 1 on two or more
lines (`metrics`), a loss computed wrongly (flashlight/flashlight#137: a language model's `Validation Perplexity: 0`
every epoch, its forward missing the LogSoftmax; pytorch/examples#734). Only perplexity is read: a negative loss
alone is no failure, since losses negative by design (-PSNR, -SSIM, soft dice, a continuous density's NLL) exist.

## Known false positives
Healthy endings are not failures: a `KeyboardInterrupt` (Ctrl-C, also a `^C` pasted before the
traceback), `SystemExit`, warnings, an exception raised in a teardown function after the work
(`terminate`, `close`, `__del__`, `__exit__`, `shutdown`), an error after which the same rank's
training went on (caught and logged, a retry that succeeded), and a stop from outside (scheduler time
limit, `scancel`, preemption, srun's `Terminated` tasks) and what follows it; an error-level line that
says it is a warning. `torch.multiprocessing.spawn`'s `ProcessExitedException: process N terminated with exit code
N` (1-255) alone is `low`: the child raised nothing (a raise is a ProcessRaisedException with its traceback) and ended
with its own status, as a script's `exit()` after its last epoch does. This playbook stays below every specific one: when another playbook has a finding
above info, this one is dropped unless it came first and that finding is among its consequences (a
crash on one rank that left the others timing out in a collective).
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Failure signals of the run: quote the first failing rank's final error, rank the candidates by its words."""
    sig = failure_signals(ctx)
    if sig.height == 0:
        return None
    final = final_error(sig)
    votes = lexicon.shipped().rank(_text(sig), top=len(PLAYBOOK.causes))
    causes = {v.candidate.replace("-", "_"): max(v.likelihood, 1e-3) for v in votes}
    first = sig.row(0, named=True)
    rank = f" on rank {first['rank']}" if first["rank"] is not None else ""
    ranks = ranks_text(sorted({r for r in sig.get_column("rank").to_list() if r is not None}))
    more = f" ({sig.height} failure signs{' on ' + ranks if ranks else ''})" if sig.height > 1 else ""
    lead = votes[0] if votes else None
    hint = ""
    if lead is not None and lead.words:
        name = "a bug of the program itself" if lead.candidate == PID else lead.candidate
        hint = f"; most likely {name} ({lead.likelihood:.0%}, words: {', '.join(w for w, _ in lead.words[:4])})"
    final_row = sig.filter((pl.col("file") == final["file"]) & (pl.col("line") == final["line"]))
    quoted = pl.concat([final_row, sig.join(final_row.select("file", "line"), on=["file", "line"], how="anti")], how="vertical_relaxed")
    own_exit = sig.get_column("message").fill_null("").str.contains(OWN_EXIT).all()
    what = (f"a process{rank} ended with an exit status of its own and raised nothing (a script's exit() after its last "
            "epoch ends so; no failure is proven)" if own_exit else f"the run failed{rank} with an error no playbook recognises")
    d = Detection(
        summary=f"{what}: {_short(final['message'])}{more}{hint}",
        onset=onset_of(sig),
        evidence=evidence_rows(quoted),
        evidence_count=sig.height,
        causes=causes,
        confidence=0.3 if own_exit else 0.6,
        severity=Severity.LOW if own_exit else None,
        facts={"final_error": final["message"], "first_failing_rank": first["rank"],
               "votes": {v.candidate: {"likelihood": v.likelihood, "words": dict(v.words)} for v in votes}},
        ranks=sorted({r for r in sig.get_column("rank").to_list() if r is not None}),
    )
    # Each candidate quotes the failure lines holding the words that voted for it.
    d.cause_evidence = {v.candidate.replace("-", "_"): _lines_with(quoted, [w for w, _ in v.words]) for v in votes if v.words}
    return d


def _text(sig: pl.DataFrame) -> str:
    """The failure text the lexicon reads: each signal's message and block, bounded."""
    msgs = sig.get_column("message").fill_null("").to_list()
    texts = sig.get_column("text").fill_null("").to_list()
    return "\n".join(f"{m}\n{t[:PER_SIGNAL_CHARS]}" for m, t in zip(msgs, texts, strict=True))


def _lines_with(rows: pl.DataFrame, words: list[str]) -> list[Evidence]:
    """Evidence rows whose text contains one of the voting words (case-insensitive)."""
    if not words:
        return []
    pattern = "(?i)" + "|".join(words)
    return evidence_rows(rows.filter(pl.col("text").str.contains(pattern) | pl.col("message").str.contains(pattern)), limit=3)


def _short(msg: str | None) -> str:
    msg = (msg or "").strip()
    return msg if len(msg) <= 160 else msg[:157] + "..."

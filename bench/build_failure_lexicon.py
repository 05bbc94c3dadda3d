"""Build playbooks/failure_lexicon.json from the recorded real incidents and print its leave-one-thread-out accuracy.

Usage: python bench/build_failure_lexicon.py [--check]

Labelled runs: every `[[incident]]` of tests/recordings/incidents/INCIDENTS.toml with a `root`, and every sample
of sample_logs/ whose expectation names a `root` (the frozen held-out batches `held_out_*.toml` are never read).
Each run is ingested; its failure text is what the unclassified-failure playbook would read (the messages and
blocks of `failure_signals`). A word votes for a playbook with the naive-Bayes log-odds of appearing in the failure
texts of that playbook's threads against the other threads', counted once per thread; only words seen in at least
MIN_THREADS threads of that playbook may vote, so no single thread's wording becomes a rule. Leave-one-thread-out:
each incident thread is ranked by a lexicon built without it (all runs from its URL left out); top-1 = its root.
`--check` rebuilds and fails when the shipped file differs (the lexicon must be reproducible from the recordings).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

from forensics.playbooks.base import registry
from forensics.playbooks.failure_signals import failure_signals
from forensics.playbooks.lexicon import LEXICON_PATH, Lexicon, tokens

from forensics.contracts.context import Context
from forensics.ingest import ingest

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "tests" / "recordings" / "incidents"
SAMPLES = ROOT / "sample_logs"
MIN_THREADS = 2  # threads of a playbook a word must appear in before it votes for that playbook
SMOOTH = 0.5  # additive smoothing of the per-thread counts
MIN_WEIGHT = 1.0  # weakest log-odds kept
MAX_WORDS = 40  # words kept per playbook
PRIOR_SCALE = 1.0  # how much the share of incidents per playbook counts against the words
PER_EVENT_CHARS = 4000
SELF = "unclassified-failure"


def failure_text(folder: Path) -> str:
    """The text the unclassified-failure playbook reads for this run: messages and blocks of its failure signals."""
    sig = failure_signals(Context(ingest(folder)))
    parts = []
    for msg, text in zip(sig.get_column("message").to_list(), sig.get_column("text").to_list(), strict=True):
        parts.append(f"{msg or ''}\n{(text or '')[:PER_EVENT_CHARS]}")
    return "\n".join(parts)


def labelled_runs(tmp: Path) -> list[dict]:
    """(thread, root, folder, is_incident) of every labelled run."""
    out = []
    for case in tomllib.loads((INCIDENTS / "INCIDENTS.toml").read_text(encoding="utf-8"))["incident"]:
        if "root" not in case:
            continue
        folder = INCIDENTS / case["name"]
        if "files" in case:
            folder = tmp / case["name"]
            folder.mkdir(parents=True, exist_ok=True)
            for rel in case["files"]:
                shutil.copy(INCIDENTS / rel, folder / Path(rel).name)
        out.append({"thread": case["url"].split("#")[0].rstrip("/"), "root": case["root"], "folder": folder, "incident": True})
    expects = sorted(SAMPLES.glob("*.expect.toml")) + sorted(SAMPLES.glob("*/*/expect.toml"))
    for exp in expects:
        doc = tomllib.loads(exp.read_text(encoding="utf-8"))
        if "root" not in doc:
            continue
        folder = exp.parent if exp.name == "expect.toml" else SAMPLES / exp.name.removesuffix(".expect.toml")
        out.append({"thread": f"sample:{folder.relative_to(SAMPLES)}", "root": doc["root"], "folder": folder, "incident": False})
    return out


def learn(docs: list[tuple[str, str, frozenset[str]]]) -> Lexicon:
    """Priors and word weights from (thread, root, words) documents, each thread counted once per word."""
    by_thread: dict[str, tuple[str, set[str]]] = {}
    for thread, root, words in docs:
        label, seen = by_thread.setdefault(thread, (root, set()))
        seen |= words
    n_class = Counter(label for label, _ in by_thread.values())
    total = sum(n_class.values())
    df: dict[str, Counter] = defaultdict(Counter)
    for label, words in by_thread.values():
        df[label].update(words)
    df_all: Counter = Counter()
    for c in df.values():
        df_all.update(c)
    priors, weights = {}, {}
    for label, n in sorted(n_class.items()):
        priors[label] = round(PRIOR_SCALE * math.log(n / total), 4)
        rest = total - n
        scored = {}
        for w, k in df[label].items():
            if k < MIN_THREADS:
                continue
            other = df_all[w] - k
            lo = math.log((k + SMOOTH) / (n + 2 * SMOOTH)) - math.log((other + SMOOTH) / (rest + 2 * SMOOTH))
            if lo >= MIN_WEIGHT:
                scored[w] = round(lo, 4)
        weights[label] = dict(sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_WORDS])
    return Lexicon(priors=priors, weights=weights)


def document(lex: Lexicon, docs: list[tuple[str, str, frozenset[str]]]) -> dict:
    """The shipped JSON: per candidate its title, verify and fix (from its playbook) with prior and weights."""
    pbs = registry()
    n_threads = Counter(root for _, root in {(t, r) for t, r, _ in docs})
    cands = {}
    for label in sorted(lex.priors):
        if label == SELF:
            title = "A bug in the program or a library (no known failure pattern): the final exception names it"
            verify = "Read the final exception and the innermost frame of your own code; rerun that step alone"
            fix = "Fix the code path the traceback names; if a library upgrade started it, pin the previous version and report it"
        else:
            pb = pbs[label]
            title, verify, fix = pb.title, pb.verify, pb.fix
        cands[label] = {"title": title, "verify": verify, "fix": fix, "threads": n_threads[label],
                        "prior": lex.priors[label], "words": lex.weights[label]}
    return {"built_by": "bench/build_failure_lexicon.py", "min_threads": MIN_THREADS, "smooth": SMOOTH,
            "min_weight": MIN_WEIGHT, "prior_scale": PRIOR_SCALE, "candidates": cands}


def main() -> int:
    check = "--check" in sys.argv
    with tempfile.TemporaryDirectory() as tmpdir:
        runs = labelled_runs(Path(tmpdir))
        docs = []
        for r in runs:
            words = frozenset(tokens(failure_text(r["folder"])))
            r["words"] = words
            if words:
                docs.append((r["thread"], r["root"], words))
    lex = learn(docs)
    # Leave one thread out: every incident thread with a failure text, ranked by a lexicon built without it.
    threads = sorted({r["thread"] for r in runs if r["incident"] and r["words"]})
    hits = 0
    misses = []
    for t in threads:
        held = [r for r in runs if r["thread"] == t and r["words"]]
        rest = [d for d in docs if d[0] != t]
        votes = learn(rest).rank(" ".join(sorted(set().union(*(r["words"] for r in held)))), top=1)
        got = votes[0].candidate if votes else None
        ok = got == held[0]["root"]
        hits += ok
        if not ok:
            misses.append(f"{t}: want {held[0]['root']} got {got}")
    with_text = sum(1 for r in runs if r["words"])
    print(f"labelled runs: {len(runs)} ({with_text} with a failure text), threads: {len({d[0] for d in docs})}, candidates: {len(lex.priors)}")
    print(f"leave-one-thread-out top-1 on the recorded incidents: {hits}/{len(threads)} = {hits / max(len(threads), 1):.0%}")
    if "--verbose" in sys.argv:
        print("\n".join(misses))
    doc = document(lex, docs)
    text = json.dumps(doc, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    if check:
        same = LEXICON_PATH.is_file() and LEXICON_PATH.read_text(encoding="utf-8") == text
        print("shipped lexicon is up to date" if same else "shipped lexicon differs: run bench/build_failure_lexicon.py")
        return 0 if same else 1
    LEXICON_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {LEXICON_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The failure lexicon: words of an error text vote for playbooks with weights learned offline from real incidents.

The weights are data (`failure_lexicon.json`, built by bench/build_failure_lexicon.py from the recorded incidents):
for each candidate playbook, the log-odds of each word appearing in the failure text of its incidents against the
others' (a naive-Bayes vote, counted once per thread). A text's score for a playbook is its prior plus the weights
of the words it contains; the scores become likelihoods by softmax. Deterministic and explainable: each likelihood
comes with the words that voted for it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LEXICON_PATH = Path(__file__).with_name("failure_lexicon.json")

# Words: runs of letters (digits inside allowed: `cuda`, `nccl`, `bf16`); CamelCase split (`ResourceExhaustedError`
# votes with `resource`, `exhausted`); hex addresses, numbers and one- or two-letter pieces are noise.
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_HEXLIKE = re.compile(r"^(?:0x)?[0-9a-f]{6,}$")
# Words every Python or C++ failure prints, whatever went wrong: they tell no playbook apart.
STOP = frozenset(["the", "and", "for", "with", "from", "that", "this", "not", "was", "are", "has", "have", "had", "been", "will", "can", "could", "into", "when", "then", "than", "but", "its", "file", "line", "call", "last", "most", "recent", "traceback", "error", "errors", "exception", "raised", "self", "return", "raise", "none", "true", "false", "in", "on", "at", "of", "to", "is", "be", "by", "or", "an", "as", "it", "if", "do", "no", "py", "lib", "site", "packages", "python", "home", "user", "usr", "local", "bin", "opt", "conda", "anaconda", "envs", "env", "frame", "unknown", "function", "main", "module", "args", "kwargs", "run", "self"])


def tokens(text: str, max_chars: int = 20_000) -> set[str]:
    """The distinct lower-case words of a text (CamelCase split as well as whole), stop words dropped."""
    out: set[str] = set()
    for w in _WORD.findall(text[:max_chars]):
        low = w.lower()
        if len(low) > 40 or _HEXLIKE.match(low):
            continue
        out.add(low)
        for part in _CAMEL.findall(w):
            if len(part) > 2 and not part.isdigit():
                out.add(part.lower())
    return {w for w in out if len(w) > 2 and w not in STOP}


@dataclass(frozen=True)
class Vote:
    """One candidate's likelihood for a text and the words that voted for it (weight, largest first)."""

    candidate: str
    likelihood: float
    words: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Lexicon:
    """Per-candidate priors and word weights."""

    priors: dict[str, float]
    weights: dict[str, dict[str, float]]

    def rank(self, text: str, top: int = 5, words: int = 6) -> list[Vote]:
        """The `top` candidates for a text, most likely first (ties by name), with their voting words."""
        toks = tokens(text)
        scores: dict[str, float] = {}
        voted: dict[str, list[tuple[str, float]]] = {}
        for cand, prior in self.priors.items():
            hits = [(w, wt) for w, wt in self.weights.get(cand, {}).items() if w in toks]
            scores[cand] = prior + sum(wt for _, wt in hits)
            voted[cand] = sorted(hits, key=lambda h: (-h[1], h[0]))
        if not scores:
            return []
        peak = max(scores.values())
        exp = {c: math.exp(s - peak) for c, s in scores.items()}
        total = sum(exp.values())
        order = sorted(scores, key=lambda c: (-scores[c], c))[:top]
        return [Vote(c, round(exp[c] / total, 3), tuple((w, round(wt, 2)) for w, wt in voted[c][:words])) for c in order]


def load(path: Path = LEXICON_PATH) -> dict:
    """The lexicon document as built (candidates with their title, verify, fix, prior and word weights)."""
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def shipped() -> Lexicon:
    """The lexicon shipped with the package."""
    doc = load()
    return Lexicon(priors={c: v["prior"] for c, v in doc["candidates"].items()},
                   weights={c: v["words"] for c, v in doc["candidates"].items()})

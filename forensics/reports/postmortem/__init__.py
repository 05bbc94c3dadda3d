"""`forensics report`: the incident postmortem, as one self-contained HTML page or Markdown with plot files."""

import logging

# A home without a writable config folder (read-only HOME) makes matplotlib log two warnings when the plots import
# it, while it falls back to a temporary folder: the cache line forensics prints already says what was not written.
logging.getLogger("matplotlib").setLevel(logging.ERROR)

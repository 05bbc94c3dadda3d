"""`forensics report`: the incident postmortem, as one self-contained HTML page or Markdown with plot files."""

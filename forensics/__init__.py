"""forensics: post-hoc forensic analysis of deep-learning training runs."""

__version__ = "0.1.0"

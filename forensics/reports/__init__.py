"""Renderers of an Analysis: JSON (the versioned contract), text (terminal) and Markdown."""

"""The contract between layers: evidence-table schemas, the Context a playbook reads, the diagnosis model.

Parsers write the tables, playbooks read them through `Context` and answer with the model's types; this
package imports neither ingest nor any parser or playbook, so each side can be read (and imported) alone.
"""

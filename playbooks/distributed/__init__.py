"""Distributed playbooks: collective timeouts and mismatches, replica desync, stragglers."""

"""Operations playbooks: checkpoint failures, silent hangs."""

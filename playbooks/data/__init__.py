"""Data playbooks: bad inputs, tokenizer mismatch, class imbalance, nondeterminism."""

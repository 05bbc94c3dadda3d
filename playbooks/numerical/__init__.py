"""Numerical playbooks: NaN loss, fp16 overflow, loss-scale runaway, LR schedule, optimizer state, logits, loss spikes."""

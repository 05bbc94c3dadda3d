"""Autograd and compiler playbooks: races and in-place errors, torch.compile recompilation."""

"""Gradient playbooks: explosion, vanishing, clipping saturation, silent LoRA, loss stagnation."""

"""Device and CUDA-context playbooks: asserts, driver mismatch, hardware faults, context corruption, device mismatch."""

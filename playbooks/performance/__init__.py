"""Performance playbooks: GPU utilisation, data loading, syncs, launch overhead, overlap, throttling, step time."""

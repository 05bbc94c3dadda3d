"""Memory playbooks: device OOM, leaks, allocator fragmentation, host memory exhaustion."""

"""A TCPStore client whose server never comes up (a non-zero rank with a wrong MASTER_ADDR/PORT): torch's retry and give-up messages."""

import datetime
import sys

import torch.distributed as dist

host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
try:
    dist.TCPStore(host, 29599, is_master=False, timeout=datetime.timedelta(seconds=3))
except Exception as e:  # print it as an uncaught exception's last line reads
    print(f"{type(e).__module__}.{type(e).__name__}: {e}", flush=True)
    sys.exit(1)

"""device-mismatch: tensors of one op live on different devices."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.evidence import detection, events, first_message, where
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

CODES = ("device_mismatch",)

PLAYBOOK = declare(
    Playbook(
        id="device-mismatch",
        title="Tensors on different devices",
        category="device",
        severity=Severity.HIGH,
        tables=("events",),
        explains=("nccl-timeout",),
        codes=("device_mismatch",),
        causes=(
            Cause("module_not_moved", "A module, buffer or freshly created tensor stayed on the CPU (or another GPU)",
                  verify="The traceback's last frame names the op; print the .device of each input there",
                  fix="model.to(device) before building the optimizer; create tensors with device=x.device; register constants as buffers", prior=0.7),
            Cause("wrong_local_rank", "Ranks use the wrong GPU (device index not set from LOCAL_RANK)",
                  verify="print(os.environ['LOCAL_RANK'], torch.cuda.current_device()) on each rank",
                  fix="torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before creating the model", prior=0.3),
        ),
        verify="Print .device of every input of the failing op",
        fix="Move the model, its buffers and the batch to one device",
        thresholds={},
        doc="""\
## Symptom
`Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!`
(and its older `… but got argument … is on cpu` variants).

## Why it matters
A deterministic bug that fails at the first step that touches the misplaced tensor.

## Evidence
`events` with the device-mismatch code; the devices named in the message.

## Known false positives
None known.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Device-mismatch errors; two different cuda indices point at the local-rank cause."""
    ev = events(ctx, CODES)
    if ev.height == 0:
        return None
    msg = first_message(ev)
    devices = sorted(set(ev.with_columns(field("device_a").alias("a")).get_column("a").drop_nulls().to_list()))
    two_gpus = msg.count("cuda:") >= 2
    causes = {"wrong_local_rank": 0.8, "module_not_moved": 0.3} if two_gpus else {"module_not_moved": 0.9}
    row = ev.row(0, named=True)
    return detection(ev, f"tensors on different devices{where(row)}: {msg}", causes, confidence=0.95, facts={"devices": devices})

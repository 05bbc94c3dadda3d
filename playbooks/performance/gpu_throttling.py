"""gpu-throttling: thermal, power-cap or hardware slowdown reasons active, SM clocks down, steps slower."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import gpu_samples as S
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Cause, Detection, Severity

# NVML clocks-event reason bits that slow a working GPU down (formats.md §3.1). GpuIdle (0x1),
# ApplicationsClocksSetting (0x2), SyncBoost (0x10) and DisplayClockSetting (0x100) do not.
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80
THROTTLE = SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE
THERMAL = SW_THERMAL | HW_THERMAL
POWER = SW_POWER_CAP | HW_POWER_BRAKE
GPU_IDLE = 0x1

PLAYBOOK = declare(
    Playbook(
        id="gpu-throttling",
        title="GPU clocks throttled (thermal, power or hardware slowdown)",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("gpu", "metrics"),
        explains=("step-time-regression", "rank-straggler"),
        causes=(
            Cause("cooling", "The GPU reaches its slowdown temperature: cooling, airflow or a failed fan",
                  verify="nvidia-smi -q -d TEMPERATURE,PERFORMANCE on the node while it runs; compare the GPU's temperature with its neighbours",
                  fix="Fix the cooling (fans, airflow, ambient temperature) or move the job off the node", prior=0.45),
            Cause("power_limit", "The board power limit (or a chassis power brake) caps the clocks",
                  verify="nvidia-smi -q -d POWER,PERFORMANCE: power draw at the enforced limit, SW Power Cap / HW Power Brake Active",
                  fix="Check the power limit (nvidia-smi -pl) and the node's power supply; move the job to an unconstrained node", prior=0.35),
            Cause("failing_hardware", "Hardware slowdown without heat or power: a failing GPU, PSU or sensor",
                  verify="nvidia-smi -q -d PERFORMANCE shows HW Slowdown Active at normal temperature and power; dmesg for Xid errors",
                  fix="Drain the node and hand it to the hardware team", prior=0.2),
        ),
        verify="nvidia-smi -q -d PERFORMANCE",
        fix="fix cooling/power, move job",
        thresholds={
            "min_share": Threshold(0.05, "share of a GPU's training samples with a slowdown reason active (thermal, power cap, HW slowdown, power brake) that makes a finding", "ours"),
            "min_samples": Threshold(5, "throttled samples of one GPU needed before it is reported", "ours"),
            "clock_drop": Threshold(0.10, "SM clock drop (vs the GPU's own unthrottled clock) a power-cap-only episode must show to count", "ours"),
            "step_slowdown": Threshold(0.10, "step-time increase while throttled (vs the rest of training) that confirms the steps waited for the GPU", "PLAYBOOKS.md gpu-throttling (clock drops that line up with slower steps)"),
            "trim_share": Threshold(0.05, "share of samples at each end of the active span left out when the logs give no training window", "ours"),
            "snapshot_clock_ratio": Threshold(0.5, "SM clock over its max clock at or below which a snapshot's bare HW Slowdown counts (NVML: HW Slowdown cuts the clocks by a factor of 2 or more)", "NVML nvmlClocksThrottleReasonHwSlowdown"),
        },
        doc="""\
## Symptom
nvidia-smi / DCGM samples show clocks-event (throttle) reasons active while the GPU works: SW/HW
thermal slowdown, SW power cap, HW slowdown, HW power brake (named `clocks_event_reasons.*` /
`clocks_throttle_reasons.*` fields, the `.active` bit mask, `-q` "Clocks Event Reasons", DCGM
`DVCCTR`, dmon `pviol`/`tviol`), with the SM clock below its usual value; step times logged in
the same window are slower.

## Why it matters
A throttled GPU runs at a fraction of its clock, and in data-parallel training every step waits
for the slowest GPU: one hot GPU slows the whole job.

## Evidence
`gpu` (reason mask, SM clock, temperature, power per sample) and `metrics` (`step_time_ms`) for
the slowdown in the same window.

A one-off `nvidia-smi -q` snapshot (fewer samples than a series needs, e.g. a pasted `Clocks Throttle
Reasons` excerpt) is enough when the hardware itself holds the clocks down: HW Power Brake or HW
Thermal Slowdown active on a GPU that is not idle, or a bare HW Slowdown with the SM clock at half its
max clock or less.

## Known false positives
A snapshot of an idle GPU (Idle active, or 0% utilisation) or one with only SW Power Cap active is
not a finding: a power cap at full load is normal, and NVML may report HW Slowdown for a moment
during a P-state or clock change. GpuIdle, applications-clocks, sync-boost and display reasons are not throttling; an idle GPU at
low clocks is not a finding. A power cap touched for a sample or two, or without a clock drop, is
normal operation at full load and is not reported.
""",
    )
)


def _flags(df: pl.DataFrame) -> pl.DataFrame:
    """Per sample: the slowdown bits active (from the mask, or dmon's pviol/tviol)."""
    mask = pl.col("throttle_mask").cast(pl.Int64).fill_null(0)
    bits = mask & THROTTLE
    bits = bits | pl.when(pl.col("power_violation_pct").fill_null(0) > 0).then(pl.lit(SW_POWER_CAP)).otherwise(0)
    bits = bits | pl.when(pl.col("thermal_violation").fill_null(0) > 0).then(pl.lit(SW_THERMAL)).otherwise(0)
    return df.with_columns(bits.alias("_bits"))


def _step_slowdown(ctx: Context, lo, hi) -> tuple[float, float, pl.DataFrame] | None:
    """Median step time (ms) inside [lo, hi] and outside it, from time-stamped step-time metrics."""
    st = ctx.metric("step_time_ms").filter(pl.col("ts").is_not_null())
    if st.height < 6 or lo is None or hi is None:
        return None
    inside = st.filter(pl.col("ts").is_between(lo, hi))
    outside = st.filter(~pl.col("ts").is_between(lo, hi))
    if inside.height < 2 or outside.height < 2:
        return None
    return float(inside.get_column("value").median()), float(outside.get_column("value").median()), inside


def _snapshot_hit(part: pl.DataFrame, th: dict) -> dict | None:
    """A few `-q` snapshots of one GPU: the hardware holding the clocks down on a GPU that is not idle (a power
    brake asserted by the chassis, a thermal slowdown), or a bare HW Slowdown with the SM clock at half its max
    or less (l4rz/reverse-engineering-dell-idrac-to-get-rid-of-gpu-throttling: HW Power Brake Slowdown Active,
    SM 382 MHz on a V100). A single sample cannot show a share of training, so the hardware bits decide."""
    mask = pl.col("throttle_mask").cast(pl.Int64).fill_null(0)
    working = ((mask & GPU_IDLE) == 0) & (pl.col("utilization_gpu_pct").fill_null(100) > 0)
    ratio = pl.col("sm_clock_mhz") / pl.col("sm_clock_max_mhz")
    held = ((pl.col("_bits") & (HW_POWER_BRAKE | HW_THERMAL)) != 0) | (
        ((pl.col("_bits") & HW_SLOWDOWN) != 0) & (ratio <= th["snapshot_clock_ratio"]).fill_null(False))
    thr = part.filter(working & held)
    if thr.height == 0:
        return None
    bits = 0
    for b in thr.get_column("_bits").unique().to_list():
        bits |= int(b)
    clk = thr.get_column("sm_clock_mhz").drop_nulls()
    mx = thr.get_column("sm_clock_max_mhz").drop_nulls()
    during = float(clk.median()) if clk.len() else None
    usual = float(mx.max()) if mx.len() else None
    drop = (1 - during / usual) if usual and during is not None else None
    return {"thr": thr, "share": thr.height / part.height, "bits": bits, "usual": usual, "during": during, "drop": drop,
            "snapshot": True}


@PLAYBOOK.detector(("gpu",))
def detect_throttling(ctx: Context, th: dict) -> Detection | None:
    """Slowdown reasons active in a share of a GPU's training samples, with its SM clock down."""
    g = S.physical(ctx)
    if g.height == 0 or ("throttle_mask" not in g.columns):
        return None
    g = _flags(g)
    window = S.training_window(ctx)
    hits = []
    for (_file, _source, gpu), part in S.streams(g):
        if part.height < th["min_samples"]:
            snap = _snapshot_hit(part, th)
            if snap is not None:
                hits.append({"gpu": gpu, "w": part, **snap})
            continue
        busy = pl.col("utilization_gpu_pct").fill_null(100) > 5
        w = S.in_window(part, window, th["trim_share"], active=busy)
        if w.height == 0:
            continue
        thr = w.filter(pl.col("_bits") != 0)
        share = thr.height / w.height
        if thr.height < th["min_samples"] or share < th["min_share"]:
            continue
        bits = 0
        for b in thr.get_column("_bits").unique().to_list():
            bits |= int(b)
        free = w.filter(pl.col("_bits") == 0).get_column("sm_clock_mhz").drop_nulls()
        usual = float(free.quantile(0.9)) if free.len() else None
        if usual is None:
            mx = w.get_column("sm_clock_max_mhz").drop_nulls()
            usual = float(mx.max()) if mx.len() else None
        clk = thr.get_column("sm_clock_mhz").drop_nulls()
        during = float(clk.median()) if clk.len() else None
        drop = (1 - during / usual) if usual and during is not None else None
        if bits & ~POWER == 0 and (drop is None or drop < th["clock_drop"]):
            continue  # at the power cap without losing clock: normal at full load
        hits.append({"gpu": gpu, "w": w, "thr": thr, "share": share, "bits": bits, "usual": usual, "during": during, "drop": drop})
    if not hits:
        return None
    hits.sort(key=lambda h: -h["share"])
    top = hits[0]
    thr = top["thr"]
    names = [n for n, b in (("hw_thermal_slowdown", HW_THERMAL), ("sw_thermal_slowdown", SW_THERMAL), ("sw_power_cap", SW_POWER_CAP),
                            ("hw_power_brake_slowdown", HW_POWER_BRAKE), ("hw_slowdown", HW_SLOWDOWN)) if top["bits"] & b]
    causes: dict[str, float] = {}
    all_bits = 0
    for h in hits:
        all_bits |= h["bits"]
    if all_bits & THERMAL:
        causes["cooling"] = 0.9
    if all_bits & POWER:
        causes["power_limit"] = 0.8 if not all_bits & THERMAL else 0.4
    if all_bits & HW_SLOWDOWN and not all_bits & (THERMAL | POWER):
        causes["failing_hardware"] = 0.8
    elif all_bits & HW_SLOWDOWN and not all_bits & HW_POWER_BRAKE:
        causes.setdefault("cooling", 0.6)
    temps = thr.get_column("temperature_c").drop_nulls()
    clock = (f"; SM clock {top['during']:.0f} MHz vs {top['usual']:.0f} MHz usual ({-top['drop']:.0%})"
             if top["drop"] is not None else f"; SM clock {top['during']:.0f} MHz" if top["during"] is not None else "")
    heat = f" at up to {temps.max():.0f} C" if temps.len() else ""
    if top.get("snapshot"):
        summary = f"GPU {top['gpu']} held down by the hardware in an nvidia-smi snapshot ({', '.join(names)} active){clock}{heat}"
    else:
        summary = (f"GPU {top['gpu']} throttled ({', '.join(names)}) in {top['share']:.0%} of its training samples "
                   f"({S.span(thr)}){clock}{heat}")
    facts = {"gpu": int(top["gpu"]), "throttled_share": round(top["share"], 3), "reasons": names,
             "sm_clock_mhz": top["during"], "sm_clock_usual_mhz": top["usual"]}
    if len(hits) > 1:
        summary += f"; also {S.gpu_ids(pl.concat([h['thr'] for h in hits[1:]], how='diagonal_relaxed'))}"
    confidence = 0.8
    cause_ev = {}
    lo, hi = thr.get_column("ts").min(), thr.get_column("ts").max()
    slow = _step_slowdown(ctx, lo, hi)
    if slow is not None:
        inside, outside, rows = slow
        rel = inside / outside - 1 if outside else 0.0
        facts |= {"step_ms_throttled": round(inside, 1), "step_ms_other": round(outside, 1)}
        if rel >= th["step_slowdown"]:
            summary += f"; steps {rel:.0%} slower meanwhile ({inside:.0f} vs {outside:.0f} ms)"
            confidence = 0.9
            for c in causes:
                cause_ev[c] = evidence_rows(rows.sort("value", descending=True).head(2).sort("line"))
    return Detection(
        summary=summary,
        onset=S.onset(thr.row(0, named=True)),
        evidence=S.evidence(pl.concat([thr.head(3), thr.sort("sm_clock_mhz").head(2).sort("line")], how="diagonal_relaxed").unique(["file", "line"], maintain_order=True)),
        evidence_count=sum(h["thr"].height for h in hits),
        causes=causes,
        cause_evidence=cause_ev,
        confidence=confidence,
        facts=facts,
    )

"""Generate the GPU-telemetry run folders of sample_logs/ (no GPU is available where they are made).

Every file copies the exact printouts of the real recordings in ../shared/corpus/nvidia_smi and
reference/formats.md §3: `nvidia-smi --query-gpu=… --format=csv` written by a shell loop (header
before every sample, `YYYY/MM/DD HH:MM:SS.mmm` stamps, `[N/A]`, units after a space),
`--query-compute-apps` loops, `nvidia-smi dmon` (default header, and `-o DT` with date and time
columns), the driver-590 `nvidia-smi` table pasted into a training log, and DCGM `dcgmi dmon`
laid out as NVIDIA/DCGM dcgmi/DeviceMonitor.cpp prints it. The series are simulated per GPU:
start-up idle, training load with noise, sampling jitter of a few ms per row and of the loop
period, evaluation pauses, and the fault each folder is about. Training logs use the line
format of the recorded torchrun run (healthy-torchrun-gloo): Python logging with
`%(asctime)s - %(levelname)s - %(name)s - %(message)s` and `step N loss … step_time_ms T`.

Run from the repository root: `python sample_logs/_scripts/make_gpu_telemetry.py` (deterministic).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent
IDLE, REASON_IDLE = 0.0, 0x1
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL = 0x4, 0x8, 0x20, 0x40


@dataclass(frozen=True)
class Model:
    """What nvidia-smi reports for one GPU model."""

    name: str
    mem_total: int  # MiB as nvidia-smi prints it
    torch_capacity_gib: float  # as torch prints it in an OOM message
    power_limit: float
    sm_max: int
    sm_idle: int
    mem_clock: int
    idle_power: float
    temp_idle: float
    max_temp_rise: float


H100 = Model("NVIDIA H100 80GB HBM3", 81559, 79.10, 700.0, 1980, 345, 2619, 69.0, 31.0, 34.0)
V100 = Model("Tesla V100-SXM2-32GB", 32510, 31.74, 300.0, 1530, 135, 877, 41.0, 33.0, 36.0)
BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
         "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]


@dataclass
class Run:
    """Per-sample, per-GPU series of one simulated run (rows: samples, columns: GPUs)."""

    model: Model
    start: dt.datetime
    t: np.ndarray  # seconds since start, per sample
    rng: np.random.Generator
    n_gpu: int
    util: np.ndarray = field(init=False)
    mem_used: np.ndarray = field(init=False)
    mask: np.ndarray = field(init=False)
    sm_clock: np.ndarray = field(init=False)
    power: np.ndarray = field(init=False)
    temp: np.ndarray = field(init=False)
    mem_util: np.ndarray = field(init=False)
    compute_mode: np.ndarray = field(init=False)
    present: np.ndarray = field(init=False)
    ecc_corr: np.ndarray = field(init=False)
    ecc_uncorr: np.ndarray = field(init=False)
    pending: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        shape = (len(self.t), self.n_gpu)
        self.util = np.zeros(shape)
        self.mem_used = np.zeros(shape)
        self.mask = np.zeros(shape, dtype=np.int64)
        self.sm_clock = np.zeros(shape)
        self.power = np.zeros(shape)
        self.temp = np.zeros(shape)
        self.mem_util = np.zeros(shape)
        self.compute_mode = np.full(shape, "Default", dtype=object)
        self.present = np.ones(shape, dtype=bool)
        self.ecc_corr = np.zeros(shape, dtype=np.int64)
        self.ecc_uncorr = np.zeros(shape, dtype=np.int64)
        self.pending = np.zeros(shape, dtype=bool)

    def finish(self, temp_extra: np.ndarray | None = None, clock_cap: np.ndarray | None = None) -> None:
        """Derive clocks, power, temperature and idle reasons from utilisation (plus scenario overrides)."""
        m, rng = self.model, self.rng
        busy = self.util > 2
        self.sm_clock = np.where(busy, m.sm_max, m.sm_idle).astype(float)
        if clock_cap is not None:
            self.sm_clock = np.minimum(self.sm_clock, clock_cap)
        self.mask = self.mask | np.where(~busy & (self.mask == 0), REASON_IDLE, 0)
        load = self.util / 100.0
        self.power = m.idle_power + (m.power_limit * 0.9 - m.idle_power) * load * (self.sm_clock / m.sm_max) ** 1.5
        self.power = np.round(self.power + rng.normal(0, 6, self.power.shape) * busy + rng.normal(0, 0.4, self.power.shape), 2)
        target = m.temp_idle + m.max_temp_rise * load + np.arange(self.n_gpu)[None, :] % 3
        if temp_extra is not None:
            target = target + temp_extra
        temp = np.empty_like(target)
        temp[0] = m.temp_idle
        for i in range(1, len(self.t)):  # first-order heating/cooling with a ~40 s time constant
            a = 1 - math.exp(-(self.t[i] - self.t[i - 1]) / 40.0)
            temp[i] = temp[i - 1] + a * (target[i] - temp[i - 1])
        self.temp = np.round(temp + rng.normal(0, 0.3, temp.shape))
        self.mem_util = np.clip(np.round(self.util * 0.41 + rng.normal(0, 1.5, self.util.shape)), 0, 100) * busy

    def stamp(self, i: int, g: int, ms_per_gpu: float = 1.3) -> dt.datetime:
        """Time of GPU g's row in sample i: nvidia-smi queries the GPUs one after another."""
        return self.start + dt.timedelta(seconds=float(self.t[i]) + g * ms_per_gpu / 1000.0)


def sample_times(duration_s: float, period_s: float, rng: np.random.Generator) -> np.ndarray:
    """Loop sample times: the period plus the time nvidia-smi itself takes (a few to 30 ms)."""
    n = int(duration_s / period_s)
    return np.cumsum(np.r_[0.0, period_s + rng.uniform(0.004, 0.031, n - 1)])


def phase_util(t: np.ndarray, phases: list[tuple[float, float, str]], n_gpu: int, rng: np.random.Generator,
               busy: float = 96.0, starved_p: float = 0.0) -> np.ndarray:
    """Utilisation per sample and GPU for phases (start_s, end_s, kind): idle | train | eval | starved."""
    u = np.zeros((len(t), n_gpu))
    for a, b, kind in phases:
        sel = (t >= a) & (t < b)
        k = int(sel.sum())
        if kind == "train":
            u[sel] = np.clip(rng.normal(busy, 2.5, (k, n_gpu)), 0, 100)
        elif kind == "eval":
            u[sel] = np.where(rng.random((k, n_gpu)) < 0.25, rng.uniform(20, 60, (k, n_gpu)), rng.uniform(0, 4, (k, n_gpu)))
        elif kind == "starved":
            # A ~0.4 s compute burst when a batch arrives, then a wait for the next one (steps of ~1.6 s):
            # utilization.gpu is the share of each sample period with a kernel running.
            u[sel] = burst_share(t[sel], n_gpu, rng, burst_s=0.4, period_s=1.0 / max(starved_p, 1e-6) * 0.35)
    return np.round(u)


def burst_share(t: np.ndarray, n_gpu: int, rng: np.random.Generator, burst_s: float, period_s: float) -> np.ndarray:
    """Percent of each sample period [t_i, t_i+1) covered by compute bursts arriving every ~period_s."""
    out = np.zeros((len(t), n_gpu))
    edges = np.r_[t, t[-1] + 1.0] if len(t) else t
    for g in range(n_gpu):
        starts = t[0] + np.cumsum(rng.normal(period_s, period_s * 0.35, int((t[-1] - t[0]) / period_s * 1.3) + 10).clip(burst_s))
        lens = rng.normal(burst_s, burst_s * 0.15, len(starts)).clip(0.05)
        for a, b in zip(starts, starts + lens, strict=True):
            lo = np.searchsorted(edges, a, side="right") - 1
            hi = np.searchsorted(edges, b, side="right") - 1
            for i in range(max(lo, 0), min(hi, len(t) - 1) + 1):
                out[i, g] += max(0.0, min(b, edges[i + 1]) - max(a, edges[i])) / (edges[i + 1] - edges[i])
    return np.clip(out * 100, 0, 100)


def mem_profile(t: np.ndarray, n_gpu: int, load_at: float, level: float, end_at: float, rng: np.random.Generator) -> np.ndarray:
    """memory.used: a few MiB until the model is loaded, a steady level (caching allocator) until the process exits."""
    m = np.full((len(t), n_gpu), 0.0)
    on = (t >= load_at) & (t < end_at)
    ramp = np.clip((t - load_at) / 20.0, 0, 1)[:, None]
    m[on] = (level * ramp + rng.integers(-2, 3, (len(t), n_gpu)) * 2 + np.arange(n_gpu) * 6)[on]
    return np.round(np.clip(m, 0, None))


# ---------------------------------------------------------------------------------------------
# Writers: exact printouts.

def fmt_ts(d: dt.datetime) -> str:
    """nvidia-smi's timestamp field: `2026/07/14 08:12:38.696`."""
    return d.strftime("%Y/%m/%d %H:%M:%S.") + f"{d.microsecond // 1000:03d}"


def log_ts(d: dt.datetime) -> str:
    """Python logging's asctime: `2026-11-22 05:26:01,536`."""
    return d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d}"


_UUID_RNG = np.random.default_rng(7)
UUIDS = [f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
         for h in (_UUID_RNG.bytes(16).hex() for _ in range(8))]
SERIALS = [f"1654922{n:06d}" for n in np.random.default_rng(8).integers(0, 999999, 8).tolist()]

# --query-gpu fields: request name -> (header cell, formatter(run, i, g)).
REASON_FIELDS = {
    "clocks_event_reasons.gpu_idle": REASON_IDLE, "clocks_event_reasons.sw_power_cap": SW_POWER_CAP,
    "clocks_event_reasons.hw_slowdown": HW_SLOWDOWN, "clocks_event_reasons.hw_thermal_slowdown": HW_THERMAL,
    "clocks_event_reasons.sw_thermal_slowdown": SW_THERMAL,
}


def query_cell(name: str, r: Run, i: int, g: int) -> tuple[str, str]:
    m = r.model
    if name in REASON_FIELDS:
        return name, "Active" if r.mask[i, g] & REASON_FIELDS[name] else "Not Active"
    cells = {
        "timestamp": ("timestamp", lambda: fmt_ts(r.stamp(i, g))),
        "index": ("index", lambda: str(g)),
        "name": ("name", lambda: m.name),
        "uuid": ("uuid", lambda: UUIDS[g]),
        "pci.bus_id": ("pci.bus_id", lambda: BUSES[g]),
        "pstate": ("pstate", lambda: "P0"),
        "clocks_event_reasons.active": ("clocks_event_reasons.active", lambda: f"0x{int(r.mask[i, g]):016X}"),
        "utilization.gpu": ("utilization.gpu [%]", lambda: f"{int(r.util[i, g])} %"),
        "utilization.memory": ("utilization.memory [%]", lambda: f"{int(r.mem_util[i, g])} %"),
        "memory.used": ("memory.used [MiB]", lambda: f"{int(r.mem_used[i, g])} MiB"),
        "memory.total": ("memory.total [MiB]", lambda: f"{m.mem_total} MiB"),
        "temperature.gpu": ("temperature.gpu", lambda: str(int(r.temp[i, g]))),
        "power.draw": ("power.draw [W]", lambda: f"{r.power[i, g]:.2f} W"),
        "power.limit": ("power.limit [W]", lambda: f"{m.power_limit:.2f} W"),
        "clocks.sm": ("clocks.current.sm [MHz]", lambda: f"{int(r.sm_clock[i, g])} MHz"),
        "clocks.max.sm": ("clocks.max.sm [MHz]", lambda: f"{m.sm_max} MHz"),
        "compute_mode": ("compute_mode", lambda: str(r.compute_mode[i, g])),
        "fan.speed": ("fan.speed [%]", lambda: "[N/A]"),
        "ecc.errors.corrected.volatile.total": ("ecc.errors.corrected.volatile.total", lambda: str(int(r.ecc_corr[i, g]))),
        "ecc.errors.uncorrected.volatile.total": ("ecc.errors.uncorrected.volatile.total", lambda: str(int(r.ecc_uncorr[i, g]))),
        "retired_pages.pending": ("retired_pages.pending", lambda: "Yes" if r.pending[i, g] else "No"),
    }
    head, fn = cells[name]
    return head, fn()


def write_query_gpu(path: Path, r: Run, fields: list[str], lost: dict[int, str] | None = None) -> None:
    """A `while true; do nvidia-smi --query-gpu=… --format=csv; sleep 1; done` capture (header every sample).

    `lost` maps a sample index to the bus id nvidia-smi could not reach from that sample on.
    """
    header = ", ".join(query_cell(f, r, 0, 0)[0] for f in fields)
    out = []
    lost = lost or {}
    for i in range(len(r.t)):
        out.append(header)
        for g in range(r.n_gpu):
            if not r.present[i, g]:
                continue
            out.append(", ".join(query_cell(f, r, i, g)[1] for f in fields))
        for since, bus in lost.items():
            if i >= since:
                # nvidia-smi prints the failure for the device it cannot open, then the other GPUs' rows.
                out.append(f"Unable to determine the device handle for GPU {bus[4:]}: GPU is lost. "
                           "Reboot the system to recover this GPU")
    path.write_text("\n".join(out) + "\n")


def write_compute_apps(path: Path, r: Run, procs: list[dict], every: int = 5) -> None:
    """`nvidia-smi --query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory --format=csv` in a loop.

    procs: dicts with gpu, pid, name, start_s, end_s and mem (MiB, or a callable of t).
    """
    header = "timestamp, gpu_name, gpu_bus_id, gpu_serial, gpu_uuid, pid, process_name, used_gpu_memory [MiB]"
    out = []
    for i in range(0, len(r.t), every):
        out.append(header)
        t = r.t[i]
        stamp = fmt_ts(r.stamp(i, 0) + dt.timedelta(milliseconds=147))
        for p in sorted(procs, key=lambda p: (p["gpu"], p["pid"])):
            if p["start_s"] <= t < p["end_s"]:
                mem = p["mem"](t) if callable(p["mem"]) else p["mem"]
                g = p["gpu"]
                out.append(f"{stamp}, {r.model.name}, {BUSES[g]}, {SERIALS[g]}, {UUIDS[g]}, {p['pid']}, {p['name']}, {int(mem)} MiB")
    path.write_text("\n".join(out) + "\n")


DMON_HDR = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk \n"
            "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz \n")
DMON_DT_HDR = ("#Date       Time        gpu     fb   bar1   ccpm     sm    mem    enc    dec    jpg    ofa  rxpci  txpci   mclk   pclk \n"
               "#YYYYMMDD   HH:MM:SS    Idx     MB     MB     MB      %      %      %      %      %      %   MB/s   MB/s    MHz    MHz \n")


def write_dmon(path: Path, r: Run) -> None:
    """`nvidia-smi dmon` (default `-s puc`): one row per GPU per second, `-` where there is no value."""
    out = [DMON_HDR]
    for i in range(len(r.t)):
        for g in range(r.n_gpu):
            if not r.present[i, g]:
                continue
            mtemp = int(r.temp[i, g]) + 6
            vals = [g, int(round(r.power[i, g])), int(r.temp[i, g]), mtemp, int(r.util[i, g]), int(r.mem_util[i, g]),
                    0, 0, 0, 0, r.model.mem_clock, int(r.sm_clock[i, g])]
            out.append("".join([f"{vals[0]:>5}"] + [f"{v:>7}" for v in vals[1:]]) + " \n")
    path.write_text("".join(out))


def write_dmon_dt(path: Path, r: Run) -> None:
    """`nvidia-smi dmon -o DT` with the frame-buffer, utilisation, PCIe and clock groups."""
    out = [DMON_DT_HDR]
    for i in range(len(r.t)):
        d = r.stamp(i, 0)
        for g in range(r.n_gpu):
            if not r.present[i, g]:
                continue
            rx = int(abs(r.rng.normal(3200, 400))) if r.util[i, g] > 2 else int(r.rng.integers(0, 6))
            vals = [g, int(r.mem_used[i, g]), 5, 0, int(r.util[i, g]), int(r.mem_util[i, g]), 0, 0, 0, 0,
                    rx, rx // 3, r.model.mem_clock, int(r.sm_clock[i, g])]
            out.append(f" {d:%Y%m%d}   {d:%H:%M:%S}" + "".join(f"{v:>7}" for v in vals) + " \n")
    path.write_text("".join(out))


def write_dcgm(path: Path, r: Run, sm_active: np.ndarray, tensor: np.ndarray, dram: np.ndarray) -> None:
    """`dcgmi dmon -e 1002,1004,1005 -d 1000`: DeviceMonitor.cpp layout, header again every 14 ticks."""
    head = f"{'#Entity':<10}" + "".join(f"{n:<13}" for n in ("SMACT", "TENSO", "DRAMA")) + "\n"
    unit = f"{'ID':<10}" + "".join(f"{'':<13}" for _ in range(3)) + "\n"
    out = [head, unit]
    for i in range(len(r.t)):
        if i and i % 15 == 0:
            out += [head, unit]
        for g in range(r.n_gpu):
            vals = [sm_active[i, g], tensor[i, g], dram[i, g]]
            cells = "".join(f"{('N/A' if i == 0 else f'{v:.3f}'):<13}" for v in vals)
            out.append(f"{f'GPU {g}':<10}{cells}\n")
    path.write_text("".join(out))


def smi_table(r: Run, i: int, procs: list[tuple[int, int, str, int]]) -> list[str]:
    """The driver-590 `nvidia-smi` table for sample i (procs: gpu, pid, name, MiB)."""
    d = r.stamp(i, 0)
    bar = "+-----------------------------------------+------------------------+----------------------+"
    lines = [d.strftime("%a %b ") + f"{d.day:>2}" + d.strftime(" %H:%M:%S %Y") + "       ",
             "+-----------------------------------------------------------------------------------------+",
             "| NVIDIA-SMI 590.48.01              Driver Version: 590.48.01      CUDA Version: 13.1     |",
             bar,
             "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
             "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
             "|                                         |                        |               MIG M. |",
             "|=========================================+========================+======================|"]
    m = r.model
    for g in range(r.n_gpu):
        cm = {"Default": "Default", "Exclusive_Process": "E. Process"}[str(r.compute_mode[i, g])]
        lines.append(f"|{g:>4}  {m.name:<31}{'On':>2}  |{BUSES[g]:>19} {'Off':<3} |{int(r.ecc_uncorr[i, g]):>21} |")
        lines.append(f"| {'N/A':<4}{int(r.temp[i, g]):>4}C    {'P0':<4}{int(r.power[i, g]):>13}W / {int(m.power_limit):>4}W "
                     f"|{int(r.mem_used[i, g]):>8}MiB / {m.mem_total:>6}MiB |{int(r.util[i, g]):>7}%{cm:>13} |")
        lines.append(f"|{'':41}|{'':24}|{'Disabled':>21} |")
        lines.append(bar)
    lines += ["",
              "+-----------------------------------------------------------------------------------------+",
              "| Processes:                                                                              |",
              "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
              "|        ID   ID                                                               Usage      |",
              "|=========================================================================================|"]
    if not procs:
        lines.append("|  No running processes found                                                             |")
    for g, pid, name, mib in procs:
        lines.append(f"|{g:>5}{'N/A':>6}{'N/A':>5}{pid:>16}{'C':>7}   {name:<34}{mib:>9}MiB |")
    lines.append("+-----------------------------------------------------------------------------------------+")
    return lines


@dataclass
class TrainLog:
    """A training log in the recorded torchrun format (Python logging to the console)."""

    start: dt.datetime
    lines: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, message)
    raw: list[tuple[float, list[str]]] = field(default_factory=list)  # blocks printed without a log prefix

    def info(self, t: float, msg: str, name: str = "train") -> None:
        self.lines.append((t, f"INFO - {name} - {msg}"))

    def error(self, t: float, text: list[str]) -> None:
        self.raw.append((t, text))

    def steps(self, t0: float, t1: float, step_ms, rng: np.random.Generator, first_step: int = 1,
              loss0: float = 3.9, every: int = 10) -> tuple[int, float]:
        """Step lines from t0 until t1; step_ms(t) is the step time at time t. Returns (next step, time)."""
        t, step = t0, first_step
        while True:
            ms = float(step_ms(t)) * rng.lognormal(0, 0.03)
            if t + ms / 1000 > t1:
                return step, t
            t += ms / 1000
            if step % every == 0:
                loss = loss0 * math.exp(-step / 900) + 1.7 + rng.normal(0, 0.03)
                gn = 0.9 + abs(rng.normal(0, 0.15))
                self.info(t, f"step {step} loss {loss:.4f} lr 3.000e-04 grad_norm {gn:.4f} step_time_ms {ms:.2f}")
            step += 1

    def write(self, path: Path) -> None:
        items = [(t, 0, f"{log_ts(self.start + dt.timedelta(seconds=t))} - {m}") for t, m in self.lines]
        items += [(t, 1, "\n".join(block)) for t, block in self.raw]
        path.write_text("\n".join(text for _t, _k, text in sorted(items, key=lambda x: (x[0], x[1]))) + "\n")


QUERY_FIELDS = ["timestamp", "index", "name", "pci.bus_id", "pstate", "clocks_event_reasons.active", "utilization.gpu",
                "utilization.memory", "memory.used", "memory.total", "temperature.gpu", "power.draw", "power.limit",
                "clocks.sm", "clocks.max.sm", "compute_mode"]


def folder(name: str) -> Path:
    path = OUT / name
    path.mkdir(parents=True, exist_ok=True)
    for old in path.iterdir():
        if old.is_file() and old.name != "expect.toml":
            old.unlink()
    return path


def expect(name: str, body: str) -> None:
    (OUT / name / "expect.toml").write_text(body.strip() + "\n")


def startup_lines(log: TrainLog, n_gpu: int, world: int | None = None) -> None:
    log.info(0.4, f"world_size={world or n_gpu} backend=nccl", "setup")
    log.info(1.1, "loading dataset shards from /data/tokens (512 shards)", "data")
    log.info(9.5, "model: 1.31B parameters, bf16, FSDP FULL_SHARD", "setup")


# ---------------------------------------------------------------------------------------------
# Scenarios.

def healthy() -> None:
    """Busy GPUs, idle during start-up, an evaluation pause and shutdown: nothing to report."""
    rng = np.random.default_rng(101)
    start = dt.datetime(2025, 3, 4, 9, 58, 2, 117000)
    t = sample_times(780, 1.0, rng)
    r = Run(H100, start, t, rng, 4)
    phases = [(0, 75, "idle"), (75, 390, "train"), (390, 430, "eval"), (430, 735, "train"), (735, 1e9, "idle")]
    r.util = phase_util(t, phases, 4, rng)
    r.mem_used = mem_profile(t, 4, 55, 61234, 745, rng)
    r.finish()
    d = folder("healthy/gpu-telemetry")
    write_query_gpu(d / "gpu_query.csv", r, QUERY_FIELDS)
    def own_mem(g: int):
        # A process's used_gpu_memory: the GPU's memory.used less the driver's share, at least its context.
        return lambda tt: max(r.mem_used[min(np.searchsorted(t, tt), len(t) - 1), g] - 530, 482)

    procs = [{"gpu": g, "pid": 48211 + g, "name": "/usr/bin/python3", "start_s": 40, "end_s": 745, "mem": own_mem(g)} for g in range(4)]
    write_compute_apps(d / "compute_apps.csv", r, procs, every=10)
    log = TrainLog(start)
    log.error(0.2, ["$ nvidia-smi"] + smi_table(r, 0, []))
    startup_lines(log, 4)
    step, tt = log.steps(75, 390, lambda _t: 412.0, rng)
    log.info(391.0, f"running evaluation at step {step - 1}", "eval")
    log.info(429.0, f"eval loss {2.2 + rng.normal(0, 0.01):.4f} ppl {math.exp(2.2):.2f}", "eval")
    step, tt = log.steps(430, 735, lambda _t: 412.0, rng, first_step=step)
    log.info(738.0, f"saved checkpoint step_{step - 1} to /ckpt/run-0304", "checkpoint")
    log.info(744.5, "training finished", "train")
    log.write(d / "train.log")
    expect("healthy/gpu-telemetry", """
description = "Healthy 4x H100 run with nvidia-smi telemetry (query-gpu loop, compute-apps loop, a table in the log): idle during the 75 s start-up, a 40 s evaluation pause and shutdown, ~96% busy while training. Idle phases and the gpu_idle clock reason are not findings. Generated by _scripts/make_gpu_telemetry.py."
healthy = true
fires = []
""")


def low_util(nearmiss: bool = False) -> None:
    """A data-starved run: the GPUs wait for batches most of the time (median ~25%)."""
    rng = np.random.default_rng(202 if not nearmiss else 203)
    start = dt.datetime(2025, 3, 5, 14, 2, 41, 530000)
    t = sample_times(720, 1.0, rng)
    r = Run(H100, start, t, rng, 4)
    if not nearmiss:
        r.util = phase_util(t, [(0, 60, "idle"), (60, 700, "starved"), (700, 1e9, "idle")], 4, rng, starved_p=0.22)
    else:
        # Small batches: the GPU is kept ~60% busy, steadily (launch-bound, not waiting for data).
        r.util = phase_util(t, [(0, 60, "idle"), (60, 700, "train"), (700, 1e9, "idle")], 4, rng, busy=61.0)
    r.mem_used = mem_profile(t, 4, 45, 38411, 705, rng)
    r.finish()
    name = "low-gpu-utilization/data-starved-h100" if not nearmiss else "low-gpu-utilization/nearmiss"
    d = folder(name)
    log = TrainLog(start)
    startup_lines(log, 4)
    log.info(2.0, "DataLoader(num_workers=2, pin_memory=False, batch_size=8)", "data")
    step_ms = (lambda _t: 1630.0) if not nearmiss else (lambda _t: 560.0)
    log.steps(60, 700, step_ms, rng)
    log.info(702, "training finished", "train")
    log.write(d / "train.log")
    if not nearmiss:
        write_dmon_dt(d / "dmon.log", r)
        busy = r.util / 100.0
        write_dcgm(d / "dcgm_dmon.log", r, np.round(busy * rng.uniform(0.85, 0.95, busy.shape), 3),
                   np.round(busy * rng.uniform(0.30, 0.40, busy.shape), 3), np.round(busy * rng.uniform(0.25, 0.35, busy.shape), 3))
        expect(name, """
description = "Data-starved 4x H100 run: nvidia-smi dmon -o DT and dcgmi dmon show bursts between long waits, median SM utilisation ~25% during training (the 60 s start-up and shutdown excluded), 1.6 s steps. Generated by _scripts/make_gpu_telemetry.py."
fires = ["low-gpu-utilization"]
root = "low-gpu-utilization"
first_cause = "data_loading"
""")
    else:
        write_query_gpu(d / "gpu_query.csv", r, QUERY_FIELDS)
        expect(name, """
description = "Near miss: 4x H100 run with a steady moderate load, median utilisation ~61% during training (threshold 50%, target 70%), after a 60 s idle start-up. Generated by _scripts/make_gpu_telemetry.py."
fires = []
not_fire = ["low-gpu-utilization"]
""")


def throttling(nearmiss: bool = False) -> None:
    """GPU 2 overheats: thermal slowdown reasons, its SM clock drops, and every step waits for it."""
    rng = np.random.default_rng(303 if not nearmiss else 304)
    start = dt.datetime(2025, 3, 6, 11, 40, 9, 880000)
    t = sample_times(900, 1.0, rng)
    r = Run(H100, start, t, rng, 4)
    phases = [(0, 70, "idle"), (70, 870, "train"), (870, 1e9, "idle")]
    r.util = phase_util(t, phases, 4, rng)
    r.mem_used = mem_profile(t, 4, 50, 70311, 875, rng)
    hot = (t >= 420) & (t < 690)
    temp_extra = np.zeros((len(t), 4))
    cap = np.full((len(t), 4), 99999.0)
    if not nearmiss:
        temp_extra[hot, 2] = 24.0  # a failed fan on GPU 2's side of the chassis
        throttled = hot & (rng.random(len(t)) < 0.85)
        r.mask[throttled, 2] = SW_THERMAL | HW_THERMAL
        cap[throttled, 2] = rng.choice([1185, 1260, 1305, 1350, 1410], int(throttled.sum()))
    else:
        # A GPU at the power cap for two isolated samples, without a clock drop: not throttling the run.
        r.mask[[200, 611], 1] = SW_POWER_CAP
    r.finish(temp_extra=temp_extra, clock_cap=cap)
    name = "gpu-throttling/thermal-h100" if not nearmiss else "gpu-throttling/nearmiss"
    d = folder(name)
    fields = ["timestamp", "index", "name", "pci.bus_id", "temperature.gpu", "utilization.gpu", "memory.used",
              "power.draw", "clocks.sm", "clocks.max.sm", "clocks_event_reasons.gpu_idle", "clocks_event_reasons.sw_power_cap",
              "clocks_event_reasons.hw_slowdown", "clocks_event_reasons.hw_thermal_slowdown", "clocks_event_reasons.sw_thermal_slowdown"]
    write_query_gpu(d / "gpu_query.csv", r, fields)
    log = TrainLog(start)
    startup_lines(log, 4)
    clock2 = r.sm_clock[:, 2]

    def step_ms(tt: float) -> float:
        # DDP: every step waits for the slowest GPU.
        k = min(np.searchsorted(t, tt), len(t) - 1)
        return 430.0 * (H100.sm_max / max(clock2[k], 1000.0)) ** 0.9 if not nearmiss else 430.0

    log.steps(70, 870, step_ms, rng)
    log.info(872, "training finished", "train")
    log.write(d / "train.log")
    if not nearmiss:
        expect(name, """
description = "4x H100 run: GPU 2 hits thermal slowdown (HW + SW thermal reasons Active in the query-gpu loop) from 11:47 to 11:51, its SM clock drops from 1980 to ~1300 MHz at ~88 C, and the logged step time rises from ~430 to ~650 ms over the same window. Generated by _scripts/make_gpu_telemetry.py."
fires = ["gpu-throttling"]
root = "gpu-throttling"
first_cause = "cooling"
""")
    else:
        expect(name, """
description = "Near miss: 4x H100 run with only the GpuIdle clock reason (SM clock 345 MHz while idle) and two isolated SW power cap samples at full clock; step times flat. Generated by _scripts/make_gpu_telemetry.py."
fires = []
not_fire = ["gpu-throttling"]
""")


def hardware_ecc(nearmiss: bool = False) -> None:
    """V100 GPU 1 reports double-bit (uncorrectable) ECC errors and a page pending retirement."""
    rng = np.random.default_rng(404 if not nearmiss else 405)
    start = dt.datetime(2025, 3, 7, 2, 13, 40, 310000)
    t = sample_times(600, 1.0, rng)
    r = Run(V100, start, t, rng, 4)
    phases = [(0, 60, "idle"), (60, 600 if nearmiss else 452, "train")]
    r.util = phase_util(t, phases, 4, rng)
    end = 600 if nearmiss else 458
    r.mem_used = mem_profile(t, 4, 40, 28710, end, rng)
    if not nearmiss:
        r.ecc_uncorr[t >= 431, 1] = 1
        r.ecc_uncorr[t >= 447, 1] = 2
        r.pending[t >= 431, 1] = True
    else:
        # Single-bit errors are corrected by ECC: counted, not a fault.
        r.ecc_corr[:, 3] = np.floor(np.clip((t - 120) / 35.0, 0, None)).astype(int)
    r.finish()
    name = "gpu-hardware-fault/ecc" if not nearmiss else "gpu-hardware-fault/nearmiss"
    d = folder(name)
    fields = ["timestamp", "index", "name", "pci.bus_id", "utilization.gpu", "memory.used", "temperature.gpu",
              "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending"]
    write_query_gpu(d / "gpu_query.csv", r, fields)
    log = TrainLog(start)
    startup_lines(log, 4)
    step, tt = log.steps(60, 452 if not nearmiss else 590, lambda _t: 655.0, rng)
    if not nearmiss:
        log.error(452.2, [
            "[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "/workspace/train.py", line 188, in <module>',
            "[rank1]:     loss.backward()",
            "[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "[rank1]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            "[rank1]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "[rank1]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        ])
        expect(name, """
description = "4x V100 run: GPU 1's volatile uncorrectable ECC count rises 0 -> 1 -> 2 and a retired page goes pending (nvidia-smi query-gpu loop); rank 1 dies with 'CUDA error: uncorrectable ECC error encountered'. Generated by _scripts/make_gpu_telemetry.py."
fires = ["gpu-hardware-fault"]
root = "gpu-hardware-fault"
""")
    else:
        log.info(592, "training finished", "train")
        expect(name, """
description = "Near miss: 4x V100 run where only GPU 3's corrected (single-bit) ECC count rises (0 -> 13); uncorrectable counts stay 0 and no page is pending retirement. Generated by _scripts/make_gpu_telemetry.py."
fires = []
not_fire = ["gpu-hardware-fault"]
""")
    log.write(d / "train.log")


def hardware_lost() -> None:
    """GPU 5 of 8 falls off the bus: it disappears from dmon and nvidia-smi reports it lost."""
    rng = np.random.default_rng(505)
    start = dt.datetime(2025, 3, 8, 22, 47, 5, 40000)
    t = sample_times(540, 1.0, rng)
    r = Run(H100, start, t, rng, 8)
    phases = [(0, 65, "idle"), (65, 540, "train")]
    r.util = phase_util(t, phases, 8, rng)
    r.mem_used = mem_profile(t, 8, 45, 52980, 1e9, rng)
    gone = t >= 371.5
    r.present[gone, 5] = False
    # The other ranks block in the next all-reduce: busy-waiting NCCL kernels keep the SMs at 100%.
    r.finish()
    d = folder("gpu-hardware-fault/lost-gpu")
    write_dmon(d / "dmon.log", r)
    q = Run(H100, start, t[::10], rng, 8)
    for name in ("util", "mem_used", "mask", "sm_clock", "power", "temp", "mem_util", "present"):
        setattr(q, name, getattr(r, name)[::10])
    lost_from = int(np.argmax(q.present[:, 5] == 0))
    write_query_gpu(d / "gpu_query.csv", q, ["timestamp", "index", "pci.bus_id", "utilization.gpu", "memory.used", "temperature.gpu"],
                    lost={lost_from: BUSES[5]})
    log = TrainLog(start)
    startup_lines(log, 8)
    log.steps(65, 371, lambda _t: 515.0, rng)
    log.write(d / "train.log")
    expect("gpu-hardware-fault/lost-gpu", """
description = "8x H100 run: GPU 5 disappears from nvidia-smi dmon at 22:53:16 while the other seven GPUs keep reporting, and the query-gpu loop prints 'Unable to determine the device handle for GPU 0000:AB:00.0: GPU is lost'; training stops there. Generated by _scripts/make_gpu_telemetry.py."
fires = ["gpu-hardware-fault"]
root = "gpu-hardware-fault"
""")


def context_shared(nearmiss: bool = False) -> None:
    """Every rank initialises CUDA on GPU 0 too, and an admin script flips GPU 0's compute mode."""
    rng = np.random.default_rng(606 if not nearmiss else 607)
    start = dt.datetime(2025, 3, 9, 8, 30, 12, 660000)
    t = sample_times(480, 1.0, rng)
    r = Run(H100, start, t, rng, 4)
    phases = [(0, 55, "idle"), (55, 470, "train"), (470, 1e9, "idle")]
    r.util = phase_util(t, phases, 4, rng)
    r.mem_used = mem_profile(t, 4, 35, 44120, 474, rng)
    procs = [{"gpu": g, "pid": 7301 + g, "name": "/opt/conda/bin/python3.11", "start_s": 30, "end_s": 474,
              "mem": float(44120 - 520)} for g in range(4)]
    if not nearmiss:
        r.mem_used[(t >= 32) & (t < 474), 0] += 3 * 502
        for k in (1, 2, 3):  # ranks 1-3 touch cuda:0 before set_device(): a 502 MiB context each
            procs.append({"gpu": 0, "pid": 7301 + k, "name": "/opt/conda/bin/python3.11", "start_s": 32, "end_s": 474, "mem": 502.0})
        flip = (t >= 205) & (t < 262)
        r.compute_mode[flip, 0] = "Exclusive_Process"
    else:
        r.compute_mode[:, :] = "Exclusive_Process"
        # One sample where a restarted worker overlaps its predecessor: not a shared GPU.
        procs.append({"gpu": 2, "pid": 9944, "name": "/opt/conda/bin/python3.11", "start_s": 300, "end_s": 302, "mem": 502.0})
    r.finish()
    name = "cuda-context-corruption/shared-gpu" if not nearmiss else "cuda-context-corruption/nearmiss"
    d = folder(name)
    write_query_gpu(d / "gpu_query.csv", r, QUERY_FIELDS)
    write_compute_apps(d / "compute_apps.csv", r, procs, every=1 if nearmiss else 5)
    log = TrainLog(start)
    startup_lines(log, 4)
    if not nearmiss:
        step, tt = log.steps(55, 262.4, lambda _t: 388.0, rng)
        log.error(262.5, [
            "[rank2]: Traceback (most recent call last):",
            '[rank2]:   File "/workspace/train.py", line 201, in <module>',
            "[rank2]:     torch.cuda.synchronize()",
            "[rank2]: RuntimeError: CUDA error: invalid resource handle",
            "[rank2]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            "[rank2]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "[rank2]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        ])
        step, tt = log.steps(263, 470, lambda _t: 388.0, rng, first_step=step)
        expect(name, """
description = "4x H100 DDP run: all four ranks hold a CUDA context on GPU 0 (four PIDs in the compute-apps loop), GPU 0's compute mode flips Default -> Exclusive_Process -> Default, and rank 2 reports 'CUDA error: invalid resource handle'. Generated by _scripts/make_gpu_telemetry.py."
fires = ["cuda-context-corruption"]
root = "cuda-context-corruption"
""")
    else:
        log.steps(55, 470, lambda _t: 388.0, rng)
        log.info(471, "training finished", "train")
        expect(name, """
description = "Near miss: 4x H100 run in Exclusive_Process compute mode throughout (no flip), one process per GPU except one 2-second overlap of a restarted worker. Generated by _scripts/make_gpu_telemetry.py."
fires = []
not_fire = ["cuda-context-corruption"]
""")
    log.write(d / "train.log")


def memory_leak(nearmiss: bool = False) -> None:
    """memory.used climbs steadily under a steady load until the OOM (or plateaus after warm-up)."""
    rng = np.random.default_rng(707 if not nearmiss else 708)
    start = dt.datetime(2025, 3, 10, 16, 5, 51, 90000)
    dur = 1500 if not nearmiss else 1300
    t = sample_times(dur, 2.0, rng)
    r = Run(H100, start, t, rng, 2)
    end = 1462 if not nearmiss else 1280
    phases = [(0, 50, "idle"), (50, end, "train"), (end, 1e9, "idle")]
    r.util = phase_util(t, phases, 2, rng)
    base = mem_profile(t, 2, 35, 31200, end + 4, rng)
    if not nearmiss:
        grow = np.clip(t - 50, 0, None)[:, None] * (47800 / (end - 50))  # ~34 MiB per second (a list of logits kept per step)
        r.mem_used = np.where(base > 0, base + np.round(grow / 2) * 2, 0)
    else:
        warm = 30500 * np.clip((t - 50) / 140.0, 0, 1)[:, None]  # allocator warm-up over the first ~2 minutes
        r.mem_used = np.where(base > 0, base + np.round(warm) + np.where(t[:, None] > 640, 1536, 0), 0)
    r.finish()
    name = "memory-leak/gpu" if not nearmiss else "memory-leak/gpu-nearmiss"
    d = folder(name)
    write_dmon_dt(d / "dmon.log", r)
    log = TrainLog(start)
    startup_lines(log, 2)
    step, tt = log.steps(50, end, lambda _t: 520.0, rng)
    if not nearmiss:
        log.error(end + 0.3, [
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 143, in <module>',
            "    logits = model(batch)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.10 GiB "
            "of which 1.12 GiB is free. Including non-PyTorch memory, this process has 77.96 GiB memory in use. Of the allocated "
            "memory 75.80 GiB is allocated by PyTorch, and 1.61 GiB is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
            "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        ])
        expect(name, """
description = "2x H100 run: nvidia-smi dmon -o DT fb climbs steadily from ~31 GiB to ~79 GiB under a steady load (a leak), ending in torch.OutOfMemoryError on GPU 0. Generated by _scripts/make_gpu_telemetry.py."
fires = ["memory-leak", "cuda-oom"]
root = "memory-leak"
""")
    else:
        log.info(end + 2, "training finished", "train")
        expect(name, """
description = "Near miss: 2x H100 run where memory.used (nvidia-smi dmon -o DT fb) rises only while the caching allocator warms up and by 1.5 GiB once, then stays flat for 18 minutes. Generated by _scripts/make_gpu_telemetry.py."
fires = []
not_fire = ["memory-leak"]
""")
    log.write(d / "train.log")


def oom_foreign() -> None:
    """Someone's notebook kernel grabs 38 GiB on GPU 1; rank 1 runs out of memory."""
    rng = np.random.default_rng(808)
    start = dt.datetime(2025, 3, 11, 10, 20, 33, 410000)
    t = sample_times(420, 1.0, rng)
    r = Run(H100, start, t, rng, 2)
    oom_t = 331.6
    phases = [(0, 50, "idle"), (50, oom_t, "train")]
    r.util = phase_util(t, phases, 2, rng)
    r.mem_used = mem_profile(t, 2, 30, 41480, oom_t + 1.5, rng)
    foreign = (t >= 240) & (t < 1e9)
    r.mem_used[foreign, 1] += 38912
    r.finish()
    d = folder("cuda-oom/foreign-process")
    write_query_gpu(d / "gpu_query.csv", r, ["timestamp", "index", "name", "uuid", "pci.bus_id", "utilization.gpu", "memory.used",
                                             "memory.total", "temperature.gpu", "power.draw"])
    procs = [{"gpu": g, "pid": 31877 + g, "name": "/usr/bin/python3", "start_s": 28, "end_s": oom_t + 1.5, "mem": 41480.0 - 520}
             for g in range(2)]
    procs.append({"gpu": 1, "pid": 2718281, "name": "/home/jdoe/.venv/bin/python", "start_s": 240, "end_s": 1e9, "mem": 38912.0})
    write_compute_apps(d / "compute_apps.csv", r, procs, every=5)
    for rank in (0, 1):
        log = TrainLog(start)
        startup_lines(log, 2)
        rng_r = np.random.default_rng(900 + rank)
        log.steps(50, oom_t, lambda _t: 702.0, rng_r)
        if rank == 1:
            log.error(oom_t + 0.1, [
                "[rank1]: Traceback (most recent call last):",
                '[rank1]:   File "/workspace/train.py", line 143, in <module>',
                "[rank1]:     loss.backward()",
                "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
                "79.10 GiB of which 212.00 MiB is free. Including non-PyTorch memory, this process has 40.53 GiB memory in use. Of "
                "the allocated memory 38.90 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated. If "
                "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
            ])
        log.write(d / f"rank{rank}.log")
    expect("cuda-oom/foreign-process", """
description = "2x H100 run: a foreign process (PID 2718281, 38 GiB) appears on GPU 1 in the compute-apps loop; rank 1 then runs out of memory on GPU 1 holding only 40.5 GiB itself. The OOM text (inside a container) names no other process: only nvidia-smi shows the foreign PID. Generated by _scripts/make_gpu_telemetry.py."
fires = ["cuda-oom"]
# The foreign process on GPU 1 is also two compute processes on one GPU: cuda-context-corruption reports it
# (medium) as a second root instead of as part of cuda-oom's foreign-process cause.
tolerate = ["cuda-context-corruption"]
root = "cuda-oom"
""")


def main() -> None:
    healthy()
    low_util()
    low_util(nearmiss=True)
    throttling()
    throttling(nearmiss=True)
    hardware_ecc()
    hardware_ecc(nearmiss=True)
    hardware_lost()
    context_shared()
    context_shared(nearmiss=True)
    memory_leak()
    memory_leak(nearmiss=True)
    oom_foreign()


if __name__ == "__main__":
    main()

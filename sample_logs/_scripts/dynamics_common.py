"""Shared pieces of the dynamics_*.py recordings: tiny models, data, and the log formats real tools print.

Every recording trains a real (tiny, CPU) PyTorch model; only the *printing* is shared here,
and each printer copies a format documented in ../shared/reference/formats.md:

* `plain`: a user loop's `step N loss X lr Y grad_norm Z ...` line (as healthy-plain-loop);
* `megatron_line`: Megatron-LM's `training_log()` iteration line (format string of HEAD, §1.2);
* `ds_logger` / `log_dist`: DeepSpeed's logger prefix and `[Rank 0] ` (§0.1, §1.3), used for the
  fp16 loss-scaler messages of `DynamicLossScaler` (texts of deepspeed/runtime/fp16/loss_scaler.py
  and unfused_optimizer.py);
* `MetricLogger`: the torchvision-references / DeiT `log_every` line (§1.15), two-space delimiter,
  no `max mem` field on a CPU-only machine (as the current references print it);
* `fairseq_line`: fairseq's `train_inner` simple-format line with `gnorm` and `clip` meters (§1.10).
"""

from __future__ import annotations

import datetime
import logging
import math
import sys
import time
from collections import deque

import torch

# ------------------------------------------------------------------ printing


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def plain(step: int, **fields: str) -> None:
    """`step 12 loss 2.3456 lr 1.000e-03 grad_norm 0.8123` (values already formatted by the caller)."""
    print(f"step {step} " + " ".join(f"{k} {v}" for k, v in fields.items()), flush=True)


def megatron_line(iteration: int, train_iters: int, consumed: int, elapsed_ms: float, lr: float, gbs: int,
                  loss: float | None, loss_scale: float, grad_norm: float | None, skipped: int, nans: int) -> None:
    """Megatron-LM `training_log()` line; the loss field is left out when no iteration of the interval
    advanced (skipped iterations are not averaged in; the `if avg > 0.0` form of most releases)."""
    s = f" [{datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    s += f" iteration {iteration:8d}/{train_iters:8d} |"
    s += f" consumed samples: {consumed:12d} |"
    s += f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
    s += f" learning rate: {lr:.6E} |"
    s += f" global batch size: {gbs:5d} |"
    if loss is not None and loss >= 0.0:
        s += " {}: {:.6E} |".format("lm loss", loss)
    s += f" loss scale: {loss_scale:.1f} |"
    if grad_norm is not None:
        s += f" grad norm: {grad_norm:.3f} |"
    s += f" number of skipped iterations: {skipped:3d} |"
    s += f" number of nan iterations: {nans:3d} |"
    print(s, flush=True)


def ds_logger() -> logging.Logger:
    """A logger with DeepSpeed's format `[asctime] [LEVEL] [file:line:func] message` on stdout."""
    log = logging.getLogger("DeepSpeed")
    if not log.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


class DynamicLossScaler:
    """DeepSpeed's dynamic loss-scale algorithm (scale_factor 2, scale_window, min_scale, no hysteresis).

    `update_scale(overflow)` halves the scale on an overflow (printing DeepSpeed's overflow message)
    and doubles it after `scale_window` clean steps (printing the unfused optimizer's verbose lines).
    """

    def __init__(self, init_scale: float = 2.0**16, scale_window: int = 1000, min_scale: float = 1.0,
                 rank: int = 0, verbose_increase: bool = True, quiet: bool = False) -> None:
        self.cur_scale = init_scale
        self.scale_window = scale_window
        self.min_scale = min_scale
        self.rank = rank
        self.last_overflow_iter = -1
        self.cur_iter = 0
        self.verbose_increase = verbose_increase and not quiet
        self.quiet = quiet  # GradScaler and Megatron's grad scaler print nothing
        self.log = ds_logger()

    @property
    def loss_scale(self) -> float:
        return self.cur_scale

    def has_overflow(self, params) -> bool:
        for p in params:
            if p.grad is not None and not torch.isfinite(p.grad).all():
                return True
        return False

    def update_scale(self, overflow: bool) -> None:
        if overflow:
            next_scale = max(self.cur_scale / 2.0, self.min_scale)
            if not self.quiet:
                self.log.info(f"[deepspeed] OVERFLOW! Rank {self.rank} Skipping step. Attempted loss scale: "
                          f"{int(self.cur_scale)}, reducing to {int(next_scale)}")
            self.cur_scale = next_scale
            self.last_overflow_iter = self.cur_iter
        elif (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
            prev = self.cur_scale
            self.cur_scale *= 2.0
            if self.verbose_increase:
                self.log.info(f"No Grad overflow for {self.scale_window} iterations")
                self.log.info(f"Increasing dynamic loss scale from {prev} to {self.cur_scale}")
        self.cur_iter += 1


class SmoothedValue:
    """A window of values with median / avg / global average, formatted like torchvision's."""

    def __init__(self, window_size: int = 20, fmt: str | None = None) -> None:
        self.deque: deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt or "{median:.4f} ({global_avg:.4f})"

    def update(self, value: float, n: int = 1) -> None:
        self.deque.append(value)
        self.count += n
        self.total += value * n

    def __str__(self) -> str:
        d = torch.tensor(list(self.deque))
        return self.fmt.format(median=d.median().item(), avg=d.float().mean().item(),
                               global_avg=self.total / self.count, max=max(self.deque), value=self.deque[-1])


class MetricLogger:
    """`log_every` of the torchvision references: `Epoch: [0]  [ 10/100]  eta: ...  lr: ...  loss: ...  time: ...  data: ...`."""

    def __init__(self, delimiter: str = "  ") -> None:
        self.meters: dict[str, SmoothedValue] = {}
        self.delimiter = delimiter

    def add_meter(self, name: str, meter: SmoothedValue) -> None:
        self.meters[name] = meter

    def update(self, **kwargs: float) -> None:
        for k, v in kwargs.items():
            self.meters.setdefault(k, SmoothedValue()).update(float(v))

    def __str__(self) -> str:
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def log_every(self, iterable, print_freq: int, header: str = ""):
        i = 0
        start_time = end = time.time()
        iter_time = SmoothedValue(fmt="{avg:.4f}")
        data_time = SmoothedValue(fmt="{avg:.4f}")
        space_fmt = ":" + str(len(str(len(iterable)))) + "d"
        log_msg = self.delimiter.join([header, "[{0" + space_fmt + "}/{1}]", "eta: {eta}", "{meters}",
                                       "time: {time}", "data: {data}"])
        for obj in iterable:
            data_time.update(time.time() - end)
            yield obj
            iter_time.update(time.time() - end)
            if i % print_freq == 0 or i == len(iterable) - 1:
                eta_seconds = iter_time.total / iter_time.count * (len(iterable) - i)
                eta_string = str(datetime.timedelta(seconds=int(eta_seconds)))
                print(log_msg.format(i, len(iterable), eta=eta_string, meters=str(self), time=str(iter_time),
                                     data=str(data_time)), flush=True)
            i += 1
            end = time.time()
        total_time = time.time() - start_time
        total_time_str = str(datetime.timedelta(seconds=int(total_time)))
        print(f"{header} Total time: {total_time_str} ({total_time / len(iterable):.4f} s / it)", flush=True)


def fairseq_line(epoch: int, i: int, size: int, stats: dict[str, str]) -> None:
    """fairseq `--log-format simple` progress line through its CLI logging prefix."""
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    postfix = ", ".join(f"{k}={v}" for k, v in stats.items())
    print(f"{now} | INFO | train_inner | epoch {epoch:03d}: {i:6d} / {size:d} {postfix}", flush=True)


def fmt_g(x: float) -> str:
    """fairseq's `{:g}`-style rounding of a meter (3 decimals, trailing zeros dropped)."""
    return f"{round(x, 3):g}"


# ------------------------------------------------------------------ models and data


def mlp(d_in: int = 16, hidden: int = 64, depth: int = 2, act=torch.nn.GELU, d_out: int = 1) -> torch.nn.Sequential:
    """A plain MLP of `depth` hidden layers."""
    layers: list[torch.nn.Module] = []
    d = d_in
    for _ in range(depth):
        layers += [torch.nn.Linear(d, hidden), act()]
        d = hidden
    layers.append(torch.nn.Linear(d, d_out))
    return torch.nn.Sequential(*layers)


class Regression:
    """y = x @ w + noise, drawn from its own generator (so a run is reproducible from its seed)."""

    def __init__(self, d: int = 16, seed: int = 7, noise: float = 0.1) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.w = 0.5 * torch.randn(d, 1, generator=torch.Generator().manual_seed(seed + 1000))
        self.d = d
        self.noise = noise

    def batch(self, n: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, self.d, generator=self.g)
        return x, x @ self.w + self.noise * torch.randn(n, 1, generator=self.g)


def grad_norm(params) -> float:
    """The global L2 norm of the gradients (what clip_grad_norm_ returns), NaN/Inf kept."""
    grads = [p.grad.detach().flatten() for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return torch.cat(grads).norm().item()


def nan_to_str(x: float, spec: str) -> str:
    """Format like an f-string does (nan / inf print as such)."""
    return format(x, spec) if math.isfinite(x) else str(x)

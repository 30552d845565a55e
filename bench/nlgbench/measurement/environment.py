"""The environment record of a measured cell: machine, GPU (driver and clocks, read through NVML or
nvidia-smi), library versions, git commit, host and Slurm job."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

import psutil

from nlgbench.foundations.deferred import library_version
from nlgbench.foundations.machine import cpu_model
from nlgbench.foundations.package import checkout_dir
from nlgbench.foundations.version import __version__
from nlgbench.measurement.devices import Device
from nlgbench.measurement.energy import nvml_handle


def git_commit() -> str | None:
    """The project's git commit (with `-dirty` when the work tree has changes), if it runs from a checkout
    (None from an installed wheel)."""
    repository = checkout_dir()
    if repository is None:
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(repository), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(repository), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_record(device: Device) -> dict[str, Any]:
    """The GPU a CUDA device is: name, compute capability, memory, driver, and clocks (current and
    maximum SM and memory clocks, MHz) where NVML (pynvml) or nvidia-smi can read them; empty on CPU
    or without CUDA. Values that cannot be read are None."""
    if not device.is_cuda:
        return {}
    import torch

    if not torch.cuda.is_available():
        return {}
    dev = device.torch_device()
    props = torch.cuda.get_device_properties(dev)
    out: dict[str, Any] = {
        "gpu_capability": f"{props.major}.{props.minor}",
        "gpu_memory_mb": round(props.total_memory / 2**20),
        "gpu_multiprocessors": props.multi_processor_count,
        "gpu_driver": None,
        "gpu_sm_clock_mhz": None,
        "gpu_sm_clock_max_mhz": None,
        "gpu_mem_clock_mhz": None,
        "gpu_mem_clock_max_mhz": None,
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = nvml_handle(pynvml, device.name)
        driver = pynvml.nvmlSystemGetDriverVersion()
        out.update(
            {
                "gpu_driver": driver.decode() if isinstance(driver, bytes) else driver,
                "gpu_sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "gpu_sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "gpu_mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                "gpu_mem_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            }
        )
        return out
    except Exception:  # no pynvml or NVML: ask nvidia-smi
        pass
    uuid = getattr(props, "uuid", None)
    out.update(nvidia_smi_record(f"GPU-{uuid}" if uuid is not None else str(dev.index or 0)))
    return out


NVIDIA_SMI_FIELDS = {  # nvidia-smi --query-gpu field -> environment key
    "driver_version": "gpu_driver",
    "clocks.sm": "gpu_sm_clock_mhz",
    "clocks.max.sm": "gpu_sm_clock_max_mhz",
    "clocks.mem": "gpu_mem_clock_mhz",
    "clocks.max.mem": "gpu_mem_clock_max_mhz",
}


def nvidia_smi_record(gpu_id: str) -> dict[str, Any]:
    """Driver and clocks of one GPU (`nvidia-smi -i ID`); {} when nvidia-smi cannot be run."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "-i", gpu_id, f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    return parse_nvidia_smi(done.stdout)


def parse_nvidia_smi(text: str) -> dict[str, Any]:
    """The first line of `nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits`:
    the driver as text, clocks as ints (None where nvidia-smi says `[N/A]` or similar)."""
    lines = text.strip().splitlines()
    if not lines:
        return {}
    values = [v.strip() for v in lines[0].split(",")]
    if len(values) != len(NVIDIA_SMI_FIELDS):
        return {}
    out: dict[str, Any] = {}
    for (field, key), value in zip(NVIDIA_SMI_FIELDS.items(), values, strict=True):
        if field == "driver_version":
            out[key] = value or None
        else:
            out[key] = int(float(value)) if value.replace(".", "", 1).isdigit() else None
    return out


def job_record(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Where the process runs: the host name (`node`) and, under Slurm, the job id and, for an
    array job, the array's job id and this task's index (None when unset)."""
    env = dict(os.environ) if env is None else env
    return {
        "node": platform.node(),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
        "slurm_array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
    }


def environment(device: Device) -> dict[str, Any]:
    """Everything about the machine and software that a result depends on. Library versions are read
    without importing the libraries; torch's threads and CUDA build are None where the cell never
    imported torch (it ran no model)."""
    torch = device.torch()
    gpu = None
    if torch is not None and device.is_cuda and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(device.torch_device())
    return {
        "cpu_model": cpu_model(),
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "memory_total_mb": round(psutil.virtual_memory().total / 2**20),
        "gpu": gpu,
        "cuda": torch.version.cuda if torch is not None else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": library_version("torch", "torch"),
        "transformers": library_version("transformers", "transformers"),
        "pot": library_version("ot", "POT"),
        "nlgbench": __version__,
        "git_commit": git_commit(),
        **job_record(),
        **gpu_record(device),
    }

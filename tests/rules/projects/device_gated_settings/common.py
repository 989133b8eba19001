"""Set-up helpers of the project: the program-wide settings are made only on a CUDA device (a test
every GPU run passes), or only when a run opts in."""
import torch


def compute_init(device_type="cuda"):
    torch.manual_seed(0)
    if device_type == "cuda":
        torch.set_float32_matmul_precision("high")
    return torch.device(device_type)


def setup_backends(device):
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True


def maybe_tf32(enable):
    if enable:
        torch.backends.cuda.matmul.allow_tf32 = True

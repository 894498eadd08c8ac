r"""Suite-wide test configuration.

The ``device`` fixture: every test that takes an argument named ``device``
runs once per test device, with ``device`` a :class:`torch.device`, and
builds its inputs there. By default the devices are the CPU and CUDA, the
CUDA variant skipped when :func:`torch.cuda.is_available` is false. The
environment variable ``TORCH_GEOMETRIC_HOT_TEST_DEVICE`` (e.g. ``cuda``,
``cuda:1``, ``cpu``) runs those tests on that one device instead; naming a
device this machine does not have is an error, not a run of skips.

Every test leaves the process-wide size limit as it found it.
"""
import os
from typing import List

import pytest
import torch

# Unit tests run on tiny tensors, where OpenMP's thread start-up and
# spinning dominate (measured: the HOT kernel gradcheck takes 3 s with one
# thread and 20-120 s with two on a loaded 2-core machine). Benchmarks, not
# tests, measure multi-threaded speed.
torch.set_num_threads(1)

DEVICE_VARIABLE = 'TORCH_GEOMETRIC_HOT_TEST_DEVICE'


def device_available(device: torch.device) -> bool:
    r"""Whether tensors can be created on :obj:`device` here."""
    if device.type == 'cpu':
        return True
    if device.type == 'cuda':
        return torch.cuda.is_available() and (
            device.index is None or device.index < torch.cuda.device_count())
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError):
        return False
    return True


def selected_devices() -> List[torch.device]:
    r"""The devices the ``device`` fixture runs on (see the module
    docstring); raises :class:`pytest.UsageError` for a device named in
    ``TORCH_GEOMETRIC_HOT_TEST_DEVICE`` that is unknown or absent."""
    chosen = os.environ.get(DEVICE_VARIABLE, '').strip()
    if not chosen:
        return [torch.device('cpu'), torch.device('cuda')]
    try:
        device = torch.device(chosen)
    except RuntimeError as error:
        raise pytest.UsageError(f"{DEVICE_VARIABLE}={chosen!r} is not a "
                                f"torch device: {error}") from None
    if not device_available(device):
        raise pytest.UsageError(f"{DEVICE_VARIABLE}={chosen!r}: no such "
                                f"device on this machine")
    return [device]


DEVICES: List[torch.device] = []


def pytest_configure(config) -> None:
    DEVICES[:] = selected_devices()  # a usage error here stops the run


def pytest_report_header(config) -> str:
    names = [
        str(d) if device_available(d) else f'{d} (not available: skipped)'
        for d in DEVICES
    ]
    return f"test devices ({DEVICE_VARIABLE}): {', '.join(names)}"


def pytest_generate_tests(metafunc) -> None:
    if 'device' not in metafunc.fixturenames:
        return
    params = [
        pytest.param(
            device, id=str(device), marks=() if device_available(device) else
            pytest.mark.skip(reason=f'no {device.type} device'))
        for device in DEVICES
    ]
    metafunc.parametrize('device', params)


@pytest.fixture(autouse=True)
def _restore_size_limit():
    # the training command sets the process-wide size limit (a run is a
    # process); a test that runs it in this process must not leave it set
    from torch_geometric_hot.validation import current_size_limit, \
        set_size_limit
    limit = current_size_limit()
    yield
    set_size_limit(limit)

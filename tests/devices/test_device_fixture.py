r"""The ``device`` fixture's devices: the CPU and CUDA by default, one device
chosen by ``TORCH_GEOMETRIC_HOT_TEST_DEVICE`` instead, and a clear usage
error for a device that is not there (``tests/conftest.py``)."""
import importlib.util
from pathlib import Path

import pytest
import torch

# the suite's conftest by its path (tests/robustness has a conftest too)
_SPEC = importlib.util.spec_from_file_location(
    'suite_conftest', Path(__file__).resolve().parents[1] / 'conftest.py')
conftest = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(conftest)

VARIABLE = 'TORCH_GEOMETRIC_HOT_TEST_DEVICE'


def test_default_devices_and_a_chosen_one(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    assert conftest.selected_devices() == [
        torch.device('cpu'), torch.device('cuda')
    ]
    monkeypatch.setenv(VARIABLE, 'cpu')
    assert conftest.selected_devices() == [torch.device('cpu')]
    monkeypatch.setenv(VARIABLE, 'meta')  # any device torch can create
    assert conftest.selected_devices() == [torch.device('meta')]


def test_a_device_that_is_not_there_is_a_usage_error(monkeypatch):
    absent = 'cuda:64' if torch.cuda.is_available() else 'cuda'
    for value, message in ((absent, 'no such device on this machine'),
                           ('gpu', 'is not a torch device')):
        monkeypatch.setenv(VARIABLE, value)
        with pytest.raises(pytest.UsageError,
                           match=f"{VARIABLE}='{value}'.*{message}"):
            conftest.selected_devices()

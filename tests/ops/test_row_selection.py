import pytest
import torch

import torch_geometric_hot.ops.row_selection as row_selection
from torch_geometric_hot.ops.row_selection import select_rows


@pytest.mark.parametrize('rows', [[2, 3, 4], [0, 1, 8], [6], [5, 2, 2],
                                  list(range(10))])
def test_equals_list_indexing_with_gradients(rows, device):
    t = torch.randn(10, 3, 2, device=device, requires_grad=True)
    out = select_rows(t, rows)
    torch.testing.assert_close(out, t[rows])
    grad = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, t, grad)[0],
                               torch.autograd.grad(t[rows], t, grad)[0])


def test_consecutive_rows_are_a_view():
    t = torch.randn(10, 3)
    assert select_rows(t, [2, 3, 4]).data_ptr() == t[2].data_ptr()
    assert select_rows(t, range(10)) is t  # all of them: no operator


def test_index_is_made_once_per_list_and_device(monkeypatch):
    # off the CPU the index tensor is kept: no host-to-device copy per call
    monkeypatch.setattr(row_selection, '_indices', {})
    made = []
    tensor = torch.tensor
    monkeypatch.setattr(row_selection.torch, 'tensor',
                        lambda *a, **k: made.append(1) or tensor(*a, **k))
    t = torch.empty(10, 3, device='meta')
    for _ in range(3):
        assert select_rows(t, [0, 1, 8]).shape == (3, 3)
    select_rows(t, [8, 1])
    assert len(made) == 2

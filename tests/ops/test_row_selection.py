import pytest
import torch

import torch_geometric_hot.ops.row_selection as row_selection
from torch_geometric_hot.ops.layout_device import planned_for
from torch_geometric_hot.ops.row_selection import select_rows
from torch_geometric_hot.testing import SyncRecorder


@pytest.mark.parametrize('rows', [[2, 3, 4], [0, 1, 8], [6], [5, 2, 2],
                                  [7, 8, 0, 1, 9], [], list(range(10))])
@pytest.mark.parametrize('layout', [None, 'cuda'])
@pytest.mark.parametrize('dim', [0, 1, -1])
def test_equals_list_indexing_with_gradients(rows, layout, dim, device):
    # with a GPU's layout, the kept index tensor on any device
    t = torch.randn(10, 3, 2, device=device).movedim(0, dim)
    t.requires_grad_()
    with planned_for(layout):
        out = select_rows(t, rows, dim=dim)
    expected = t[(slice(None), ) * (dim % 3) + (rows, )]
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, t, grad)[0],
                               torch.autograd.grad(expected, t, grad)[0])


def test_consecutive_rows_are_a_view():
    t = torch.randn(10, 3)
    assert select_rows(t, [2, 3, 4]).data_ptr() == t[2].data_ptr()
    assert select_rows(t, range(10)) is t  # all of them: no operator


def test_index_is_made_on_the_device_once_per_list(monkeypatch):
    # off the CPU the index tensor is kept, and made without a copy from
    # the host
    monkeypatch.setattr(row_selection, '_indices', {})
    t = torch.empty(10, 3, device='meta')
    with SyncRecorder() as recorder:
        for _ in range(3):
            assert select_rows(t, [0, 1, 8]).shape == (3, 3)
        select_rows(t, [8, 1])
    assert not recorder.counts, recorder.summary()
    assert len(row_selection._indices) == 2

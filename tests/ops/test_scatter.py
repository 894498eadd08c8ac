import pytest
import torch

from torch_geometric_hot.ops import scatter
from torch_geometric_hot.ops.softmax import grouped_softmax

BACKENDS = ['torch'] + (['torch_scatter']
                        if scatter.torch_scatter_available() else [])


@pytest.mark.parametrize('backend', BACKENDS)
def test_sum_and_max_with_empty_groups(backend):
    src = torch.tensor([[1.0, -2.0], [3.0, -1.0], [-5.0, -7.0]])
    index = torch.tensor([0, 0, 2])
    with scatter.use_backend(backend) as name:
        assert name == backend == scatter.current_backend()
        assert scatter.scatter_sum(src, index, 4).tolist() == [
            [4.0, -3.0], [0.0, 0.0], [-5.0, -7.0], [0.0, 0.0]]
        assert scatter.scatter_max(src, index, 4).tolist() == [
            [3.0, -1.0], [0.0, 0.0], [-5.0, -7.0], [0.0, 0.0]]
        empty = scatter.scatter_max(src[:0], index[:0], 2)
        assert empty.tolist() == [[0.0, 0.0], [0.0, 0.0]]
        three_d = scatter.scatter_sum(src.view(3, 2, 1), index, 3)
        assert three_d.shape == (3, 2, 1)


@pytest.mark.parametrize('backend', BACKENDS)
def test_grouped_softmax_is_stable_and_normalised(backend):
    logits = torch.tensor([[1000.0], [1001.0], [-3.0]], dtype=torch.float64)
    group = torch.tensor([1, 1, 0])
    with scatter.use_backend(backend):
        alpha = grouped_softmax(logits, group, 3)
    assert torch.isfinite(alpha).all()
    torch.testing.assert_close(alpha.view(-1)[2], torch.tensor(
        1.0, dtype=torch.float64))
    torch.testing.assert_close(alpha[:2].sum(), torch.tensor(
        1.0, dtype=torch.float64))
    with pytest.raises(ValueError, match="'group'"):
        grouped_softmax(logits, group[:2], 3)


def test_backend_names_are_checked():
    with pytest.raises(ValueError, match='scatter backend'):
        with scatter.use_backend('cuda'):
            pass
    if not scatter.torch_scatter_available():
        with pytest.raises(ValueError, match='not installed'):
            with scatter.use_backend('torch_scatter'):
                pass

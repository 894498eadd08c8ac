import pytest
import torch

from torch_geometric_hot.nn import CategoricalEncoder


def test_sum_of_one_embedding_per_column(device):
    torch.manual_seed(0)
    encoder = CategoricalEncoder([3, 5], 4).to(device)
    x = torch.tensor([[0, 4], [2, 0], [1, 3]], device=device)
    expected = encoder.embeddings[0](x[:, 0]) + encoder.embeddings[1](x[:, 1])
    assert torch.equal(encoder(x), expected)
    assert encoder(x[:0]).shape == (0, 4)  # a graph without nodes
    assert repr(encoder) == 'CategoricalEncoder([3, 5], 4)'


def test_one_column_may_be_a_vector(device):
    encoder = CategoricalEncoder([6], 4).to(device)
    x = torch.tensor([5, 0, 2], device=device)
    assert torch.equal(encoder(x), encoder(x.view(-1, 1)))


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match="'cardinalities'"):
        CategoricalEncoder([], 4)
    with pytest.raises(ValueError, match="'cardinalities'"):
        CategoricalEncoder([3, 0], 4)
    encoder = CategoricalEncoder([3, 5], 4)
    with pytest.raises(ValueError, match="integer tensor with 2 columns"):
        encoder(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="integer tensor with 2 columns"):
        encoder(torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"outside \[0, \[3, 5\]\)"):
        encoder(torch.tensor([[0, 5]]))
    with pytest.raises(ValueError, match="outside"):
        encoder(torch.tensor([[-1, 0]]))

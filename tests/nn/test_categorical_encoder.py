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


def test_matches_the_per_column_sum_with_gradients(device):
    # the OGB atom features' nine columns, in float64: outputs and every
    # table's gradient as a sum of one lookup per column
    torch.manual_seed(0)
    cards = [119, 5, 12, 12, 10, 6, 6, 2, 2]
    encoder = CategoricalEncoder(cards, 8).to(device).double()
    x = torch.stack([torch.randint(0, c, (30, )) for c in cards], 1).to(
        device)
    grad = torch.randn(30, 8, dtype=torch.float64, device=device)
    expected = sum(e(x[:, k]) for k, e in enumerate(encoder.embeddings))
    weights = [e.weight for e in encoder.embeddings]
    torch.testing.assert_close(encoder(x), expected, atol=1e-12, rtol=0)
    for got, want in zip(torch.autograd.grad(encoder(x), weights, grad),
                         torch.autograd.grad(expected, weights, grad)):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


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

import torch

from torch_geometric_hot.ops.seeded_generators import SeededGenerators


def test_each_device_draws_the_seeded_sequence(device):
    generators = SeededGenerators(5)
    first = torch.rand(4, generator=generators(device), device=device)
    again = torch.rand(4, generator=generators(device), device=device)
    reference = torch.Generator(device=device).manual_seed(5)
    assert torch.equal(first, torch.rand(4, generator=reference,
                                         device=device))
    assert torch.equal(again, torch.rand(4, generator=reference,
                                         device=device))


def test_without_a_seed_the_default_generator_draws(device):
    assert SeededGenerators(None)(device) is None


def test_a_restored_state_draws_what_the_original_would(device):
    generators = SeededGenerators(3)
    torch.rand(7, generator=generators(device), device=device)
    state = generators.get_state()
    expected = torch.rand(5, generator=generators(device), device=device)
    # into generators that have not drawn on the device yet, and into ones
    # that have drawn further
    fresh = SeededGenerators(3)
    fresh.set_state(state)
    assert torch.equal(torch.rand(5, generator=fresh(device), device=device),
                       expected)
    generators.set_state(state)
    assert torch.equal(
        torch.rand(5, generator=generators(device), device=device), expected)
    assert list(SeededGenerators(3).get_state()) == []

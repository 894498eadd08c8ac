import warnings

import torch
from torch_geometric.data import Data, InMemoryDataset
from torch_geometric.io import fs

from torch_geometric_hot.datasets import ogb_safe_globals


def test_leaves_the_types_allowed_before(tmp_path):
    # PyG allows Data for the whole process: after the block, a dataset
    # saved by PyG still loads with weights_only=True (no fallback to a
    # full unpickling, which PyG announces with a warning)
    before = torch.serialization.get_safe_globals()
    with ogb_safe_globals():
        assert set(before) <= set(torch.serialization.get_safe_globals())
    assert set(torch.serialization.get_safe_globals()) == set(before)
    path = str(tmp_path / 'data.pt')
    InMemoryDataset.save([Data(x=torch.ones(2, 3), num_nodes=2)], path)
    with warnings.catch_warnings():
        warnings.filterwarnings('error', message='Weights only load failed')
        data, _, cls = fs.torch_load(path)
    assert cls is Data and torch.equal(data['x'], torch.ones(2, 3))

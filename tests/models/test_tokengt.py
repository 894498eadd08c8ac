import pytest
import torch
from torch import Tensor
from torch_geometric.data import Batch

from torch_geometric_hot.models import TokenGT
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, random_graph)
from torch_geometric_hot.transforms import AddLaplacianNodeId

GRAPHS = [
    AddLaplacianNodeId(4)(g)
    for g in edge_case_graphs(edge_dim=2) + [random_graph(8, 12, edge_dim=2)]
]


def model(task, device=None, **kwargs):
    torch.manual_seed(0)
    return TokenGT(4, 8, 3, num_layers=2, task=task, heads=2, edge_dim=2,
                   node_id='laplacian', node_id_dim=4,
                   **kwargs).double().to(device)


def run(m):
    return lambda d: m(d.x, d.edge_index, d.edge_attr, d.get('batch'),
                       node_id=d.lap_node_id)


@pytest.mark.parametrize('task,level', [('graph', 'graph'), ('node', 'node'),
                                        ('edge', 'edge')])
def test_tasks_equivariant_and_batch_independent(task, level, device):
    m = model(task, device, seb=task == 'node').eval()
    graphs = [g.clone().to(device) for g in GRAPHS]
    out = run(m)(Batch.from_data_list(graphs))
    count = {'graph': len(GRAPHS), 'node': sum(g.num_nodes for g in GRAPHS),
             'edge': sum(g.num_edges for g in GRAPHS)}[level]
    assert out.shape == (count, 3)
    assert_permutation_equivariant(run(m), graphs[-1], levels=level)
    assert_batch_independent(run(m), graphs, levels=level)


def test_categorical_encoders_and_training_step(device):
    torch.manual_seed(0)
    m = TokenGT(0, 8, 1, num_layers=1, node_encoder=torch.nn.Embedding(5, 8),
                edge_encoder=torch.nn.Embedding(3, 8), attention='performer',
                node_id='orf', node_id_dim=4, seed=0, dropout=0.1,
                drop_path=0.1).to(device)
    data = random_graph(6, 8, device=device)
    x = torch.randint(5, (6, )).to(device)
    edge_attr = torch.randint(3, (data.num_edges, )).to(device)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)

    def loss() -> Tensor:  # a target far from the initial outputs
        return (m(x, data.edge_index, edge_attr) - 3.0).square().mean()

    def eval_loss() -> float:  # without dropout's draws, on any device
        m.eval()
        with torch.no_grad():
            value = loss().item()
        m.train()
        return value

    before = eval_loss()
    for _ in range(5):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert eval_loss() < before


def test_bad_task():
    with pytest.raises(ValueError, match="'task'"):
        TokenGT(4, 8, 1, 1, task='hyperedge')
    with pytest.raises(ValueError, match="'graph_token'"):
        TokenGT(4, 8, 1, 1, task='graph', graph_token=False)


def test_repr():
    assert repr(model('node')).startswith("TokenGT(task='node', "
                                          "TokenGTEncoder(4, 8")

import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv2to2
from torch_geometric_hot.testing import attach_order_inputs, random_graph


def test_kernel_hotconv_compiles_without_graph_breaks():
    data = attach_order_inputs(random_graph(6, 8), 2)
    view = PairView.from_data(data)
    layer = HOTConv2to2(3, 4, heads=2, attention='kernel',
                        kernel='elu').double().eval()

    def forward(x):
        return layer(x, view)

    torch._dynamo.reset()
    explain = torch._dynamo.explain(forward)(data.pair_x)
    assert explain.graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(forward, backend='aot_eager')
    with torch.no_grad():
        torch.testing.assert_close(compiled(data.pair_x),
                                   forward(data.pair_x))
    torch._dynamo.reset()

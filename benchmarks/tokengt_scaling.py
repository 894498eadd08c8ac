r"""TokenGT costs (``docs/design.md``, "Cost promises"): on one
Barabási–Albert graph (m = 5, so
about 10 directed edges per node and :math:`n + m \approx 1.1\, m`
tokens), a 2-layer :class:`TokenGTEncoder` (width 32, 4 heads, ORF node
identifiers drawn on the fly, graph token) forward+backward against the
number of tokens :math:`T = 1 + n + m`:

* ``performer``: FAVOR+ on the flat token list, promised linear in
  :math:`T` (time and memory), measured from :math:`10^3` to :math:`10^6`
  tokens;
* ``softmax``: exact attention through fused
  ``scaled_dot_product_attention`` on the graph's single block (no padding,
  no mask): quadratic time, but memory linear in :math:`T` because the
  :math:`T \times T` matrix is never materialised; measured up to
  :math:`3 \cdot 10^4` tokens (larger sizes are refused: minutes per pass).

Shared harness: fresh process per point, medians, peak RSS, the
``floor`` (one gather + ``index_add_`` of :math:`T` rows) measured in the
same run; the summary gives log–log slopes and time-to-floor ratios.

    python benchmarks/tokengt_scaling.py --quick --out results/tokengt.json
    python benchmarks/tokengt_scaling.py --out results/tokengt.json
"""
import os
import sys
from typing import Callable, Dict, Tuple

import torch
from torch import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # harness, package
from harness import ba_edge_index, run_benchmark  # noqa: E402

from torch_geometric_hot.nn import TokenGTEncoder  # noqa: E402

CHANNELS, HEADS, LAYERS, NODE_ID_DIM = 32, 4, 2, 16
SIZES = [1000, 3000, 10000, 30000, 100000, 300000, 1000000]
QUICK_SIZES = [1000, 3000, 10000]
SOFTMAX_MAX_TOKENS = 30000


def build(attention: str, size: int,
          device: torch.device) -> Tuple[Callable[[], Tensor], Dict]:
    if attention == 'softmax' and size > SOFTMAX_MAX_TOKENS:
        raise ValueError(f'softmax attention is quadratic in time: measured '
                         f'up to {SOFTMAX_MAX_TOKENS} tokens only')
    edge_index = ba_edge_index(round(size / 1.1), m=5, seed=0).to(device)
    n = int(edge_index.max()) + 1
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, CHANNELS, generator=gen).to(device).requires_grad_()
    model = TokenGTEncoder(CHANNELS, CHANNELS, LAYERS, heads=HEADS,
                           node_id='orf', node_id_dim=NODE_ID_DIM,
                           attention=attention, seed=0).to(device)

    def step() -> Tensor:
        out = model(x, edge_index)
        return out.node.sum() + out.edge.sum() + out.graph.sum()

    return step, dict(n_nodes=n, n_edges=edge_index.size(1),
                      n_tokens=1 + n + edge_index.size(1))


VARIANTS = {
    'performer': lambda size, device: build('performer', size, device),
    'softmax': lambda size, device: build('softmax', size, device),
}

if __name__ == '__main__':
    run_benchmark('tokengt_scaling', SIZES, VARIANTS, size_key='n_tokens',
                  quick_sizes=QUICK_SIZES)

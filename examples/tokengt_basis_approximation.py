r"""TokenGT's second-order equivariant-basis approximation experiment
(Kim et al. 2022, §4.1 and App. B.2), on the CPU or a GPU.

One multi-head self-attention layer with bell(2+2) = 15 heads sees the
tokens of a Barabási–Albert graph (n ~ U(10, 20), attachment ~ U(2, 3)),
plus a trainable ``[null]`` token, and head h is trained (L2) to reproduce
the row-normalised basis tensor B^{mu_h} of the h-th equality pattern of
(query pair, key pair); rows of B^mu with no non-zero entry must attend to
``[null]``. Tokens are the nodes and the m edges ("sparse") or all n^2
pairs ("dense"). Node identifiers {none, ORF, Laplacian, random +-1/sqrt(d)}
x type identifiers {off, on}; the paper's claim: only orthonormal node
identifiers (ORF, Laplacian) together with type identifiers give an
accurate approximation, also on unseen graphs.

The reported L2 is the squared error summed over the attention matrix of a
graph, averaged over heads and graphs (the paper's Table 1 scale).

Graphs, tokens and patterns are built on the CPU, then training runs on a
GPU when torch sees one; ``--device cpu`` or ``--device cuda`` picks the
device (default ``auto``). ``--smoke`` is a check of about 15 s on a
2-core CPU.

    python examples/tokengt_basis_approximation.py --quick
    python examples/tokengt_basis_approximation.py --quick --device cpu
    python examples/tokengt_basis_approximation.py --out table.json
"""
import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

import networkx as nx
import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))  # run from a source checkout without installing

from torch_geometric_hot.nn import TokenGTEmbedding  # noqa: E402
from torch_geometric_hot.ops.equality_patterns import (  # noqa: E402
    bell, equality_pattern)
from torch_geometric_hot.ops.size_buckets import token_positions  # noqa: E402
from torch_geometric_hot.train import resolve_device  # noqa: E402
from torch_geometric_hot.transforms import AddLaplacianNodeId  # noqa: E402

HEADS = bell(4)  # 15 basis tensors of order 2 -> 2
CONFIGS = [(None, False), (None, True), ('random', False), ('random', True),
           ('orf', False), ('orf', True), ('laplacian', False),
           ('laplacian', True)]
NODE_ID_DIM = {'orf': 24, 'random': 24, 'laplacian': 20, None: 1}


def label(config) -> str:
    r"""Name of a configuration, e.g. ``'orf+type'`` or ``'none'``."""
    node_id, type_id = config
    return f"{node_id or 'none'}{'+type' if type_id else ''}"


def ba_graphs(count: int, seed: int) -> List[Data]:
    r"""Barabási–Albert graphs, both directions of every edge."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        n = int(torch.randint(10, 21, (1, ), generator=gen))
        k = int(torch.randint(2, 4, (1, ), generator=gen))
        g = nx.barabasi_albert_graph(n, k, seed=seed * 100003 + i)
        edges = torch.tensor(list(g.edges), dtype=torch.long).t()
        out.append(Data(edge_index=torch.cat([edges, edges.flip(0)], 1),
                        num_nodes=n))
    return out


def tokenize(data: Data, dense: bool) -> Tuple[Data, Tensor]:
    r"""Token graph (sparse: the edges; dense: all ordered pairs), the
    Laplacian identifiers of the sparse graph and the pattern matrix
    :obj:`[N, N]` of every (query token, key token)."""
    n = data.num_nodes
    lap = AddLaplacianNodeId(NODE_ID_DIM['laplacian'])(data.clone())
    edge_index = data.edge_index
    if dense:
        row, col = torch.meshgrid(torch.arange(n), torch.arange(n),
                                  indexing='ij')
        keep = row != col
        edge_index = torch.stack([row[keep], col[keep]])
    ends = torch.cat([torch.arange(n).repeat(2, 1), edge_index], 1)  # [2, N]
    num = ends.size(1)
    index = torch.stack([
        ends[0].view(-1, 1).expand(num, num), ends[1].view(-1, 1).expand(
            num, num), ends[0].view(1, -1).expand(num, num),
        ends[1].view(1, -1).expand(num, num)
    ]).reshape(4, -1)
    pattern = equality_pattern(index).view(num, num).to(torch.int8)
    return Data(x=torch.zeros(n, 0), edge_index=edge_index, num_nodes=n,
                lap_node_id=lap.lap_node_id), pattern


class BasisAttention(torch.nn.Module):
    r"""Token embedding + one pre-LN attention layer that returns its
    per-head attention matrices on per-graph blocks."""
    def __init__(self, node_id, type_id: bool, channels: int,
                 head_channels: int, dropout: float, seed: int) -> None:
        super().__init__()
        self.node_id = node_id
        self.embedding = TokenGTEmbedding(0, channels, None, node_id,
                                          NODE_ID_DIM[node_id], type_id,
                                          graph_token=True, sign_flip=False,
                                          seed=seed)
        self.norm = torch.nn.LayerNorm(channels)
        self.qk = torch.nn.Linear(channels, 2 * HEADS * head_channels)
        self.dropout = dropout
        self.head_channels = head_channels

    def forward(self, batch: Batch):
        ids = batch.lap_node_id if self.node_id == 'laplacian' else None
        z, token_batch, num_graphs, _ = self.embedding(
            batch.x, batch.edge_index, batch=batch.batch, node_id=ids,
            num_graphs=batch.num_graphs)
        z = torch.nn.functional.dropout(z, self.dropout, self.training)
        position, lengths = token_positions(token_batch, num_graphs)
        size = int(lengths.max())
        blocks = z.new_zeros(num_graphs, size, z.size(1))
        blocks[token_batch, position] = self.norm(z)
        q, k = self.qk(blocks).view(num_graphs, size, 2, HEADS,
                                    -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / self.head_channels**0.5
        valid = torch.arange(size,
                             device=lengths.device) < lengths.view(-1, 1)
        scores = scores.masked_fill(~valid.view(num_graphs, 1, 1, size),
                                    float('-inf'))
        return scores.softmax(dim=-1), valid  # [B, H, L, L]


def targets(patterns: List[Tensor], size: int) -> Tensor:
    r"""Row-normalised basis tensors with the ``[null]`` column first,
    :obj:`[B, H, L-1, L]`, on the device of :obj:`patterns`; padding rows
    are zero."""
    device = patterns[0].device
    pattern = torch.full((len(patterns), size - 1, size - 1), -1,
                         dtype=torch.int8, device=device)
    for g, p in enumerate(patterns):
        pattern[g, :p.size(0), :p.size(0)] = p
    heads = torch.arange(HEADS, dtype=torch.int8, device=device)
    onehot = (pattern.unsqueeze(1) == heads.view(1, -1, 1, 1)
              ).float()  # [B, H, N, N]
    rows = onehot.sum(-1, keepdim=True)
    null = ((rows == 0) & (pattern.unsqueeze(1)[..., :1] >= 0)).float()
    return torch.cat([null, onehot / rows.clamp(min=1)], dim=-1)


def l2(model: BasisAttention, items: List[Tuple[Data, Tensor]]) -> Tensor:
    r"""Per-graph L2 (summed over the matrix, mean over heads)."""
    alpha, _ = model(Batch.from_data_list([data for data, _ in items]))
    target = targets([pattern for _, pattern in items], alpha.size(-1))
    return (alpha[:, :, 1:] - target).square().sum((-1, -2)).mean(1)


def run(config, train: List[Tuple[Data, Tensor]],
        test: List[Tuple[Data, Tensor]], args,
        device: torch.device) -> Dict:
    r"""Trains and scores one configuration on :obj:`device` (where the
    token graphs and patterns already are)."""
    node_id, type_id = config
    torch.manual_seed(args.seed)
    model = BasisAttention(node_id, type_id, args.channels,
                           args.head_channels, 0.1, args.seed).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    warmup = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (args.steps - s) /
                                                 (args.steps - warmup))))
    gen = torch.Generator().manual_seed(args.seed)
    start = time.perf_counter()
    for _ in range(args.steps):
        model.train()
        pick = torch.randint(len(train), (args.batch_size, ), generator=gen)
        loss = l2(model, [train[i] for i in pick.tolist()])
        opt.zero_grad()
        loss.mean().backward()
        opt.step()
        sched.step()
    model.eval()
    with torch.no_grad():
        scores = {}
        for name, graphs in (('train', train), ('test', test)):
            parts = [
                l2(model, graphs[i:i + 32]) for i in range(0, len(graphs), 32)
            ]
            scores[name] = torch.cat(parts).mean().item()
    return dict(node_id=str(node_id), type_id=type_id,
                train_l2=scores['train'], test_l2=scores['test'],
                seconds=time.perf_counter() - start)


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(
        description=' '.join(__doc__.split('\n\n')[0].split()))
    parser.add_argument('--quick', action='store_true',
                        help='small data and schedule, 4 configurations '
                        '(~1 minute on an idle 2-core CPU)')
    parser.add_argument('--smoke', action='store_true',
                        help='a quick check (~15 s on a 2-core CPU): sparse '
                        'input, 96 training and 32 test graphs, 40 steps, '
                        'the configurations none+type, orf, orf+type and '
                        'laplacian+type')
    parser.add_argument('--inputs', default='sparse,dense',
                        help="'sparse', 'dense' or both, comma-separated")
    parser.add_argument('--train', type=int, default=512,
                        help='training graphs (default: 512)')
    parser.add_argument('--test', type=int, default=128,
                        help='test graphs (default: 128)')
    parser.add_argument('--steps', type=int, default=400,
                        help='training steps (default: 400)')
    parser.add_argument('--batch-size', type=int, default=16,
                        help='graphs per step (default: 16)')
    parser.add_argument('--lr', type=float, default=1e-2,
                        help='peak learning rate (default: 0.01)')
    parser.add_argument('--channels', type=int, default=64,
                        help='model width (default: 64)')
    parser.add_argument('--head-channels', type=int, default=16,
                        help='width per head (default: 16)')
    parser.add_argument('--seed', type=int, default=0,
                        help='random seed (default: 0)')
    parser.add_argument('--configs', default=','.join(map(label, CONFIGS)),
                        help='comma-separated subset of the configurations')
    parser.add_argument('--out', help='write the table as JSON')
    parser.add_argument('--device', default='auto',
                        choices=('auto', 'cpu', 'cuda'),
                        help='cpu, cuda, or auto: CUDA when torch sees a GPU '
                        '(default: auto)')
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    if args.quick:  # sparse input, the four configurations with type ids
        args.inputs, args.train, args.test, args.steps = 'sparse', 96, 32, 100
        args.configs = 'none+type,random+type,orf+type,laplacian+type'
    if args.smoke:  # the claim in brief: node ids and type ids both needed
        args.inputs, args.train, args.test, args.steps = 'sparse', 96, 32, 40
        args.configs = 'none+type,orf,orf+type,laplacian+type'
    graphs = ba_graphs(args.train + args.test, args.seed)
    records = []
    print(f'device: {device}')
    print(f"{'input':6} {'node id':9} {'type id':7} {'train L2':>9} "
          f"{'test L2':>9} {'time s':>7}")
    for inputs in args.inputs.split(','):
        tokens = [(data.to(device), pattern.to(device))
                  for data, pattern in (tokenize(g, inputs == 'dense')
                                        for g in graphs)]
        train, test = tokens[:args.train], tokens[args.train:]
        for config in CONFIGS:
            if label(config) not in args.configs.split(','):
                continue
            rec = dict(input=inputs, **run(config, train, test, args, device))
            records.append(rec)
            print(f"{inputs:6} {rec['node_id']:9} "
                  f"{'yes' if rec['type_id'] else 'no':7} "
                  f"{rec['train_l2']:9.3f} {rec['test_l2']:9.3f} "
                  f"{rec['seconds']:7.1f}", flush=True)
    result = dict(args=vars(args), device=str(device), records=records)
    if args.out:
        with open(args.out, 'w') as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == '__main__':
    main()

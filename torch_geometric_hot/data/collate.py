r"""PyG's collation (:meth:`~torch_geometric.data.Batch.from_data_list`) of
a list of plain :class:`~torch_geometric.data.Data` objects of tensors, the
same batch with the per-graph work done on whole lists.

PyG collates attribute by attribute and, for every graph, asks it its
increment (:meth:`~torch_geometric.data.Data.__inc__`: for an index, the
graph's number of nodes, which PyG infers anew from its attributes on every
call); a molecule costs tens of microseconds, as much as building its pair
view. Where every graph is a plain :class:`~torch_geometric.data.Data`
with the same attributes, all of them tensors, and its number of nodes is
read from a node attribute (``x``, ``pos``, ...), :func:`collate_graphs`
reads each graph's sizes once and increments a whole attribute in one
operation. The batch is PyG's: the same class, attributes (in the same
order), values and dtypes, :obj:`batch` and :obj:`ptr`, and the slices and
increments that :meth:`~torch_geometric.data.Batch.get_example` reads. Any
other list goes to PyG.
"""
from typing import Any, List, Optional, Sequence

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.data.storage import N_KEYS
from torch_geometric.utils import cumsum

#: The attributes that let PyG tell a store's number of nodes
#: (``NodeStorage.can_infer_num_nodes``), besides those naming a node.
NUM_NODE_KEYS = {'num_nodes', 'x', 'pos', 'batch', 'adj', 'adj_t',
                 'edge_index', 'face'}


def collate_graphs(data_list: Sequence[Any],
                   follow_batch: Optional[List[str]] = None,
                   exclude_keys: Optional[List[str]] = None) -> Batch:
    r"""The batch :meth:`Batch.from_data_list(data_list, follow_batch,
    exclude_keys) <torch_geometric.data.Batch.from_data_list>` gives,
    built on whole attributes where the graphs allow it (see the module
    documentation).

    Args:
        data_list (list): The graphs.
        follow_batch (list, optional): Attributes to make batch vectors
            for (PyG's collation).
        exclude_keys (list, optional): Attributes to leave out (PyG's
            collation).
    """
    plan = None if follow_batch or exclude_keys else _plan(data_list)
    if plan is None:
        return Batch.from_data_list(data_list, follow_batch, exclude_keys)
    keys, node_key, node_dim = plan
    first = data_list[0]
    stores = [data._store._mapping for data in data_list]
    nodes = [store[node_key].size(node_dim) for store in stores]
    # the graphs' node offsets, which PyG adds to an index's values
    node_incs = cumsum(torch.tensor(nodes[:-1], dtype=torch.long))
    zero_incs = None
    out = Batch(_base_cls=Data)
    out.stores_as(first)
    out_store = out._store
    slice_dict, inc_dict = {}, {}
    for key in keys:
        values = [store[key] for store in stores]
        elem = values[0]
        dim = first.__cat_dim__(key, elem, first._store)
        sizes = [value.size(dim) for value in values]
        slices = cumsum(torch.tensor(sizes, dtype=torch.long))
        value = torch.cat(values, dim=dim)
        if 'index' in key or key == 'face':  # Data.__inc__: the nodes
            incs = node_incs.clone()
            if int(incs[-1]) != 0:
                # PyG adds each graph's offset, a 0-dim tensor, to its
                # values: their dtype unless they are bool
                dtype = torch.result_type(elem, incs[0])
                shape = [1] * value.dim()
                shape[dim] = value.size(dim)
                step = torch.repeat_interleave(
                    incs, torch.tensor(sizes, dtype=torch.long))
                value = value.to(dtype) + step.to(value.device, dtype).view(
                    shape)
        else:
            if zero_incs is None:
                zero_incs = torch.zeros(len(stores), dtype=torch.long)
            incs = zero_incs.clone()
        out_store[key] = value
        slice_dict[key] = slices
        inc_dict[key] = incs
    if _can_infer_num_nodes(keys):
        # on the graphs' device, as PyG's
        device = out_store[keys[-1]].device
        counts = torch.tensor(nodes, dtype=torch.long, device=device)
        out_store['batch'] = torch.repeat_interleave(
            torch.arange(len(nodes), device=device), counts,
            output_size=sum(nodes))
        out_store['ptr'] = cumsum(counts)
    out._num_graphs = len(data_list)
    out._slice_dict = slice_dict
    out._inc_dict = inc_dict
    return out


def _can_infer_num_nodes(keys: List[str]) -> bool:
    return bool(NUM_NODE_KEYS.intersection(keys)) or any(
        'node' in key for key in keys)


def _plan(data_list: Sequence[Any]):
    r"""The attributes of the graphs, the attribute PyG reads a graph's
    number of nodes from and its dimension, where :func:`collate_graphs`
    builds the batch itself; :obj:`None` where PyG should."""
    if not isinstance(data_list, (list, tuple)) or not data_list or any(
            type(data) is not Data for data in data_list):
        return None
    keys = list(data_list[0]._store._mapping)
    if not keys or 'num_nodes' in keys or 'ptr' in keys or any(
            'batch' in key for key in keys):
        return None
    first = data_list[0]
    # PyG chooses how to collate an attribute by its first graph's value
    for value in first._store._mapping.values():
        if type(value) is not Tensor or value.layout != torch.strided \
                or value.dim() == 0 or value.is_nested:
            return None
    for data in data_list:
        mapping = data._store._mapping
        if list(mapping) != keys or any(type(value) is not Tensor
                                        for value in mapping.values()):
            return None
    # NodeStorage.num_nodes: the first tensor of a node key, else the first
    # whose name names a node
    node_key = next((key for key in keys if key in N_KEYS), None)
    if node_key is None:
        node_key = next((key for key in keys if 'node' in key), None)
    if node_key is None:
        return None
    value = first._store._mapping[node_key]
    return keys, node_key, first.__cat_dim__(node_key, value, first._store)


class GraphCollater:
    r"""A collate function: lists of graphs through :func:`collate_graphs`
    (with the :obj:`follow_batch` and :obj:`exclude_keys` of
    :obj:`collater`), anything else through :obj:`collater` (PyG's
    :class:`~torch_geometric.loader.dataloader.Collater`, which batches
    graphs with :meth:`~torch_geometric.data.Batch.from_data_list`).

    Args:
        collater (callable): The collate function for the rest.
    """
    def __init__(self, collater) -> None:
        self.collater = collater

    def __call__(self, batch: Sequence[Any]) -> Any:
        if isinstance(batch, (list, tuple)) and batch and \
                type(batch[0]) is Data:
            return collate_graphs(
                batch, getattr(self.collater, 'follow_batch', None),
                getattr(self.collater, 'exclude_keys', None))
        return self.collater(batch)

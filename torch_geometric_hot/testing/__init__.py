r"""Public testing helpers: oracles, equivariance and batch-independence
assertions, and graphs that exercise edge cases."""
from torch_geometric_hot.testing.equivariance import (
    permute_nodes, assert_permutation_equivariant, assert_batch_independent)
from torch_geometric_hot.testing.graphs import (random_graph, complete_graph,
                                                edge_case_graphs,
                                                chain_molecule)

__all__ = [
    'permute_nodes', 'assert_permutation_equivariant',
    'assert_batch_independent', 'random_graph', 'complete_graph',
    'edge_case_graphs', 'chain_molecule'
]
from torch_geometric_hot.testing.dense_basis import (
    partition_label, dense_basis, output_patterns, dense_equivariant_linear,
    pair_to_dense)

__all__ += [
    'partition_label', 'dense_basis', 'output_patterns',
    'dense_equivariant_linear', 'pair_to_dense'
]
from torch_geometric_hot.testing.dense_attention import dense_class_attention

__all__ += ['dense_class_attention']
from torch_geometric_hot.testing.orders import (attach_order_inputs,
                                                class_cases, distinct_tuples,
                                                edge_case_batch,
                                                global_class_cases, run_layer,
                                                rows_per_graph, skewed_batch)

__all__ += [
    'attach_order_inputs', 'class_cases', 'distinct_tuples',
    'edge_case_batch', 'global_class_cases', 'run_layer', 'rows_per_graph',
    'skewed_batch'
]
from torch_geometric_hot.testing.tokengt_reference import (
    dense_tokengt_reference)

__all__ += ['dense_tokengt_reference']
from torch_geometric_hot.testing.gradients import assert_gradcheck

__all__ += ['assert_gradcheck']
from torch_geometric_hot.testing.sync_operators import (SYNC_OPERATORS,
                                                        SyncRecorder)
from torch_geometric_hot.testing.operator_counts import OperatorCounter
from torch_geometric_hot.testing.cuda_layout import cuda_layout

__all__ += ['SYNC_OPERATORS', 'SyncRecorder', 'OperatorCounter',
            'cuda_layout']
from torch_geometric_hot.testing.references import (
    combine_classes_reference, dense_softmax_attention_reference,
    gather_contract_reference, pair_light_linear_reference,
    pool_readings_reference, segment_outer_sum_reference)

__all__ += [
    'combine_classes_reference', 'dense_softmax_attention_reference',
    'gather_contract_reference', 'pair_light_linear_reference',
    'pool_readings_reference', 'segment_outer_sum_reference'
]

r"""Pure functions: the sparse engine every layer is built on."""
from torch_geometric_hot.ops.scatter import (scatter_sum, scatter_max,
                                             segment_counts, use_backend,
                                             current_backend)
from torch_geometric_hot.ops.softmax import grouped_softmax
from torch_geometric_hot.ops.feature_maps import FeatureMap, KERNELS
from torch_geometric_hot.ops.basis import (EquivariantClass, basis,
                                           select_classes)
from torch_geometric_hot.ops.equivariant import (Target, equivariant_linear,
                                                 input_summaries,
                                                 class_counts)
from torch_geometric_hot.ops.kernel_attention import (SummaryKeys, Reading,
                                                      gather_contract,
                                                      segment_outer_sum)
from torch_geometric_hot.ops.pooled_combination import (CombinationPart,
                                                        ValueProjection,
                                                        pooled_combination)
from torch_geometric_hot.ops.pair_light_linear import pair_light_linear
from torch_geometric_hot.ops.attention.hot import hot_class_attention
from torch_geometric_hot.ops.attention.projection import Projection
from torch_geometric_hot.ops.attention.dispatch import DirectReadings, \
    use_path
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention

__all__ = [
    'scatter_sum', 'scatter_max', 'segment_counts', 'use_backend',
    'current_backend', 'grouped_softmax',
    'FeatureMap', 'KERNELS', 'EquivariantClass', 'basis', 'select_classes',
    'Target', 'equivariant_linear', 'input_summaries', 'class_counts',
    'gather_contract', 'segment_outer_sum', 'SummaryKeys', 'Reading',
    'pair_light_linear', 'pooled_combination', 'CombinationPart',
    'ValueProjection', 'Projection',
    'grouped_softmax_attention',
    'hot_class_attention', 'use_path', 'DirectReadings'
]
from torch_geometric_hot.ops.simplicial_attention import (
    simplicial_attention, simplicial_logits, multilinear_logits,
    determinant_logits, indexer_distillation_loss)
from torch_geometric_hot.ops.rope import apply_rotary

__all__ += [
    'simplicial_attention', 'simplicial_logits', 'multilinear_logits',
    'determinant_logits', 'indexer_distillation_loss', 'apply_rotary'
]
# registers the custom operators' flop counts with FlopCounterMode
from torch_geometric_hot.ops import flop_counts  # noqa: E402

__all__ += ['flop_counts']

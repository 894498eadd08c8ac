import threading

import torch

from torch_geometric_hot.ops.native import release_workspace, workspace
from torch_geometric_hot.ops.native.workspace import _local


def _pointers(shapes, dtype=torch.float32):
    with workspace() as scratch:
        taken = [scratch.empty(shape, dtype) for shape in shapes]
        for t, shape in zip(taken, shapes):
            assert t.shape == shape and t.dtype == dtype
            assert t.is_contiguous() and t.data_ptr() % 64 == 0
        return [t.data_ptr() for t in taken]


def test_temporaries_reuse_one_buffer_that_grows_to_the_largest_call():
    release_workspace()
    _pointers([(3, 5), (7, )])  # no buffer yet: plain tensors
    assert _local.buffer is None
    again = _pointers([(3, 5), (7, )])  # now from the buffer, back to back
    assert again[1] - again[0] == 64 and _local.buffer.numel() == 128
    assert _pointers([(3, 5), (7, )]) == again  # the same memory each call
    bigger = _pointers([(1000, ), (10, )])  # does not fit: allocated apart
    assert _pointers([(1000, ), (10, )]) != bigger
    assert _pointers([(3, 5), (7, )])[0] == _pointers([(1000, ), (10, )])[0]
    assert _local.buffer.numel() == 4096
    release_workspace()
    assert _local.buffer is None


def test_zeros_dtypes_nesting_and_threads():
    release_workspace()
    _pointers([(64, )])
    with workspace() as scratch:
        z = scratch.zeros((4, 4), torch.float64)
        assert z.dtype == torch.float64 and (z == 0).all()
        outer = scratch.empty((2, ), torch.int64)
        with workspace() as inner:  # nested: its own, plain tensors
            n = inner.empty((2, ), torch.int64)
            assert n.untyped_storage().data_ptr() != \
                outer.untyped_storage().data_ptr()
    seen = []
    thread = threading.Thread(target=lambda: seen.append(
        (_pointers([(64, )]), _pointers([(64, )]))))
    thread.start()
    thread.join()
    # another thread keeps a buffer of its own
    assert seen[0][1] != _pointers([(64, )])
    release_workspace()

import os
import sys

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import host_instructions  # noqa: E402


def test_arguments_name_what_is_wrong(capsys):
    with pytest.raises(SystemExit):
        host_instructions.parse_args(['--models', 'hot_kernel'])
    assert "must include 'gps_multihead'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        host_instructions.parse_args(['--steps', '0'])
    assert '--steps must be >= 1' in capsys.readouterr().err


def test_prepared_step_trains_and_leaves_no_setting_behind(tmp_path):
    from torch_geometric_hot.ops.layout_device import layout_device
    from torch_geometric_hot.validation import validating
    step = host_instructions.prepare('hot_kernel', 2, 8,
                                     str(tmp_path / 'nci_tpsa'))
    before = [p.detach().clone() for p in step.model.parameters()]
    step()
    assert any(not torch.equal(b, p)
               for b, p in zip(before, step.model.parameters()))
    assert layout_device(torch.zeros(1)) == 'cpu' and validating()


@pytest.mark.parametrize('symbol,kernel', [
    ('???:mkl_blas_avx2_sgemm_kernel_nocopy_NN_b0', True),
    ('???:void c10::function_ref<void (char**, long const*, long, long)>::'
     'callback_fn<at::native::AVX2::VectorizedLoop2d<at::native::(anonymous '
     'namespace)::add_kernel', True),
    ('???:at::native::index_select_out_cpu_(at::Tensor const&, long, '
     'at::Tensor const&, at::Tensor&)', True),
    ('./string/../sysdeps/x86_64/multiarch/memset-vec-unaligned-erms.S:'
     '__memset_avx2_unaligned_erms', True),
    ('/tmp/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault', False),
    ('???:c10::Dispatcher::callBoxed(c10::OperatorHandle const&, '
     'std::vector<c10::IValue>*) const', False),
    ('???:torch::autograd::Engine::evaluate_function(...)', False),
    ('./malloc/malloc.c:_int_malloc', False),
])
def test_kernel_symbols_are_the_cpus_arithmetic(symbol, kernel):
    assert host_instructions.is_kernel(symbol) is kernel

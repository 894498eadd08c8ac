r"""The native kernels' C sources built with AddressSanitizer and
UndefinedBehaviorSanitizer and run on exactly sized buffers (the harnesses
in ``tests/ops/sanitized/``): a read or write past a buffer, a leak or
undefined behaviour aborts them. Skipped without a C compiler or the
sanitizer runtimes, and when the kernels are switched off."""
import os
import shutil
import subprocess

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sanitized')
FLAGS = ['-O1', '-g', '-std=gnu11', '-fsanitize=address,undefined',
         '-fno-sanitize-recover=all']


def _build(compiler, source, target):
    # with -march=native first: the vector code the library runs
    for march in (['-march=native'], []):
        built = subprocess.run([compiler, *FLAGS, *march, '-o', target,
                                source, '-lm'], capture_output=True,
                               text=True)
        if built.returncode == 0:
            break
    return built


@pytest.fixture(scope='module')
def compiler(tmp_path_factory):
    if os.environ.get('TORCH_GEOMETRIC_HOT_NATIVE') == 'off':
        pytest.skip('native kernels switched off')
    cc = shutil.which(os.environ.get('CC', 'cc')) or shutil.which('gcc')
    if cc is None:
        pytest.skip('no C compiler')
    folder = tmp_path_factory.mktemp('probe')
    probe = folder / 'probe.c'
    probe.write_text('int main(void) { return 0; }\n')
    if _build(cc, str(probe), str(folder / 'probe')).returncode != 0 or \
            subprocess.run([str(folder / 'probe')]).returncode != 0:
        pytest.skip('no sanitizer runtime')
    return cc


@pytest.mark.parametrize('harness', ['kernel_attention.c',
                                     'class_combination.c', 'favor_plus.c',
                                     'direct_readings.c',
                                     'pair_entries.c', 'grouped_softmax.c'])
def test_kernels_under_sanitizers(harness, compiler, tmp_path):
    target = str(tmp_path / harness[:-2])
    built = _build(compiler, os.path.join(HERE, harness), target)
    assert built.returncode == 0, built.stderr[-2000:]
    run = subprocess.run([target], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == 'ok', \
        run.stderr[-3000:]

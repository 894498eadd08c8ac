import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import native_builds  # noqa: E402

from torch_geometric_hot.ops import native  # noqa: E402

pytestmark = pytest.mark.skipif(not native.available(),
                                reason='native kernels unavailable')


def test_sources_of_a_folder_fall_back_to_the_working_tree(tmp_path):
    # a folder with one source: the others come from the working tree
    (tmp_path / 'pair_entries.c').write_text('/* mine */\n')
    out = tmp_path / 'out'
    out.mkdir()
    paths = native_builds.sources(str(tmp_path), str(out))
    assert [os.path.basename(p) for p in paths] == [
        os.path.basename(p) for p in native._SOURCES]
    texts = {os.path.basename(p): open(p).read() for p in paths}
    assert texts['pair_entries.c'] == '/* mine */\n'
    with open(native._SOURCES[0]) as f:
        assert texts[os.path.basename(native._SOURCES[0])] == f.read()


def test_quick_run_compares_two_identical_builds(tmp_path):
    function = native._function
    records = native_builds.main(['--quick', '--out',
                                  str(tmp_path / 'b.json')])
    assert native._function is function  # the library's own restored
    r = records[0]
    assert r['max_abs_diff_out'] == 0 and r['max_abs_diff_grad'] == 0
    assert len(r['a_s']) == len(r['b_s']) == 2
    assert r['ratio_min'] == pytest.approx(r['b_min_s'] / r['a_min_s'])
    assert r['n_edges'] > 0 and (tmp_path / 'b.json').exists()
    assert 'ratio' in native_builds.format_record(r)

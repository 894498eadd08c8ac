import json
import os
import sys

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import compile_times  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    config = torch._dynamo.config
    # main() sets the two capture settings: restored after the test
    with config.patch(capture_scalar_outputs=config.capture_scalar_outputs,
                      capture_dynamic_output_shape_ops=(
                          config.capture_dynamic_output_shape_ops)):
        yield
    torch._dynamo.reset()


def test_quick_run_reports_one_graph_and_writes_json(tmp_path):
    out = tmp_path / 'compile.json'
    result = compile_times.main([
        '--quick', '--configs', 'tokengt_performer', '--root',
        str(tmp_path / 'nci_tpsa'), '--out', str(out)
    ])
    row = result['configs']['tokengt_performer']
    assert row['graphs'] == 1  # fullgraph=True: no graph break
    assert row['recompiles'] <= 1  # the first change of size, at most
    assert row['graphs_in_rounds'] == 0  # the timed steps compile nothing
    assert all(steps <= 2 for steps in row['warmup_steps'])
    assert row['first_step_s'] > 0 and row['eager_ms'] > 0
    assert row['compiled_ms'] > 0
    assert row['compile_s'] > 0 and set(row['phases_s']) == {
        'dynamo', 'aot', 'inductor'}
    assert json.loads(out.read_text())['settings']['backend'] == 'aot_eager'


def test_every_configuration_builds_and_names_its_inputs():
    for name in compile_times.CONFIGS:
        assert isinstance(compile_times.build(name, 8, 1, 2),
                          torch.nn.Module)
    with pytest.raises(SystemExit):
        compile_times.parse_args(['--configs', 'gin'])


def test_regional_run_compiles_the_repeated_blocks(tmp_path):
    result = compile_times.main([
        '--quick', '--regional', '--configs', 'simplicial', '--root',
        str(tmp_path / 'nci_tpsa')
    ])
    row = result['configs']['simplicial']
    assert row['graphs'] == 1  # one block kind, its code shared
    assert row['graphs_in_rounds'] == 0
    assert result['settings']['regional']

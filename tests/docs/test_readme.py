"""The README's quickstart runs as printed, and the README opens with the
project's title."""
import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parents[2] / 'README.md'


def test_readme_opens_with_its_title():
    assert README.read_text().startswith('# torch_geometric_hot\n')


def test_readme_quickstart_runs():
    blocks = re.findall(r'```python\n(.*?)```', README.read_text(), re.S)
    assert blocks, 'the README has no Python example'
    torch.manual_seed(0)
    namespace = {}
    exec(compile(blocks[0], 'README.md', 'exec'), namespace)
    assert namespace['out'].shape == (4, 1)

"""Every example's command line: its ``--help`` is complete plain text,
and ``--device cuda`` without a GPU is a clear error before anything is
written."""
import argparse
import re
import runpy
import sys
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / 'examples'
SCRIPTS = sorted(EXAMPLES.glob('*.py'))
MARKUP = re.compile(r':(class|func|meth|obj|math|data|mod|attr):`|``')


def _parser(script: Path, monkeypatch) -> argparse.ArgumentParser:
    # Run the script as `script --help` in this process and keep the parser
    # that prints the help.
    parsers = []
    monkeypatch.setattr(argparse.ArgumentParser, 'print_help',
                        lambda self, file=None: parsers.append(self))
    monkeypatch.setattr(sys, 'argv', [str(script), '--help'])
    with pytest.raises(SystemExit):
        runpy.run_path(str(script), run_name='__main__')
    assert parsers, f'{script.name} --help printed no help'
    return parsers[-1]


@pytest.mark.parametrize('script', SCRIPTS, ids=lambda path: path.name)
def test_help_is_complete_plain_text(script, monkeypatch):
    parser = _parser(script, monkeypatch)
    description = parser.description or ''
    assert description.rstrip().endswith('.'), \
        f'{script.name}: description cut short: {description!r}'
    assert description.count('(') == description.count(')'), \
        f'{script.name}: description cut short: {description!r}'
    texts = [description] + [action.help or '' for action in parser._actions]
    for text in texts:
        assert not MARKUP.search(text), f'{script.name}: markup in {text!r}'
    undocumented = [
        action.option_strings[-1] for action in parser._actions
        if action.option_strings and not (action.help or '').strip()
    ]
    assert not undocumented, f'{script.name}: no help for {undocumented}'


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is present')
@pytest.mark.parametrize('script', [s for s in SCRIPTS
                                    if s.name != 'ogbg_mol.py'],
                         ids=lambda path: path.name)
def test_cuda_without_a_gpu_is_a_clear_error(script, monkeypatch, tmp_path):
    # (ogbg_mol.py is the training command: tests/train checks its device)
    out = tmp_path / 'out'
    options = {option for action in _parser(script, monkeypatch)._actions
               for option in action.option_strings}
    monkeypatch.setattr(sys, 'argv', [str(script), '--device', 'cuda'] + (
        ['--out', str(out)] if '--out' in options else []))
    with pytest.raises(ValueError, match='--device'):
        runpy.run_path(str(script), run_name='__main__')
    assert not out.exists()

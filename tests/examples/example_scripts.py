"""The example scripts as modules, for the tests of this folder."""
import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / 'examples'


def load_example(name: str) -> ModuleType:
    r"""``examples/<name>.py``, freshly executed as a module (its
    ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES /
                                                  f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

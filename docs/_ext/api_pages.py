"""Sphinx extension: one API page per subpackage of ``torch_geometric_hot``,
generated from the subpackage's ``__all__`` at every build.

A subpackage added later, or a name added to an ``__all__``, appears in the
API reference without editing any page. ``api_entries`` is also what
``tests/docs/test_api_pages.py`` checks the pages against.
"""
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import List, NamedTuple, Optional

PACKAGE = 'torch_geometric_hot'


class ApiEntry(NamedTuple):
    """One public name: where it is exported, what it is, its summary."""
    module: str
    name: str
    kind: str  # 'class', 'function', 'module' or 'data'
    doc: Optional[str]


def subpackages() -> List[str]:
    """The dotted names of the package's subpackages, sorted."""
    package = importlib.import_module(PACKAGE)
    return sorted(f'{PACKAGE}.{info.name}'
                  for info in pkgutil.iter_modules(package.__path__)
                  if info.ispkg)


def _data_doc(module_name: str, name: str) -> Optional[str]:
    # Module-level constants are documented by a ``#:`` comment above their
    # assignment in the module that defines them.
    from sphinx.pycode import ModuleAnalyzer
    module = importlib.import_module(module_name)
    candidates = [module_name] + [
        getattr(obj, '__name__', '') for obj in vars(module).values()
        if inspect.ismodule(obj)
    ]
    for candidate in candidates:
        if not candidate.startswith(PACKAGE):
            continue
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # a compiled or source-less module
            continue
        lines = docs.get(('', name))
        if lines and ''.join(lines).strip():
            return '\n'.join(lines).strip()
    return None


def api_entries(module_name: str) -> List[ApiEntry]:
    """Every name in :obj:`module_name`'s ``__all__``, in that order."""
    module = importlib.import_module(module_name)
    entries = []
    for name in getattr(module, '__all__', []):
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            kind, doc = 'module', obj.__doc__
        elif inspect.isclass(obj):
            kind, doc = 'class', obj.__doc__
        elif callable(obj):
            kind, doc = 'function', obj.__doc__
        else:
            kind, doc = 'data', _data_doc(module_name, name)
        entries.append(ApiEntry(module_name, name, kind, doc))
    return entries


_DIRECTIVE = {
    'class': 'autoclass',
    'function': 'autofunction',
    'module': 'automodule',
}


def _data_lines(target: str, value, doc: Optional[str]) -> List[str]:
    # A constant is described by its ``#:`` comment, found in whichever
    # submodule defines it (autodata would fall back to the docstring of
    # the value's type, e.g. dict's, when the name is re-exported).
    lines = [f'.. data:: {target}']
    shown = repr(value)
    if len(shown) <= 60:
        lines.append(f'   :value: {shown}')
    lines.append('')
    lines += [f'   {line}' if line else ''
              for line in (doc or '').splitlines()]
    lines.append('')
    return lines


def page_text(module_name: str) -> str:
    """The MyST source of one subpackage's API page."""
    module = importlib.import_module(module_name)
    short = module_name.split('.')[-1]
    summary = (inspect.getdoc(module) or '').split('\n\n')[0]
    lines = [f'# `{short}`', '', summary, '', '```{eval-rst}',
             f'.. module:: {module_name}', '']
    for entry in api_entries(module_name):
        target = f'{module_name}.{entry.name}'
        if entry.kind == 'data':
            lines += _data_lines(target, getattr(module, entry.name),
                                 entry.doc)
            continue
        lines.append(f'.. {_DIRECTIVE[entry.kind]}:: {target}')
        if entry.kind == 'class':
            lines += ['   :members:', '   :show-inheritance:']
        elif entry.kind == 'module':
            lines += ['   :members:', '   :no-index:']
        lines.append('')
    lines += ['```', '']
    return '\n'.join(lines)


def write_pages(out_dir: Path) -> List[Path]:
    """Write ``index.md`` and one page per subpackage into :obj:`out_dir`;
    files whose text is unchanged are left alone (no needless rebuild)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = {}
    names = subpackages()
    for module_name in names:
        pages[module_name.split('.')[-1] + '.md'] = page_text(module_name)
    package = importlib.import_module(PACKAGE)
    index = [
        '# API reference', '',
        (inspect.getdoc(package) or '').split('\n\n')[0], '',
        'One page per subpackage, listing every name it exports.', '',
        '```{eval-rst}', f'.. module:: {PACKAGE}', ''
    ] + _data_lines(f'{PACKAGE}.__version__', package.__version__,
                    _data_doc(PACKAGE, '__version__')) + [
        '```', '',
        '```{toctree}', ':maxdepth: 1', ''
    ]
    index += [name.split('.')[-1] for name in names] + ['```', '']
    pages['index.md'] = '\n'.join(index)
    written = []
    for file_name, text in pages.items():
        path = out_dir / file_name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    for stale in set(out_dir.glob('*.md')) - set(written):
        stale.unlink()
    return written


def _generate(app) -> None:
    write_pages(Path(app.srcdir) / 'api')


def setup(app):
    app.connect('builder-inited', _generate)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}

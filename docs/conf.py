# Sphinx configuration of the documentation site. Build it with
#   make docs            (or: bash scripts/docs.sh)
# which runs sphinx-build with warnings as errors, then the doctests.
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / '_ext'))

import torch_geometric_hot  # noqa: E402

project = 'torch_geometric_hot'
author = 'torch_geometric_hot developers'
copyright = '2026, torch_geometric_hot developers'
release = version = torch_geometric_hot.__version__

extensions = [
    'myst_nb',  # MyST Markdown pages and stored notebooks
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    'sphinx.ext.mathjax',
    'sphinx-mathjax-offline',  # ships MathJax into _static: no CDN
    'sphinx.ext.doctest',
    'sphinx.ext.viewcode',
    'matplotlib.sphinxext.plot_directive',
    'api_pages',
]
source_suffix = {'.md': 'myst-nb', '.ipynb': 'myst-nb'}
root_doc = 'index'
exclude_patterns = ['_build', '_ext', 'Thumbs.db', '.DS_Store']

myst_enable_extensions = ['dollarmath', 'amsmath', 'colon_fence']
myst_heading_anchors = 3
nb_execution_mode = 'off'  # notebooks show their stored outputs

autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
autodoc_inherit_docstrings = False  # no torch.nn.Module text on forward()
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # 'Attributes:' as fields, not duplicate entries

plot_basedir = str(DOCS)  # plot:: paths are relative to docs/
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [('png', 110)]

doctest_global_setup = '''
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
'''

html_theme = 'furo'
html_title = 'torch_geometric_hot'
html_static_path = ['_static']
html_css_files = ['custom.css']


def _copy_notebooks(app) -> None:
    # The notebooks live with the examples; the site renders their stored
    # outputs from a copy (docs/notebooks/ is generated, not committed).
    out = Path(app.srcdir) / 'notebooks'
    out.mkdir(exist_ok=True)
    notebooks = sorted((ROOT / 'examples' / 'notebooks').glob('*.ipynb'))
    for notebook in notebooks:
        target = out / notebook.name
        if not target.exists() or target.read_bytes() != notebook.read_bytes():
            shutil.copyfile(notebook, target)
    names = {notebook.name for notebook in notebooks}
    for stale in out.glob('*.ipynb'):
        if stale.name not in names:
            stale.unlink()


def setup(app):
    app.connect('builder-inited', _copy_notebooks)

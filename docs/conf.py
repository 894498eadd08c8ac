# Minimal Sphinx configuration: the Markdown pages (MyST) plus an API page
# generated from the docstrings. Build with
#   pip install sphinx myst-parser && sphinx-build -b html docs build/docs
import os
import sys

sys.path.insert(0, os.path.abspath('..'))

project = 'torch_geometric_hot'
author = 'torch_geometric_hot developers'
extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    'sphinx.ext.mathjax',
    'sphinx.ext.viewcode',
]
source_suffix = {'.md': 'markdown'}
root_doc = 'contents'
exclude_patterns = ['_build']
myst_enable_extensions = ['dollarmath']
myst_heading_anchors = 3
autodoc_member_order = 'bysource'
autodoc_default_options = {'members': True, 'show-inheritance': True}
napoleon_google_docstring = True
html_theme = 'alabaster'

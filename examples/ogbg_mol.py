r"""Train and compare models on OGB molecule benchmarks (``ogbg-mol*`` and
PCQM4Mv2) through OGB's own loaders and evaluators.

This script is the package's training command,
``python -m torch_geometric_hot.train``; ``--help`` lists every option and
model. For example, offline (RDKit's NCI molecules written in the PCQM4Mv2
layout and scored by OGB's evaluator)::

    python examples/ogbg_mol.py --dataset pcqm4mv2 --offline \
        --model hot-kernel,tokengt-lap,gin --out results/ogbg_mol

and on the real ``ogbg-molhiv`` (downloaded by OGB into ``--root``)::

    python examples/ogbg_mol.py --dataset ogbg-molhiv --root data/ogb \
        --model hot-kernel --device cuda --out results/molhiv
"""
from torch_geometric_hot.train import main

if __name__ == '__main__':
    main()

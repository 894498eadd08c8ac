import os.path as osp

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from ogb.lsc import PygPCQM4Mv2Dataset  # noqa: E402

from torch_geometric_hot.datasets import (  # noqa: E402
    load_molecule_benchmark, nci_tpsa_table, ogb_safe_globals,
    write_pcqm4mv2_at_scale)
from torch_geometric_hot.datasets.pcqm4mv2_processing import (  # noqa: E402
    PROCESSED_FILE, process_pcqm4mv2)


@pytest.mark.parametrize('processes', [1, 2])
def test_writes_the_file_ogb_writes(tmp_path, processes):
    folder = write_pcqm4mv2_at_scale(str(tmp_path), 130,
                                     table=nci_tpsa_table(limit=50))
    with ogb_safe_globals():
        ogb = PygPCQM4Mv2Dataset(str(tmp_path))  # OGB's own processing
    path = osp.join(folder, 'processed', PROCESSED_FILE)
    reference = torch.load(path, weights_only=False)
    assert process_pcqm4mv2(folder, processes, chunk_molecules=17) == path
    data, slices = torch.load(path, weights_only=False)
    assert list(data.keys()) == list(reference[0].keys())
    for key in reference[0].keys():
        a, b = reference[0][key], data[key]
        assert a.dtype == b.dtype and torch.equal(a.nan_to_num(-1.0),
                                                  b.nan_to_num(-1.0)), key
    assert list(slices) == list(reference[1])
    for key, value in reference[1].items():
        assert value.dtype == slices[key].dtype
        assert torch.equal(value, slices[key]), key
    with ogb_safe_globals():
        again = PygPCQM4Mv2Dataset(str(tmp_path))  # reads ours
    for i in (0, 77, 129):
        assert torch.equal(again[i].edge_index, ogb[i].edge_index)


def test_the_loader_processes_with_it_and_checks_targets(tmp_path):
    folder = write_pcqm4mv2_at_scale(str(tmp_path), 60,
                                     table=nci_tpsa_table(limit=60))
    bench = load_molecule_benchmark('pcqm4mv2', str(tmp_path), processes=1)
    assert len(bench.dataset) == 60
    assert osp.isfile(osp.join(folder, 'processed', PROCESSED_FILE))
    raw = osp.join(folder, 'raw', 'data.csv.gz')
    table = pd.read_csv(raw)
    train = np.asarray(torch.load(osp.join(folder, 'split_dict.pt'),
                                  weights_only=False)['train'])
    table.loc[train[0], 'homolumogap'] = np.nan
    table.to_csv(raw, index=False)
    with pytest.raises(ValueError, match="'train' targets must all be"):
        process_pcqm4mv2(folder, 1)

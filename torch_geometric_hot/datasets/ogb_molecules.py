r"""OGB molecule benchmarks through the unmodified OGB loaders and
evaluators: any ``ogbg-mol*`` dataset
(:class:`ogb.graphproppred.PygGraphPropPredDataset`, scored by
:class:`ogb.graphproppred.Evaluator`) and PCQM4Mv2
(:class:`ogb.lsc.PygPCQM4Mv2Dataset`, scored by
:class:`ogb.lsc.PCQM4Mv2Evaluator`), with

* loading that works on current torch: OGB reads its processed files and
  splits with a bare ``torch.load``, which since torch 2.6 refuses PyG's
  ``Data`` classes and NumPy arrays; the loaders run with exactly those
  types allow-listed (:func:`ogb_safe_globals`);
* no interactive prompt: OGB asks before large downloads (answered *yes*:
  the dataset was asked for) and when a local copy has no release marker
  (answered *no*: a local folder is never deleted; a warning says so);
* an offline path: with :obj:`offline=True` a missing dataset folder is
  written from the NCI molecules that RDKit ships, labelled with their
  polar surface area or another descriptor RDKit computes
  (:func:`~torch_geometric_hot.datasets.nci_descriptors.nci_descriptor_table`),
  in the dataset's own raw layout, and then read by the same OGB loader;
* model-specific transforms either applied once and cached beside OGB's
  processed file (one cache per transform, so several models share one
  download), or computed batch by batch as the molecules are read, in the
  data loader's workers, and never stored: the choice of :obj:`views`,
  by default stored up to :data:`STORED_VIEWS_LIMIT` molecules and
  computed above (PCQM4Mv2's 3.7 million molecules with stored views do
  not fit 16 GB of memory; see ``docs/ogb.md``);
* molecules read by slicing the collated tensors
  (:class:`~torch_geometric_hot.datasets.collated_molecules.\
CollatedMolecules`), without the per-molecule copy an
  :class:`~torch_geometric.data.InMemoryDataset` keeps of everything it
  has returned;
* PCQM4Mv2's processed file written in bounded memory and in parallel
  (:func:`~torch_geometric_hot.datasets.pcqm4mv2_processing.\
process_pcqm4mv2`: the same file OGB's processing writes, which needs over
  30 GB for the real set), then read by OGB's loader;
* one process at a time per dataset and root: the folder is written,
  downloaded, processed and transformed under a lock file in the root
  (``.{name}.lock``), so separate commands started together on a cold root
  wait for one another instead of each writing into the same folder.
"""
import builtins
import contextlib
import hashlib
import json
import os
import os.path as osp
import re
import shutil
import warnings
import zipfile
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import InMemoryDataset
from torch_geometric.transforms import Compose

from torch_geometric_hot.datasets.atomic_files import held_alone, \
    written_atomically
from torch_geometric_hot.datasets.collated_molecules import \
    CollatedMolecules
from torch_geometric_hot.datasets.pcqm4mv2_processing import (
    PROCESSED_FILE, process_pcqm4mv2)
from torch_geometric_hot.transforms.apply_to_many import apply_to_many
from torch_geometric_hot.datasets.nci_descriptors import (
    DESCRIPTORS, nci_descriptor_table)
from torch_geometric_hot.datasets.ogb_layout import (PCQM4MV2_FOLDER,
                                                     SOURCE_FILE,
                                                     MoleculeTable,
                                                     nci_tpsa_table, ogbg_meta,
                                                     table_digest,
                                                     write_ogbg_mol,
                                                     write_pcqm4mv2)

PCQM4MV2 = 'pcqm4mv2'
#: Where views go: ``'stored'`` (computed once, cached on disk and held in
#: memory), ``'computed'`` (as the molecules are read) or ``'auto'``.
VIEWS = ('auto', 'stored', 'computed')
#: With ``views='auto'``, views are stored for datasets of at most this
#: many molecules and computed as they are read for larger ones.
STORED_VIEWS_LIMIT = 200_000
#: Molecules transformed at once when views are stored.
CHUNK = 4096
_NCI_SOURCE = 'RDKit Data/NCI/first_5k.tpsa.csv'


class MoleculeBenchmark(NamedTuple):
    r"""A loaded molecule benchmark.

    Attributes:
        name (str): ``'ogbg-mol…'`` or ``'pcqm4mv2'``.
        dataset (CollatedMolecules): All molecules (of the OGB dataset, or
            of its copy with stored views).
        split (dict): Index tensors under ``'train'``, ``'valid'`` and
            ``'test'``. For PCQM4Mv2, whose test labels are hidden,
            ``'test'`` is the official validation set and ``'valid'`` a
            seeded hold-out of the official training set.
        num_tasks (int): Targets per molecule.
        task_type (str): ``'regression'`` or ``'classification'``.
        metric (str): The evaluator's metric (``'rocauc'``, ``'ap'``,
            ``'rmse'``, ``'mae'``, ...).
        higher_is_better (bool): Direction of :obj:`metric`.
        evaluate (callable): ``evaluate(y_true, y_pred) -> float`` through
            the OGB evaluator; both :obj:`[N, num_tasks]`.
        folder (str): The dataset folder.
        offline_source (dict, optional): ``SOURCE.json`` of a folder written
            by :mod:`~torch_geometric_hot.datasets.ogb_layout`.
    """
    name: str
    dataset: InMemoryDataset
    split: Dict[str, Tensor]
    num_tasks: int
    task_type: str
    metric: str
    higher_is_better: bool
    evaluate: Callable[[Tensor, Tensor], float]
    folder: str
    offline_source: Optional[dict]
    views: str = 'stored'


class BenchmarkDataError(Exception):
    r"""An error of :func:`load_molecule_benchmark` about the data under
    its :obj:`root` or their download. Each is also the built-in error it
    stands for (:class:`IncompleteFolderError`, :class:`FolderMismatchError`,
    :class:`DownloadError`), and its message starts with the argument at
    fault in quotes (``'root': ...``, ``'offline_molecules': ...``)."""


class IncompleteFolderError(BenchmarkDataError, FileNotFoundError):
    r"""The dataset folder exists but lacks files OGB's loader needs."""


class FolderMismatchError(BenchmarkDataError, ValueError):
    r"""The dataset folder holds other data than the arguments ask for: a
    dataset this library did not write while :obj:`offline=True`, or
    molecules, a table or a target other than :obj:`offline_molecules`,
    :obj:`offline_table` or :obj:`offline_target`."""


class DownloadError(BenchmarkDataError, ConnectionError):
    r"""OGB's download of a missing dataset folder failed (no network, an
    interrupted transfer, a broken archive)."""


def _numpy_core():
    # NumPy 2 moved numpy.core to numpy._core (the old name warns).
    return getattr(np, '_core', None) or np.core


def ogb_safe_globals():
    r"""A context in which :func:`torch.load` with its default
    ``weights_only=True`` accepts what OGB's files hold: PyG's ``Data``
    storage classes and NumPy arrays, nothing more. On exit it withdraws
    only what it added: the types allowed before (PyG allows ``Data`` for
    the whole process) stay allowed."""
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage
    allowed = [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage,
               np.ndarray, np.dtype, _numpy_core().multiarray._reconstruct]
    allowed += [type(np.dtype(t)) for t in (np.int64, np.int32, np.float64,
                                            np.float32, np.bool_)]
    before = torch.serialization.get_safe_globals()
    return torch.serialization.safe_globals(
        [item for item in allowed if item not in before])


@contextlib.contextmanager
def _no_prompts(folder: str):
    original = builtins.input

    def answer(question: str = '') -> str:
        if 'download' in question:
            print(question.strip() + ' [answered y]')
            return 'y'
        warnings.warn(f"{folder} has no OGB release marker: OGB offers to "
                      f"delete and download it again; it is kept (remove it "
                      f"yourself to download afresh)")
        return 'n'

    builtins.input = answer
    try:
        yield
    finally:
        builtins.input = original


def benchmark_name(name: str) -> str:
    r"""The canonical name of a molecule benchmark (``'pcqm4mv2'`` or an
    ``ogbg-mol*`` name OGB knows); a clear error for any other name."""
    name = name.lower()
    if name in (PCQM4MV2, 'pcqm4m-v2'):
        return PCQM4MV2
    ogbg_meta(name)
    return name


def _ogb_folder(name: str, root: str) -> str:
    if name == PCQM4MV2:
        return osp.join(root, PCQM4MV2_FOLDER)
    folder = osp.join(root, '_'.join(name.split('-')))
    return folder + '_pyg' if osp.isdir(folder + '_pyg') else folder


def _missing_files(name: str, folder: str) -> List[str]:
    # the files of the dataset folder that OGB's loader needs and lacks
    if osp.isfile(osp.join(folder, 'processed',
                           'geometric_data_processed.pt')):
        needed = []
    elif name == PCQM4MV2:
        needed = ['raw/data.csv.gz']
    else:
        needed = ['raw/edge.csv.gz', 'raw/num-node-list.csv.gz',
                  'raw/num-edge-list.csv.gz', 'raw/graph-label.csv.gz']
    needed.append('split_dict.pt' if name == PCQM4MV2 else 'split')
    return [p for p in needed if not osp.exists(osp.join(folder, p))]


def _check_files(name: str, folder: str) -> None:
    missing = _missing_files(name, folder)
    if missing:
        raise IncompleteFolderError(
            f"'root': {folder} exists but lacks {missing}: it is not a "
            f"complete {name} folder (remove it to download or write it "
            f"again, or pass as 'root' the folder that holds the real "
            f"download)")


def offline_labels(name: str,
                   table: MoleculeTable) -> Tuple[np.ndarray, str]:
    r"""Labels for :obj:`name`'s tasks from the first target of
    :obj:`table`: the target itself for regression; for classification,
    task :math:`t` of :math:`T` is "target above its
    :math:`(t+1)/(T+1)`-quantile" (one task: above the median)."""
    value = table.targets[:, 0]
    column = table.target_names[0]
    if name == PCQM4MV2:
        return value[:, None], column
    meta = ogbg_meta(name)
    num_tasks = int(meta['num tasks'])
    if meta['task type'] == 'regression':
        return np.repeat(value[:, None], num_tasks, 1), column
    quantiles = np.arange(1, num_tasks + 1) / (num_tasks + 1)
    thresholds = np.nanquantile(value, quantiles)
    labels = (value[:, None] > thresholds[None]).astype(np.float64)
    return labels, (f'{column} above its quantiles '
                    f'{np.round(quantiles, 3).tolist()}')


def write_offline(name: str, root: str,
                  table: Optional[MoleculeTable] = None,
                  derive_labels: bool = True) -> str:
    r"""Writes :obj:`table` (default: the NCI molecules RDKit ships) as
    the dataset :obj:`name` under :obj:`root`.

    Args:
        name (str): The benchmark whose layout and meta information to use.
        root (str): The root folder.
        table (MoleculeTable, optional): The molecules.
        derive_labels (bool, optional): Label the tasks by
            :func:`offline_labels` from the table's first target; with
            :obj:`False` the table's targets are the labels as they are
            (one column per task; one column for PCQM4Mv2).
    """
    table = nci_tpsa_table() if table is None else table
    if derive_labels:
        labels, target = offline_labels(name, table)
    else:
        labels, target = table.targets, ', '.join(table.target_names)
    if name == PCQM4MV2:
        if labels.shape[1] != 1:
            raise ValueError(f"pcqm4mv2 has one target; the table has "
                             f"{labels.shape[1]} ({table.target_names})")
        return write_pcqm4mv2(root, table._replace(targets=labels), target)
    return write_ogbg_mol(root, name, table, labels, target)


class _Transformed(InMemoryDataset):
    # The molecules of an OGB dataset with a pre-transform applied once,
    # cached in their own folder (keyed by the transform's repr).
    def __init__(self, source: InMemoryDataset, folder: str,
                 pre_transform: Callable, transform=None) -> None:
        self.source = source
        super().__init__(folder, transform, pre_transform, log=False)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self):
        return []

    @property
    def processed_file_names(self):
        return ['data.pt']

    def download(self) -> None:
        pass

    def process(self) -> None:
        # in chunks through apply_to_many: the views of many molecules at
        # once, the source's molecules read without its per-molecule cache
        molecules = CollatedMolecules(self.source)
        done = []
        for start in range(0, len(molecules), CHUNK):
            done += apply_to_many(self.pre_transform, molecules.__getitems__(
                range(start, min(start + CHUNK, len(molecules)))))
        with written_atomically(self.processed_paths[0]) as partial:
            self.save(done, partial)


def _stable_key(obj) -> str:
    text = re.sub(r' at 0x[0-9a-fA-F]+', '', repr(obj))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _pcqm_split(official: Dict[str, Tensor], seed: int = 0
                ) -> Dict[str, Tensor]:
    train = torch.as_tensor(official['train']).long()
    test = torch.as_tensor(official['valid']).long()
    holdout = min(test.numel(), train.numel() // 10)
    perm = torch.randperm(train.numel(),
                          generator=torch.Generator().manual_seed(seed))
    return {'train': train[perm[holdout:]].sort().values,
            'valid': train[perm[:holdout]].sort().values, 'test': test}


def _open_ogb(name: str, root: str, folder: str,
              processes: Optional[int] = None):
    # OGB's dataset (downloaded and processed as needed), its split and
    # its evaluator
    with ogb_safe_globals(), _no_prompts(folder):
        if name == PCQM4MV2:
            if osp.isfile(osp.join(folder, 'raw', 'data.csv.gz')) and \
                    not osp.isfile(osp.join(folder, 'processed',
                                            PROCESSED_FILE)):
                # OGB's processing in bounded memory, in parallel
                process_pcqm4mv2(folder, processes)
            from ogb.lsc import PCQM4Mv2Evaluator, PygPCQM4Mv2Dataset
            dataset = PygPCQM4Mv2Dataset(root)
            return (dataset, _pcqm_split(dataset.get_idx_split()),
                    PCQM4Mv2Evaluator())
        from ogb.graphproppred import Evaluator, PygGraphPropPredDataset
        dataset = PygGraphPropPredDataset(name, root)
        official = dataset.get_idx_split()
        return (dataset, {k: torch.as_tensor(official[k]).long()
                          for k in ('train', 'valid', 'test')},
                Evaluator(name))


#: What a failed download of OGB's raises: the network's errors, OGB's
#: "Stopped downloading due to interruption." and a broken archive.
_DOWNLOAD_ERRORS = (OSError, RuntimeError, zipfile.BadZipFile)


def _download_paths(name: str, root: str, folder: str) -> List[str]:
    # what OGB's download of a missing folder creates in the root: the
    # archive, the folder it unpacks (ogbg: then renamed) and the dataset
    # folder
    if name == PCQM4MV2:
        return [osp.join(root, f'{PCQM4MV2_FOLDER}.zip'), folder]
    meta = ogbg_meta(name)
    return [osp.join(root, meta['url'].rpartition('/')[2]),
            osp.join(root, meta['download_name']), folder]


def _remove(path: str) -> None:
    if osp.isdir(path) and not osp.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif osp.lexists(path):
        os.remove(path)


@contextlib.contextmanager
def _removed_on_failure(paths: List[str],
                        keep: Callable[[str], bool] = lambda path: False):
    # those of the paths that do not exist yet are removed if the block
    # fails (but those that keep() accepts then): a half-written dataset
    # folder would fail every later call
    created = [path for path in paths if not osp.lexists(path)]
    try:
        yield
    except BaseException:
        for path in created:
            if not keep(path):
                _remove(path)
        raise


@contextlib.contextmanager
def _made_root(root: str, lock_name: str):
    # makes the root (and its missing parents); when the block fails, the
    # folders made here go again if they hold nothing but the lock file
    if osp.exists(root) and not osp.isdir(root):
        raise NotADirectoryError(f"'root' must be a folder, got the file "
                                 f"{root!r}")
    made = []
    folder = osp.abspath(root)
    while not osp.isdir(folder):
        made.append(folder)
        folder = osp.dirname(folder)
    os.makedirs(root, exist_ok=True)
    try:
        yield
    except BaseException:
        if made and os.listdir(made[0]) in ([], [lock_name]):
            _remove(osp.join(made[0], lock_name))
            for folder in made:  # innermost first, each empty by then
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
        raise


def _open_or_download(name: str, root: str, folder: str,
                      processes: Optional[int] = None):
    # _open_ogb; when OGB downloads the folder and that fails, what the
    # download created is removed (the folder kept if it came whole and
    # its processing failed) and the error says how to go without it
    if osp.isdir(folder):
        return _open_ogb(name, root, folder, processes)

    def whole(path: str) -> bool:
        return path == folder and not _missing_files(name, folder)

    try:
        with _removed_on_failure(_download_paths(name, root, folder), whole):
            return _open_ogb(name, root, folder, processes)
    except _DOWNLOAD_ERRORS as error:
        if osp.isdir(folder):  # downloaded; it failed afterwards
            raise
        raise DownloadError(
            f"'name': downloading {name} into {root} failed "
            f"({type(error).__name__}: {error}): without a network, pass "
            f"'offline' to write the molecules that ship with RDKit in "
            f"{name}'s layout, or as 'root' the folder that holds a copy "
            f"fetched elsewhere") from error


def _note_in_source(folder: str, **fields) -> None:
    # adds fields to the folder's SOURCE.json
    path = osp.join(folder, SOURCE_FILE)
    with open(path) as f:
        source = json.load(f)
    source.update(fields)
    with written_atomically(path) as partial, open(partial, 'w') as f:
        json.dump(source, f, indent=1)


def _write_offline_folder(name: str, root: str, folder: str, target: str,
                          molecules: Optional[int],
                          table: Optional[MoleculeTable]) -> None:
    # the offline folder, removed again if writing it fails; SOURCE.json
    # records the molecules asked for, to refuse another number later
    with _removed_on_failure([folder]):
        if table is not None:
            write_offline(name, root, table, derive_labels=False)
            return
        write_offline(name, root, nci_descriptor_table(target,
                                                       limit=molecules))
        _note_in_source(folder, offline_molecules=molecules)


def counted(count: int, noun: str) -> str:
    r"""``'1 step'``, ``'2 steps'``, ``'1,024 molecules'``: :obj:`count`
    and :obj:`noun`, in the plural unless :obj:`count` is 1."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _held(source: Dict) -> str:
    return (f"{counted(source.get('molecules', 0), 'molecule')} "
            f"({source.get('source')}, targets {source.get('target_names')})")


def _other_data(argument: str, folder: str, held: str,
                asked: str) -> FolderMismatchError:
    return FolderMismatchError(
        f"'{argument}': {folder} holds {held}, not {asked}: give another "
        f"'root', or delete {folder} to write it anew")


def _is_nci(source: Dict) -> bool:
    return source.get('source', '').startswith(_NCI_SOURCE)


def _check_offline_target(source: Dict, target: str, folder: str) -> None:
    # an offline folder keeps the target it was written with
    if target not in DESCRIPTORS:
        raise ValueError(f"'offline_target' must be one of "
                         f"{', '.join(DESCRIPTORS)}, got {target!r}")
    written = (source.get('target_names') or [''])[0]
    wanted = DESCRIPTORS[target].column
    if _is_nci(source) and written != wanted:
        key = next((k for k, d in DESCRIPTORS.items() if d.column == written),
                   None)
        raise _other_data('offline_target', folder,
                          f"the offline molecules labelled with {written} "
                          f"(offline target {key!r})",
                          f"{wanted} ({target!r})")


def _check_offline_molecules(source: Dict, molecules: int,
                             folder: str) -> None:
    # an offline folder keeps the NCI molecules it was written with; one
    # written with more than there are holds them all
    held = source.get('molecules')
    asked = source.get('offline_molecules', held)  # older folders: held
    every = asked is None or asked > held
    if _is_nci(source) and (molecules == held or every and molecules > held):
        return
    raise _other_data('offline_molecules', folder, _held(source),
                      f"the first {molecules:,} NCI molecules")


def _check_offline_table(source: Dict, table: MoleculeTable,
                         folder: str) -> None:
    # an offline folder keeps the table it was written from
    if 'sha1' in source:
        same = source['sha1'] == table_digest(table)
    else:  # written before SOURCE.json held the digest
        same = (source.get('source'), source.get('molecules')) == (
            table.source, len(table.smiles))
    if not same:
        now = ' as it reads now' if table.source == source.get('source') \
            else ''
        raise _other_data('offline_table', folder, _held(source),
                          f"{table.source}{now} "
                          f"({counted(len(table.smiles), 'molecule')}, "
                          f"targets {table.target_names})")


def _check_source(source: Optional[Dict], folder: str,
                  offline_target: str, offline_molecules: Optional[int],
                  offline_table: Optional[MoleculeTable]) -> None:
    # with offline=True: the folder is one this library wrote, from what
    # the arguments ask for
    if source is None:
        raise FolderMismatchError(
            f"'root': {folder} holds a dataset this library did not write "
            f"(it has no {SOURCE_FILE}): drop 'offline' to read it as it "
            f"is, or give another 'root' for the offline molecules")
    if offline_table is not None:
        _check_offline_table(source, offline_table, folder)
        return
    if offline_molecules is not None:
        _check_offline_molecules(source, offline_molecules, folder)
    _check_offline_target(source, offline_target, folder)


def load_molecule_benchmark(name: str, root: str, offline: bool = False,
                            pre_transform: Optional[Callable] = None,
                            transform: Optional[Callable] = None,
                            offline_molecules: Optional[int] = None,
                            offline_table: Optional[MoleculeTable] = None,
                            views: str = 'auto',
                            offline_target: str = 'tpsa',
                            processes: Optional[int] = None
                            ) -> MoleculeBenchmark:
    r"""Loads an OGB molecule benchmark through OGB's own loader and
    evaluator (see the module documentation).

    Args:
        name (str): An ``ogbg-mol*`` name (e.g. ``'ogbg-molhiv'``) or
            ``'pcqm4mv2'``.
        root (str): The folder that holds (or will hold) the dataset folder,
            as OGB's :obj:`root`.
        offline (bool, optional): Write the NCI molecules (or
            :obj:`offline_table`) in the dataset's layout when its folder does
            not exist, instead of downloading.
            An existing folder is only read; with :obj:`offline=True` it must
            be one this library wrote, and from what
            :obj:`offline_molecules`, :obj:`offline_table` and
            :obj:`offline_target` ask for where they are given
            (:class:`FolderMismatchError` otherwise). A failed download
            raises :class:`DownloadError` and leaves nothing it created.
            (default: :obj:`False`)
        pre_transform (callable, optional): Applied once to every molecule
            and cached.
        transform (callable, optional): Applied on every access.
        offline_molecules (int, optional): With :obj:`offline=True`, write
            only the first this many NCI molecules (default: all).
        offline_table (MoleculeTable, optional): With :obj:`offline=True`,
            write these molecules, their targets taken as the labels (e.g.
            :func:`~torch_geometric_hot.datasets.read_molecule_csv` of one's
            own CSV), instead of the NCI molecules.
        views (str, optional): What becomes of :obj:`pre_transform`'s
            output: ``'stored'`` (applied once to every molecule, cached on
            disk beside OGB's processed file and held in memory),
            ``'computed'`` (applied as the molecules are read, a batch at a
            time, in the data loader's workers; nothing stored) or
            ``'auto'`` (stored up to :data:`STORED_VIEWS_LIMIT` molecules,
            computed above). Both give the same molecules.
        offline_target (str, optional): With :obj:`offline=True`, the
            descriptor of
            :data:`~torch_geometric_hot.datasets.nci_descriptors.DESCRIPTORS`
            the NCI molecules are labelled with. (default: ``'tpsa'``)
        processes (int, optional): PCQM4Mv2 only: worker processes of its
            processing (``process_pcqm4mv2`` of
            :mod:`~torch_geometric_hot.datasets.pcqm4mv2_processing`, the
            file OGB's processing writes, in bounded memory; default: the
            CPUs this process may use, at most 16).
    """
    if views not in VIEWS:
        raise ValueError(f"'views' must be one of {VIEWS}, got {views!r}")
    name = benchmark_name(name)
    if name != PCQM4MV2:
        meta = ogbg_meta(name)
    lock = f'.{name}.lock'
    # separate commands on one root prepare the folder one at a time
    with _made_root(root, lock), held_alone(osp.join(root, lock)):
        folder = _ogb_folder(name, root)
        source_path = osp.join(folder, SOURCE_FILE)
        if offline and not osp.isdir(folder):
            _write_offline_folder(name, root, folder, offline_target,
                                  offline_molecules, offline_table)
        if osp.isdir(folder):
            _check_files(name, folder)
        source = None
        if osp.isfile(source_path):
            with open(source_path) as f:
                source = json.load(f)
        if offline:
            _check_source(source, folder, offline_target, offline_molecules,
                          offline_table)
        dataset, split, evaluator = _open_or_download(name, root, folder,
                                                      processes)
        if views == 'auto':
            views = 'stored' if len(dataset) <= STORED_VIEWS_LIMIT else \
                'computed'
        if pre_transform is not None and views == 'stored':
            with ogb_safe_globals():
                dataset = _Transformed(
                    dataset, osp.join(folder, 'processed',
                                      f'tgh_{_stable_key(pre_transform)}'),
                    pre_transform)
        elif pre_transform is not None:
            transform = pre_transform if transform is None else Compose(
                [pre_transform, transform])
        dataset = CollatedMolecules(dataset, transform)
    if name == PCQM4MV2:
        num_tasks, task_type, metric = 1, 'regression', 'mae'
    else:
        num_tasks, metric = int(meta['num tasks']), meta['eval metric']
        task_type = 'regression' if meta['task type'] == 'regression' \
            else 'classification'

    def evaluate(y_true: Tensor, y_pred: Tensor) -> float:
        y_true, y_pred = y_true.detach().cpu(), y_pred.detach().cpu()
        if name == PCQM4MV2:
            return float(evaluator.eval({'y_true': y_true.view(-1),
                                         'y_pred': y_pred.view(-1)})['mae'])
        return float(evaluator.eval({'y_true': y_true.view(-1, num_tasks),
                                     'y_pred': y_pred.view(-1, num_tasks)
                                     })[metric])

    return MoleculeBenchmark(name, dataset, split, num_tasks, task_type,
                             metric, metric in ('rocauc', 'ap', 'acc', 'F1'),
                             evaluate, folder, source, views)

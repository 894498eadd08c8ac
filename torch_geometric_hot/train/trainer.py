r"""One training run: a model of :data:`~torch_geometric_hot.train.zoo.MODELS`
on a :class:`~torch_geometric_hot.datasets.MoleculeBenchmark`, one process
or one rank of ``torchrun``."""
import contextlib
import hashlib
import json
import math
import os
import os.path as osp
import resource
import sys
import time
from typing import Dict, List, Optional

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler, RandomSampler
from torch_geometric.loader import DataLoader

from torch_geometric_hot.data import ModelPlanner, PlannedLoader, \
    real_graphs
from torch_geometric_hot.datasets import (MoleculeBenchmark,
                                          load_molecule_benchmark,
                                          read_molecule_csv)
from torch_geometric_hot.datasets.atomic_files import written_atomically
from torch_geometric_hot.datasets.ogb_molecules import counted
from torch_geometric_hot.train import checkpoint, compiled, recipes
from torch_geometric_hot.train.distributed import (Context, agree, barrier,
                                                   gather, sync_buffers)
from torch_geometric_hot.validation import validation
from torch_geometric_hot.train.versions import software_versions
from torch_geometric_hot.train.zoo import (HEADS, ModelSpec, Settings,
                                           SpecCall, configured,
                                           planning_settings, plans_batches,
                                           predict)

SMOKE_TRAIN_BATCHES, SMOKE_EVAL_BATCHES = 3, 2
METRICS_FILE, SUMMARY_FILE, CURVE_FILE = ('metrics.jsonl', 'summary.json',
                                          'curve.png')


def run_name(model: str, seed: int) -> str:
    return f'{model}_seed{seed}'


def weights_digest(model: torch.nn.Module) -> str:
    r"""A short hash of the model's parameters and buffers."""
    h = hashlib.sha1()
    for name, value in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class TargetScale:
    r"""Regression targets standardised by the training mean and standard
    deviation (NaN-aware); classification targets pass as they are."""
    def __init__(self, y: Tensor, regression: bool) -> None:
        self.regression = regression
        if regression:
            finite = y[~torch.isnan(y)]
            self.mean = float(finite.mean())
            self.std = float(finite.std()) if finite.numel() > 1 else 1.0
            self.std = self.std or 1.0
        else:
            self.mean, self.std = 0.0, 1.0

    def scale(self, y: Tensor) -> Tensor:
        return (y - self.mean) / self.std

    def unscale(self, out: Tensor) -> Tensor:
        return out * self.std + self.mean


def _targets(bench: MoleculeBenchmark, batch) -> Tensor:
    return batch.y.view(-1, bench.num_tasks).float()


def _loss(loss, out: Tensor, y: Tensor) -> Tensor:
    known = ~torch.isnan(y)
    if not bool(known.any()):
        return out.sum() * 0.0
    return loss(out[known].float(), y[known])


def settings(args, seed: int, out: int) -> Settings:
    r"""The :class:`~torch_geometric_hot.train.zoo.Settings` of the
    command's arguments."""
    return Settings(args.hidden, args.layers, out, args.dropout, seed,
                    args.heads or HEADS, args.node_id_dim,
                    tuple(sorted(getattr(args, 'model_options', {}).items())))


def peak_memory_mb(device: torch.device) -> float:
    r"""Peak memory of this process: CUDA allocations on a GPU, the
    resident set size on the CPU."""
    if device.type == 'cuda':
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == 'darwin' else rss / 2**10


def run_config(args, model_name: str, seed: int) -> Dict:
    r"""The arguments of one run of the command."""
    config = dict(vars(args), model=model_name, seed=seed)
    config['betas'] = list(config['betas'])
    config['model_options'] = dict(sorted(config.get('model_options',
                                                     {}).items()))
    return config


class Run:
    r"""Trains one model with one seed (see :func:`train`)."""
    def __init__(self, args, model_name: str, seed: int, ctx: Context,
                 run_dir: Optional[str]) -> None:
        self.args, self.ctx, self.run_dir = args, ctx, run_dir
        self.config = run_config(args, model_name, seed)
        self.seed = seed
        self.spec: ModelSpec = configured(model_name, settings(args, seed, 1))
        self.bench = self._load()
        self.scale = TargetScale(self._train_targets(),
                                 self.bench.task_type == 'regression')
        self.loss = recipes.loss_function(args.loss, self.bench.task_type,
                                          self.bench.metric)
        torch.manual_seed(seed)
        self.settings = settings(args, seed, self.bench.num_tasks)
        model = self.spec.build(self.settings).to(ctx.device)
        self.model = model
        self.num_parameters = sum(p.numel() for p in model.parameters())
        # some blocks leave parameters unused on some batches (e.g. HOT's
        # classes that see no entries of a batch), hence
        # find_unused_parameters
        self.net = DistributedDataParallel(
            model, device_ids=[ctx.device.index] if ctx.device.type == 'cuda'
            else None, find_unused_parameters=True) if ctx.distributed \
            else model
        self.optimizer = recipes.build_optimizer(
            args.optimizer, model.parameters(), args.lr, args.betas,
            args.weight_decay)
        # --compile: the network under torch.compile, fed batches padded to
        # a few sizes (PadToBuckets) and planned for the launch-bound
        # layout (see compiled.py)
        self.compiled = compiled.Compiled(
            self.net, ctx.device, self.spec.pre_transform,
            backend=args.compile_backend) \
            if getattr(args, 'compile', False) else None
        self.steps_per_epoch = -(-self._batches('train') // args.accumulate)
        self.total_steps = args.max_steps or (args.epochs *
                                              self.steps_per_epoch)
        self.scheduler = recipes.StepSchedule(
            self.optimizer, args.schedule, args.warmup_steps,
            self.total_steps)
        self.scaler = recipes.grad_scaler(ctx.device, args.precision)
        self.history: List[Dict] = []
        self.extensions: List[Dict] = []
        self.epoch = 0
        self.step = 0
        self._planning: Optional[ModelPlanner] = None
        self.fitted: Optional[Dict] = None

    # ------------------------------------------------------------------
    def _load(self) -> MoleculeBenchmark:
        # rank 0 writes the offline folder and the transform cache first
        bench = None
        if self.ctx.is_main:
            bench = self._open()
        barrier(self.ctx)
        return bench if bench is not None else self._open()

    def _open(self) -> MoleculeBenchmark:
        args = self.args
        table = None
        if args.csv is not None:
            table = read_molecule_csv(args.csv, args.smiles_column,
                                      args.target_columns.split(','))
            if table.skipped:
                print(f'{args.csv}: skipped '
                      f"{counted(len(table.skipped), 'row')} whose "
                      f'SMILES RDKit cannot parse (first: '
                      f'{table.skipped[0]})', flush=True)
        return load_molecule_benchmark(
            args.dataset, args.root, offline=args.offline,
            pre_transform=self.spec.pre_transform,
            offline_molecules=args.offline_molecules, offline_table=table,
            offline_target=getattr(args, 'offline_target', 'tpsa'),
            views=getattr(args, 'views', 'auto'))

    def _indices(self, part: str) -> Tensor:
        # 'fit': the first --fit-molecules molecules of the training split
        index = self.bench.split['train' if part == 'fit' else part]
        if self.args.smoke:
            batches = SMOKE_EVAL_BATCHES if part in ('valid', 'test') else \
                SMOKE_TRAIN_BATCHES
            index = index[:batches * self.args.batch_size]
        if part == 'fit':
            index = index[:self.args.fit_molecules]
        return index

    def _batches(self, part: str) -> int:
        r"""Batches of this process in an epoch of :obj:`part`."""
        size = self._indices(part).numel()
        if part == 'train' and self.ctx.distributed:
            size = -(-size // self.ctx.world_size)  # DistributedSampler
        return -(-size // self.args.batch_size)

    @property
    def epochs(self) -> int:
        r"""Epochs of the run (the last one cut short at
        :obj:`total_steps`)."""
        return -(-self.total_steps // max(self.steps_per_epoch, 1))

    def _train_targets(self) -> Tensor:
        return self._targets_of('train')

    def _targets_of(self, part: str) -> Tensor:
        # read from the collated targets, not molecule by molecule (which
        # would compute every molecule's views)
        data = self.bench.dataset
        index = self._indices(part)
        y = data._data.y if hasattr(data, '_data') else None
        if y is not None and y.size(0) == len(data):
            return y.view(len(data), -1)[index].float()
        return torch.cat([data[int(i)].y.view(1, -1) for i in index]).float()

    def _loader(self, part: str, epoch: int = 0,
                layout: Optional[torch.device] = None) -> DataLoader:
        # layout: the device the batches are planned for (default: the
        # training device; a benchmark plans a GPU's batches on the CPU)
        subset = self.bench.dataset[self._indices(part)]
        kw = dict(batch_size=self.args.batch_size,
                  num_workers=self.args.num_workers)
        if plans_batches(self.spec):
            # the pair view and the layers' plans built by the workers,
            # for the training device's layout; pinned for the copy
            kw.update(device=layout or self.ctx.device,
                      pin_memory=self.ctx.device.type == 'cuda')
        if self.compiled is not None:  # padded, for the traced layout
            kw.update(self.compiled.loader_options())
        if plans_batches(self.spec):
            kw.update(planner=self._planner(torch.device(kw['device'])))
        if part != 'train':
            # every rank reads its own stride of the split, nothing padded
            return PlannedLoader(subset[self.ctx.rank::self.ctx.world_size],
                                 shuffle=False, **kw)
        if self.ctx.distributed:
            sampler = DistributedSampler(subset, self.ctx.world_size,
                                         self.ctx.rank, shuffle=True,
                                         seed=self.seed)
            sampler.set_epoch(epoch)
        else:
            # the order of epoch e depends on (seed, e) only, so a resumed
            # run reads the batches the uninterrupted one would
            sampler = RandomSampler(subset, generator=torch.Generator()
                                    .manual_seed(self.seed * 100003 + epoch))
        return PlannedLoader(subset, sampler=sampler, **kw)

    def _unchecked(self):
        # the value checks ran in the loader's planning pass: off in a step
        return validation(False) if plans_batches(self.spec) else \
            contextlib.nullcontext()

    def _planner(self, layout: torch.device) -> ModelPlanner:
        # for a GPU's layout a narrow, shallow copy of the model makes the
        # same plans (zoo.planning_settings); for the CPU's, the model
        if self._planning is None:
            model = self.model if layout.type == 'cpu' else \
                self.spec.build(planning_settings(self.settings, self.spec))
            self._planning = ModelPlanner(model, SpecCall(self.spec))
        return self._planning

    def _predict(self, net: torch.nn.Module, batch) -> Tensor:
        if self.compiled is not None:
            return self.compiled(self.spec, batch)
        return predict(net, self.spec, batch)

    def _real(self, per_graph: Tensor, batch) -> Tensor:
        # the real graphs' rows (a compiled run's batches are padded); a
        # copy, as a replayed CUDA graph reuses its output memory
        if self.compiled is None:
            return per_graph
        return real_graphs(per_graph, batch).clone()

    def _progress(self, loader, desc: str):
        if not self.ctx.is_main or self.args.no_progress:
            return loader
        from tqdm import tqdm
        return tqdm(loader, desc=desc, leave=False, dynamic_ncols=True)

    # ------------------------------------------------------------------
    def _optimizer_step(self) -> None:
        args = self.args
        if args.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                           args.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        self.scheduler.step()
        self.step += 1

    def _step_epoch(self, epoch: int) -> Dict:
        self.net.train()
        args = self.args
        total, count, preds, trues = 0.0, 0, [], []
        loader = self._loader('train', epoch)
        batches = len(loader)
        self.optimizer.zero_grad()
        for i, batch in enumerate(self._progress(loader,
                                                 f'epoch {epoch} train')):
            if self.step >= self.total_steps:
                break
            # the gradients of one optimizer step: the mean over its group
            # of batches (the last group of an epoch may be smaller)
            first = i - i % args.accumulate
            group = min(args.accumulate, batches - first)
            last = i - first == group - 1
            batch = batch.to(self.ctx.device, non_blocking=True)
            y = _targets(self.bench, batch)
            sync = self.net.no_sync() if self.ctx.distributed and not last \
                else contextlib.nullcontext()
            with sync:
                with recipes.autocast(self.ctx.device, args.precision), \
                        self._unchecked():
                    out = self._predict(self.net, batch).view_as(y)
                out, y = self._real(out, batch), self._real(y, batch)
                loss = _loss(self.loss, out.float(), self.scale.scale(y))
                self.scaler.scale(loss / group).backward()
            if last:
                self._optimizer_step()
            # summed on the device: a step reads nothing back to the host
            total = total + loss.detach() * y.size(0)
            count += y.size(0)
            preds.append(self.scale.unscale(out.detach().float()))
            trues.append(y)
        total = float(total)
        preds = [torch.cat(preds).cpu()] if preds else []
        trues = [torch.cat(trues).cpu()] if trues else []
        parts = gather(self.ctx, (total, count, torch.cat(preds),
                                  torch.cat(trues)))
        loss = sum(p[0] for p in parts) / max(sum(p[1] for p in parts), 1)
        train_metric = self.bench.evaluate(torch.cat([p[3] for p in parts]),
                                           torch.cat([p[2] for p in parts]))
        return {'loss': loss, 'train': train_metric}

    @torch.no_grad()
    def evaluate(self, part: str) -> Dict:
        r"""The evaluator's metric on a split, every molecule counted once
        across ranks."""
        sync_buffers(self.ctx, self.model)
        self.net.eval()
        preds, trues, index = [], [], self._indices(part)
        positions = torch.arange(index.numel())[self.ctx.rank::
                                                self.ctx.world_size]
        for batch in self._progress(self._loader(part), f'{part}'):
            batch = batch.to(self.ctx.device, non_blocking=True)
            y = _targets(self.bench, batch)
            with recipes.autocast(self.ctx.device, self.args.precision), \
                    self._unchecked():
                out = self._predict(self.model, batch).view_as(y)
            out, y = self._real(out, batch), self._real(y, batch)
            preds.append(self.scale.unscale(out.float()).cpu())
            trues.append(y.cpu())
        empty = torch.empty(0, self.bench.num_tasks)
        parts = gather(self.ctx, (positions, torch.cat(preds or [empty]),
                                  torch.cat(trues or [empty])))
        order = torch.cat([p[0] for p in parts]).argsort()
        pred = torch.cat([p[1] for p in parts])[order]
        true = torch.cat([p[2] for p in parts])[order]
        return {'metric': self.bench.evaluate(true, pred),
                'loss': float(_loss(self.loss, self.scale.scale(pred),
                                    self.scale.scale(true))),
                'count': int(true.size(0))}

    def measure_fit(self) -> Optional[Dict]:
        r"""The fit of the current weights: their loss (in the units of the
        logged loss) and metric in evaluation mode on the first
        ``--fit-molecules`` molecules of the training split; :obj:`None`
        where that is 0. The logged loss is the mean over an epoch's steps
        in training mode, where every batch norm normalises by the batch's
        own statistics and dropout is on."""
        return self.evaluate('fit') if self.args.fit_molecules else None

    # ------------------------------------------------------------------
    def _is_better(self, value: float, best: Optional[float]) -> bool:
        if best is None or math.isnan(best):
            return not math.isnan(value)
        return value > best if self.bench.higher_is_better else value < best

    def _payload(self) -> Dict:
        return {'model': self.model.state_dict(),
                'optimizer': self.optimizer.state_dict(),
                'scheduler': self.scheduler.state_dict(),
                'scaler': self.scaler.state_dict(),
                'epoch': self.epoch, 'step': self.step,
                'extensions': self.extensions,
                'rng': checkpoint.rng_state(self.model),
                'args': {k: self.config[k] for k in
                         checkpoint.RUN_ARGUMENTS},
                'history': self.history,
                'versions': software_versions()}

    def resume(self, state: Dict) -> None:
        r"""Continues from a checkpoint of the same run (with
        ``--extend``, one whose length differs: its schedule is this run's,
        from the step reached)."""
        checkpoint.check_same_run(state['args'], self.config,
                                  self.args.extend)
        extend = self.args.extend
        self.model.load_state_dict(state['model'])
        self.optimizer.load_state_dict(state['optimizer'])
        self.scheduler.load_state_dict(state['scheduler'])
        if state.get('scaler'):
            self.scaler.load_state_dict(state['scaler'])
        self.epoch = int(state['epoch'])
        self.step = int(state['step'])
        self.history = list(state['history'])
        self.extensions = list(state.get('extensions', []))
        if extend:
            if self.total_steps <= self.step:
                raise checkpoint.CheckpointError(
                    f"'--extend': the run in {self.run_dir} has trained "
                    f"{self.step} steps ({self.epoch} epochs); give more "
                    f"--epochs or --max-steps than that (now "
                    f"{self.total_steps} steps)")
            self.extensions.append({
                'at_epoch': self.epoch, 'at_step': self.step,
                'from': {k: state['args'].get(k) for k in
                         checkpoint.LENGTH_ARGUMENTS},
                'to': {k: self.config[k] for k in
                       checkpoint.LENGTH_ARGUMENTS},
                'total_steps': self.total_steps})
        checkpoint.set_rng_state(state['rng'], self.model)
        changed = checkpoint.changed_versions(state.get('versions'),
                                              software_versions())
        if changed and self.ctx.is_main:
            print(f"note: the checkpoint was written with other software "
                  f"({changed}): the run continues, but not bit for bit as "
                  f"it would have without the interruption", flush=True)

    def _write_epoch(self, record: Dict, improved: bool) -> None:
        if self.run_dir is None or not self.ctx.is_main:
            return
        with open(osp.join(self.run_dir, METRICS_FILE), 'a') as f:
            f.write(json.dumps(record) + '\n')
        payload = self._payload()
        checkpoint.save(osp.join(self.run_dir, checkpoint.LAST), payload)
        if improved:
            checkpoint.save(osp.join(self.run_dir, checkpoint.BEST), payload)

    def _log(self, record: Dict) -> None:
        if not self.ctx.is_main:
            return
        m = self.bench.metric
        print(f"{self.config['model']:<22} seed {self.seed}  epoch "
              f"{record['epoch']:3d}  loss {record['loss']:.4f}  {m} train "
              f"{record['train']:.4f} valid {record['valid']:.4f} test "
              f"{record['test']:.4f}  {record['seconds']:.1f} s  "
              f"{record['peak_mb']:.0f} MB", flush=True)

    def fit(self) -> Dict:
        r"""Trains the remaining epochs; returns the run's summary."""
        if self.run_dir is not None and self.ctx.is_main:
            os.makedirs(self.run_dir, exist_ok=True)
        best = None
        for r in self.history:
            best = r['valid'] if self._is_better(r['valid'], best) else best
        if self.ctx.is_main and self.args.warmup_steps >= self.total_steps:
            print(f'note: --warmup-steps {self.args.warmup_steps} is not '
                  f"below the run's {counted(self.total_steps, 'step')}: "
                  f'the rate never reaches --lr {self.args.lr}', flush=True)
        while self.epoch < self.epochs and self.step < self.total_steps:
            self.epoch += 1
            start = time.perf_counter()
            record = {'epoch': self.epoch, **self._step_epoch(self.epoch)}
            for part in ('valid', 'test'):
                result = self.evaluate(part)
                record[part] = result['metric']
                record[f'{part}_count'] = result['count']
            record['seconds'] = time.perf_counter() - start
            record['step'] = self.step
            record['lr'] = self.scheduler.get_last_lr()[0]
            record['peak_mb'] = peak_memory_mb(self.ctx.device)
            record = agree(self.ctx, record)
            improved = self._is_better(record['valid'], best)
            best = record['valid'] if improved else best
            self.history.append(record)
            self._write_epoch(record, improved)
            self._log(record)
        self.fitted = self.measure_fit()
        if self.fitted is not None and self.ctx.is_main:
            fitted = counted(self.fitted['count'], 'training molecule')
            print(f"{self.config['model']:<22} seed {self.seed}  fit of the "
                  f"last weights on {fitted}: loss "
                  f"{self.fitted['loss']:.4f}  {self.bench.metric} "
                  f"{self.fitted['metric']:.4f}",
                  flush=True)
        return self.summary()

    def summary(self) -> Dict:
        r"""The best-validation epoch's metrics and the run's costs."""
        best = None
        for r in self.history:
            if best is None or self._is_better(r['valid'], best['valid']):
                best = r
        mean_pred = self.mean_predictor()
        out = {'dataset': self.bench.name, 'model': self.config['model'],
               'seed': self.seed, 'metric': self.bench.metric,
               'higher_is_better': self.bench.higher_is_better,
               'epochs': len(self.history), 'best_epoch': best['epoch'],
               'final_loss': self.history[-1]['loss'],
               'fitted_loss': None if self.fitted is None else
               self.fitted['loss'],
               'fitted_train': None if self.fitted is None else
               self.fitted['metric'],
               'valid': best['valid'], 'test': best['test'],
               'mean_predictor_test': mean_pred,
               'parameters': self.num_parameters,
               'seconds_per_epoch': sum(r['seconds'] for r in self.history)
               / len(self.history),
               'peak_mb': max(r['peak_mb'] for r in self.history),
               'device': str(self.ctx.device),
               'world_size': self.ctx.world_size,
               'compiled_graphs': None if self.compiled is None else
               self.compiled.graphs,
               # the buckets padded in this process (none with workers)
               'size_buckets': None if self.compiled is None or
               self.args.num_workers else len(self.compiled.pad.seen),
               'weights': weights_digest(self.model),
               'versions': software_versions(),
               'config': {k: self.config[k] for k in
                          checkpoint.RUN_ARGUMENTS},
               'preset': self.args.preset,
               'recipe': self.recipe(),
               'steps': self.step,
               'extensions': self.extensions}
        if self.run_dir is not None and self.ctx.is_main:
            with written_atomically(osp.join(self.run_dir,
                                             SUMMARY_FILE)) as partial:
                with open(partial, 'w') as f:
                    json.dump(out, f, indent=1)
        return out

    def recipe(self) -> Dict:
        r"""Every value in effect: the run's arguments, the model's
        settings and the schedule's length."""
        out = {k: self.config[k] for k in checkpoint.RUN_ARGUMENTS}
        model = self.settings._asdict()
        model['outputs'] = model.pop('out')
        model.pop('options')  # model_options
        out.update(model, steps_per_epoch=self.steps_per_epoch,
                   total_steps=self.total_steps, epochs=self.epochs,
                   effective_batch_size=self.args.batch_size *
                   self.args.accumulate * self.ctx.world_size,
                   explicit=self.args.explicit)
        return out

    def mean_predictor(self) -> float:
        r"""The test metric of predicting the training mean for every
        molecule (the floor every model must beat)."""
        true = self._targets_of('test')
        mean = torch.nanmean(self._train_targets(), dim=0)
        return self.bench.evaluate(true, mean.expand_as(true).clone())

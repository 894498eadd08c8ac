r"""The papers' PCQM4Mv2 recipes as presets of the training command
(``--preset NAME``): model, width, depth, heads, identifiers, dropout,
batch size, loss, optimizer and schedule of one paper's configuration.
Options given on the command line override a preset's values."""
from typing import Any, Dict, NamedTuple

#: Molecules in PCQM4Mv2's training split (the schedules given in epochs
#: by their papers are converted to steps with it).
PCQM4MV2_TRAIN = 3_378_606


class Preset(NamedTuple):
    r"""One paper's configuration.

    Attributes:
        description (str): One line for ``--help``.
        values (dict): Values of the command's options (argument names).
        options (dict): Further model hyperparameters, passed to the
            model's builder as :obj:`Settings.options`.
        reference_parameters (float): The parameter count the paper (or
            its published table) gives, in millions.
        reference (str): Where the configuration and count come from.
    """
    description: str
    values: Dict[str, Any]
    options: Dict[str, Any]
    reference_parameters: float
    reference: str


#: The size limit (elements, ``--size-limit``) of the attention presets: a
#: batch of 1,024 molecules at width 768 pads about 4 * 10^8 elements of
#: queries, keys and values per layer (TokenGT, one block per batch on a
#: GPU), above the library's default guard of 10^8.
_PAPER_BATCH_SIZE_LIMIT = 4 * 10**9


def _steps(epochs: int, batch_size: int) -> int:
    return epochs * -(-PCQM4MV2_TRAIN // batch_size)


_TOKENGT = dict(hidden=768, layers=12, heads=32, dropout=0.1,
                batch_size=1024, loss='l1', optimizer='adamw', lr=2e-4,
                betas=(0.99, 0.999), weight_decay=0.1, warmup_steps=60_000,
                schedule='linear', max_steps=1_000_000, grad_clip=5.0,
                size_limit=_PAPER_BATCH_SIZE_LIMIT)
# Graphormer's embedding tables (512 rows per feature column) and its
# feed-forward width (the token width)
_TOKENGT_MODEL = dict(ffn_ratio=1.0, feature_vocabulary=512,
                      attention_dropout=0.1, node_id_scale=1.0)
_TOKENGT_REF = ('TokenGT (Kim et al. 2022), Table 2 and App. A.3.2')
_HOT = dict(model=['hot-kernel'], hidden=512, layers=8, heads=4,
            dropout=0.1, batch_size=1024, loss='l1', optimizer='adamw',
            lr=2e-4, weight_decay=0.01, warmup_steps=60_000,
            schedule='linear', max_steps=1_000_000,
            size_limit=_PAPER_BATCH_SIZE_LIMIT)
# HOT normalises by layer norm and averages (the command's HOT models:
# batch norm, outputs scaled by log(1 + group size))
_HOT_MODEL = dict(head_channels=16, last_heads=16, last_head_channels=16,
                  norm='layer', readout_norm='layer', size_scaler='none')
_HOT_REF = ('HOT (Kim et al. 2021), Table 6c "Ours (S, phi)" and '
            'App. A.2.5; the paper prints no parameter count: the '
            'reference is that of Table 6c\'s blocks')

#: The presets, by name.
PRESETS: Dict[str, Preset] = {
    'tokengt-lap': Preset(
        'TokenGT (Lap) on PCQM4Mv2: 12 x 768, 32 heads, Laplacian '
        'identifiers (16), AdamW, 60k warm-up, linear decay over 1M steps',
        dict(_TOKENGT, model=['tokengt-lap'], node_id_dim=16),
        dict(_TOKENGT_MODEL, drop_path=0.1, eigvec_dropout=0.2,
             sign_flip=True),
        48.5, _TOKENGT_REF),
    'tokengt-orf': Preset(
        'TokenGT (ORF) on PCQM4Mv2: as tokengt-lap with orthogonal random '
        'identifiers (64)',
        dict(_TOKENGT, model=['tokengt-orf'], node_id_dim=64),
        dict(_TOKENGT_MODEL, drop_path=0.1), 48.6, _TOKENGT_REF),
    'tokengt-lap-performer': Preset(
        'TokenGT (Lap) + Performer on PCQM4Mv2: tokengt-lap with FAVOR+ '
        'attention, without stochastic depth and eigenvector dropout',
        dict(_TOKENGT, model=['tokengt-lap-performer'], node_id_dim=16),
        dict(_TOKENGT_MODEL, attention_dropout=0.0, sign_flip=True), 48.5,
        _TOKENGT_REF),
    'hot-pcqm4m': Preset(
        'HOT second-order Transformer (S, phi) of Table 6c: 8 x Enc2->2'
        '(512, 16, 4), Enc2->0(512, 16, 16), L1, AdamW, 60k warm-up to '
        '2e-4, linear decay to 0 over 1M steps',
        _HOT, _HOT_MODEL, 41.17, _HOT_REF),
    'hot-pcqm4m-short': Preset(
        'HOT (S, phi), short schedule: 100k steps, 5k warm-up to 1e-4',
        dict(_HOT, lr=1e-4, warmup_steps=5_000, max_steps=100_000),
        _HOT_MODEL, 41.17, _HOT_REF),
    'gps-medium': Preset(
        'GraphGPS GPS-medium on PCQM4Mv2: 10 x (GatedGCN + Transformer), '
        '384 wide, 16 heads, AdamW 2e-4, cosine over 150 epochs after 10 '
        'warm-up epochs, batch 256',
        dict(model=['gps'], hidden=384, layers=10, heads=16, dropout=0.1,
             batch_size=256, loss='l1', optimizer='adamw', lr=2e-4,
             weight_decay=0.0, warmup_steps=_steps(10, 256),
             schedule='cosine', epochs=150, max_steps=None, grad_clip=1.0),
        dict(conv='gatedgcn', attention_dropout=0.1, head_layers=2),
        19.4, 'GraphGPS (Rampasek et al. 2022), its PCQM4Mv2 table and '
        'published configs/GPS/pcqm4m-GPSmedium+RWSE.yaml (without '
        'RWSE)'),
    'gin-vn': Preset(
        "OGB-LSC's GIN-virtual baseline on PCQM4Mv2: 5 x 600, OGB's "
        'virtual node, sum pooling, Adam 1e-3, x0.25 every 30 of 100 '
        'epochs, batch 256',
        dict(model=['gin'], hidden=600, layers=5, dropout=0.0,
             batch_size=256, loss='l1', optimizer='adam', lr=1e-3,
             weight_decay=0.0, warmup_steps=0, schedule='step', epochs=100,
             max_steps=None, grad_clip=None),
        dict(virtual_node=True, pooling='sum'),
        6.7, 'OGB-LSC (Hu et al. 2021) PCQM4Mv2 baseline table and '
        'examples/lsc/pcqm4m-v2 (gin-virtual)'),
}

#: What ``--smoke`` sets on a preset (unless given on the command line):
#: tiny batches with gradient accumulation, a few steps, a one-step
#: warm-up, and the width and depth cut to these.
SMOKE_VALUES = dict(batch_size=8, accumulate=2, max_steps=None)
SMOKE_HIDDEN, SMOKE_LAYERS = 64, 2


def smoke_values(preset: Preset) -> Dict[str, Any]:
    r"""The values ``--smoke`` puts in place of :obj:`preset`'s."""
    values = dict(SMOKE_VALUES,
                  hidden=min(preset.values['hidden'], SMOKE_HIDDEN),
                  layers=min(preset.values['layers'], SMOKE_LAYERS),
                  warmup_steps=min(preset.values['warmup_steps'], 1))
    return values

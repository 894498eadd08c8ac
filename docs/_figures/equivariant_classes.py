"""The 15 classes of the 2->2 equivariant basis, drawn from the dense
oracle: for one output entry (outlined), the input entries its class sums
over, on a complete graph of 5 nodes."""
import matplotlib.pyplot as plt
import numpy as np

from torch_geometric_hot.ops import basis
from torch_geometric_hot.testing import dense_basis

N = 5
OUTPUT = {'diag': (1, 1), 'off': (1, 3)}
COLOURS = {'pointwise': '#4c72b0', 'local': '#dd8452', 'global': '#55a868'}

indicators = dense_basis(N, 2, 2)
fig, axes = plt.subplots(3, 5, figsize=(10, 7.4))
for ax, cls in zip(axes.flat, basis(2, 2)):
    i, j = OUTPUT[cls.part]
    group = indicators[cls.partition][i * N + j].view(N, N).numpy()
    image = np.ones((N, N, 3))
    image[group > 0] = plt.matplotlib.colors.to_rgb(COLOURS[cls.kind])
    ax.imshow(image)
    ax.add_patch(
        plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.5,
                      ec='black'))
    ax.set_xticks(range(N))
    ax.set_yticks(range(N))
    ax.tick_params(labelsize=6, length=0)
    ax.set_xticks(np.arange(-0.5, N), minor=True)
    ax.set_yticks(np.arange(-0.5, N), minor=True)
    ax.grid(which='minor', color='#bbbbbb', lw=0.5)
    ax.tick_params(which='minor', length=0)
    where = '(i, i)' if cls.part == 'diag' else '(i, j)'
    ax.set_title(f'{cls.name}: {cls.kind}, out {where}', fontsize=8)
handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
fig.legend(handles, list(COLOURS), loc='lower center', ncol=3, fontsize=8,
           frameon=False)
fig.suptitle('Input entries $A_{kl}$ (row $k$, column $l$) summed by '
             'each class for the outlined output entry; $i = 1$, $j = 3$',
             fontsize=9)
fig.tight_layout(rect=(0, 0.04, 1, 0.96), h_pad=1.8)

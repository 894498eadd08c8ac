import torch

# Unit tests run on tiny tensors, where OpenMP's thread start-up and
# spinning dominate (measured: the HOT kernel gradcheck takes 3 s with one
# thread and 20-120 s with two on a loaded 2-core machine). Benchmarks, not
# tests, measure multi-threaded speed.
torch.set_num_threads(1)

"""Shared test setup."""

import torch

# pytest-xdist runs one worker per core; torch's own thread pool on top of that oversubscribes the cores
# and turns every small kernel into a wait at an OpenMP barrier.
torch.set_num_threads(1)

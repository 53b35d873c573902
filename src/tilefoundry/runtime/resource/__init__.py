"""Weight resources: where ``Module.load`` / ``Module.prepare`` and runtime twins read tensors (spec 1.5).

* :class:`RuntimeResource` -- the protocol: ``load``, ``load_group``, ``subtree``.
* :class:`DictResource` -- over an in-memory ``{"layer0.w": tensor}`` mapping (tests, small tools).
* :class:`SafetensorsResource` -- over a safetensors checkpoint folder, sharded (index + shards) or not.
* Alias values (``alias={canonical: raw}``): a str, a tuple of str (one-to-many group), :class:`Absolute`,
  :class:`Preprocessed`; see :mod:`.alias` for the lookup rule.
* Errors: :class:`WeightNotFoundError` (a KeyError) for an absent weight, :class:`CheckpointError` (a
  ValueError) for a malformed checkpoint; both name the key or file.
"""

from .alias import Absolute, AliasValue, Preprocessed
from .checkpoint_index import INDEX_NAME, SINGLE_NAME, CheckpointLayout
from .dict_resource import DictResource
from .errors import CheckpointError, WeightNotFoundError
from .protocol import RuntimeResource
from .safetensors_resource import SafetensorsResource

__all__ = [
    "INDEX_NAME",
    "SINGLE_NAME",
    "Absolute",
    "AliasValue",
    "CheckpointError",
    "CheckpointLayout",
    "DictResource",
    "Preprocessed",
    "RuntimeResource",
    "SafetensorsResource",
    "WeightNotFoundError",
]

"""Runtime layer: runtime twins, function bodies and their ABI, and the weight resources they load from."""

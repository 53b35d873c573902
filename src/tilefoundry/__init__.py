"""TileFoundry: author a network once, run it on a reference evaluator and on fast runtime twins."""

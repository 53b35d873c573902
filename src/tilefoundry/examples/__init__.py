"""Small worked examples that ship with TileFoundry, so that the commands' ``--help`` examples run as printed
(``tilefoundry check tilefoundry.examples.check_twin:BrokenTwin ...``)."""

"""The ``tilefoundry`` command: one file per subcommand."""

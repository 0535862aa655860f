"""Configuration (foundations): the typed schema, parsing values, the config space on disk, lazy declarations."""

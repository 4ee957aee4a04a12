"""YAML read into located nodes and validated against schemas given as data; shared by the
front end (spec files) and the targets (hardware model files)."""

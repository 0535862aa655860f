"""Models (foundations): loading, hub access, model families, feature capture, inits and layer maps."""

"""Demo material kept out of the core: synthetic scenes and the NDVI demo analysis."""

"""Where data come from: source resolution, fsspec range transport, redaction."""

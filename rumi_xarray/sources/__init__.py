"""Where data come from: where a source lives, resolution, fsspec transport, redaction."""

"""Teaching pages: watch every layer of the defence work."""
